#include "registry/isa/sqfs_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_FAILED 4
#define EXIT_OFF 5

/* The job as GET …/artifacts/{digest}/squashfs says (queued when the project converts on pull); NULL on errors */
static json_t *job_of(berth_client_t *client, const char *name, const char *digest, int *rc)
{
    const char *slash = strchr(name, '/');
    char url[2048];
    CURL *esc = curl_easy_init();
    char *r1 = curl_easy_escape(esc, slash + 1, 0), *r2 = curl_easy_escape(esc, r1, 0);
    snprintf(url, sizeof(url), "/api/v2.0/projects/%.*s/repositories/%s/artifacts/%s/squashfs", (int)(slash - name), name, r2,
             digest);
    curl_free(r1);
    curl_free(r2);
    curl_easy_cleanup(esc);
    berth_http_t h;
    if (berth_client_do(client, "GET", url, (const char *const[]){"Accept: application/json", NULL}, NULL, 0, &h) != 0) {
        fprintf(stderr, "berth-isa: %s: no answer\n", url);
        *rc = 1;
        return NULL;
    }
    json_t *j = h.status == 200 || h.status == 202 ? json_loads(h.body != NULL ? h.body : "", 0, NULL) : NULL;
    if (j == NULL) {
        fprintf(stderr, "berth-isa: squashfs of %s@%s: HTTP %ld %s\n", name, digest, h.status, h.body != NULL ? h.body : "");
        *rc = h.status == 404 ? EXIT_OFF : 1;
    }
    berth_http_dispose(&h);
    return j;
}

/* sha256 of a file, "sha256:<hex>" */
static int file_digest(const char *path, char out[80])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    char *buf = malloc(1 << 20);
    ssize_t n;
    while ((n = read(fd, buf, 1 << 20)) > 0)
        EVP_DigestUpdate(ctx, buf, (size_t)n);
    unsigned char md[32];
    EVP_DigestFinal_ex(ctx, md, NULL);
    EVP_MD_CTX_free(ctx);
    free(buf);
    close(fd);
    if (n < 0)
        return -1;
    int k = snprintf(out, 80, "sha256:");
    for (int i = 0; i < 32; i++)
        k += snprintf(out + k, (size_t)(80 - k), "%02x", md[i]);
    return 0;
}

static int sink(void *ctx, const char *data, size_t len, int64_t total)
{
    (void)total;
    return fwrite(data, 1, len, ctx) == len ? 0 : -1;
}

/* Download blob `blob` of `name` into `final`, resuming `partial`; the digest decides, then rename */
static int download(berth_client_t *client, const char *name, const char *blob, long long size, const char *partial,
                    const char *final)
{
    struct stat st;
    long long have = stat(partial, &st) == 0 ? (long long)st.st_size : 0;
    if (have > size)
        have = 0; /* not ours to continue */
    FILE *f = fopen(partial, have > 0 ? "ab" : "wb");
    if (f == NULL) {
        fprintf(stderr, "berth-isa: %s: %s\n", partial, strerror(errno));
        return 1;
    }
    char url[1024], range[64];
    snprintf(url, sizeof(url), "/v2/%s/blobs/%s", name, blob);
    snprintf(range, sizeof(range), "Range: bytes=%lld-", have);
    berth_http_t h;
    int rc = 0;
    if (have < size) {
        const char *hdrs[] = {range, NULL};
        rc = berth_client_get_to(client, url, have > 0 ? hdrs : NULL, sink, f, &h);
        /* a server ignoring Range answers 200 with everything: start the file over */
        if (rc == 0 && have > 0 && h.status == 200) {
            berth_http_dispose(&h);
            if (freopen(partial, "wb", f) == NULL) {
                fprintf(stderr, "berth-isa: %s: %s\n", partial, strerror(errno));
                return 1;
            }
            rc = berth_client_get_to(client, url, NULL, sink, f, &h);
        }
        if (rc != 0 || (h.status != 200 && h.status != 206)) {
            fprintf(stderr, "berth-isa: GET %s: %s %ld (partial file kept for a retry)\n", url,
                    rc != 0 ? "transfer failed" : "HTTP", h.status);
            rc = 1;
        }
        berth_http_dispose(&h);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = 1;
    fclose(f);
    if (rc != 0)
        return rc;
    char got[80];
    if (file_digest(partial, got) != 0 || strcmp(got, blob) != 0) {
        fprintf(stderr, "berth-isa: %s: digest %s, expected %s; removed\n", partial, got, blob);
        unlink(partial);
        return 1;
    }
    if (rename(partial, final) != 0) {
        fprintf(stderr, "berth-isa: rename %s: %s\n", final, strerror(errno));
        return 1;
    }
    return 0;
}

int berth_isa_squashfs(berth_client_t *client, const char *name, const char *digest, const char *cache, const char *wait)
{
    if (strchr(name, '/') == NULL) {
        fprintf(stderr, "berth-isa: --squashfs needs a Berth repository PROJECT/NAME\n");
        return 2;
    }
    long deadline = wait != NULL ? strtol(wait, NULL, 10) : 600;
    int rc = 0;
    json_t *job = NULL;
    for (long waited = 0;; waited++) {
        json_decref(job);
        if ((job = job_of(client, name, digest, &rc)) == NULL)
            return rc;
        const char *status = json_string_value(json_object_get(job, "status"));
        if (status != NULL && strcmp(status, "done") == 0)
            break;
        if (status != NULL && strcmp(status, "failed") == 0) {
            fprintf(stderr, "berth-isa: the squashfs of %s@%s failed: %s\n", name, digest,
                    json_string_value(json_object_get(job, "reason")));
            json_decref(job);
            return EXIT_FAILED;
        }
        if (waited >= deadline) {
            fprintf(stderr, "berth-isa: the squashfs of %s@%s is still %s after %ld s\n", name, digest, status, deadline);
            json_decref(job);
            return 1;
        }
        if (waited % 10 == 0)
            fprintf(stderr, "berth-isa: squashfs of %s@%s %s (%.0f%%)\n", name, digest, status,
                    100 * json_real_value(json_object_get(job, "progress")));
        sleep(1);
    }
    const char *pub = json_string_value(json_object_get(job, "published_path"));
    const char *blob = json_string_value(json_object_get(job, "digest"));
    long long size = (long long)json_integer_value(json_object_get(job, "size"));
    struct stat st;
    /* the shared file system: no byte from Berth (the size tells a whole file from one mid-copy elsewhere) */
    if (pub != NULL && stat(pub, &st) == 0 && S_ISREG(st.st_mode) && (long long)st.st_size == size) {
        printf("%s\n", pub);
        json_decref(job);
        return 0;
    }
    char dir[1024], final[1400], partial[1400];
    const char *c = cache != NULL ? cache : getenv("BERTH_SQFS_CACHE");
    snprintf(dir, sizeof(dir), "%s", c != NULL && c[0] ? c : "/var/tmp/berth-sqfs");
    mkdir(dir, 0755);
    snprintf(final, sizeof(final), "%s/%s.sqsh", dir, digest);
    snprintf(partial, sizeof(partial), "%s/.%s.partial", dir, blob != NULL ? blob : "x");
    if (stat(final, &st) == 0 && (long long)st.st_size == size) { /* downloaded before: content-addressed */
        printf("%s\n", final);
        json_decref(job);
        return 0;
    }
    rc = blob != NULL ? download(client, name, blob, size, partial, final) : 1;
    if (rc == 0)
        printf("%s\n", final);
    json_decref(job);
    return rc;
}
