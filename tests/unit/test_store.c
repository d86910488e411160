/*
 * The blob store through its driver seam (registry/storage/store.h), the same assertions for each driver:
 * `test_store` runs the filesystem driver on a temporary directory (unit_store); `test_store s3` runs the s3
 * driver against the test Ceph gateway (integration_store_s3, fixture ceph; exit 77 without it). Sessions created,
 * continued across requests (and across a part boundary), committed with and without the caller's verification,
 * a wrong digest refused, content addressing, ranges, removal, deletion, and what the edge is told.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "registry/storage/store.h"
#include "s3env.h"
#include "tap.h"

static void count(const char *id, double age, void *data)
{
    (void)age;
    if (strncmp(id, "u", 1) == 0)
        (*(int *)data)++;
}

typedef struct {
    char *buf;
    size_t len, cap;
} buf_t;

static int sink(const char *data, size_t len, void *arg)
{
    buf_t *b = arg;
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->buf = realloc(b->buf, b->cap);
    }
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    return 0;
}

static size_t curl_sink(char *d, size_t s, size_t n, void *arg)
{
    return sink(d, s * n, arg) == 0 ? s * n : 0;
}

static const char *header(const berth_resp_t *r, const char *name)
{
    for (size_t i = 0; i < r->nhdrs; i++)
        if (strcmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].value;
    return NULL;
}

/* One request's worth of bytes: open (create or continue), write, close; returns the length before */
static int64_t append(berth_store_t *s, const char *id, int create, const char *data, size_t len)
{
    berth_store_upload_t *u;
    int64_t size = -1;
    berth_err_t err;
    if (berth_store_upload_open(s, id, create, &u, &size, &err) != 0)
        return -1;
    int rc = berth_store_upload_write(u, data, len, &err);
    if (berth_store_upload_close(u, &err) != 0 || rc != 0)
        return -1;
    return size;
}

static int commit(berth_store_t *s, const char *id, const berth_digest_t *d, int verified, berth_err_t *err)
{
    berth_store_upload_t *u;
    int64_t size;
    int rc = berth_store_upload_open(s, id, 0, &u, &size, err);
    if (rc != 0)
        return rc;
    rc = berth_store_upload_commit(u, d, verified, err);
    berth_store_upload_close(u, NULL);
    return rc;
}

typedef struct {
    int n, stop_after, found;
} walk_t;
static berth_digest_t want_digest;

static int walk(const berth_digest_t *d, int64_t size, double age, void *arg)
{
    walk_t *w = arg;
    w->n++;
    if (berth_digest_equal(d, &want_digest) && size == 11 && age < 600)
        w->found = 1;
    return w->stop_after > 0 && w->n >= w->stop_after;
}

static void run(berth_store_t *s, int is_s3, const char *upstream)
{
    berth_err_t err = {0};
    berth_store_upload_t *u = NULL, *u2 = NULL;
    int64_t size = -1;
    const char data[] = "layer bytes";
    berth_digest_t d, other;
    int n = 0;
    buf_t got = {0};

    ok(berth_store_upload_open(s, "u1", 0, &u, &size, &err) == BERTH_ENOTFOUND, "an unknown upload is not found");
    ok(berth_store_upload_open(s, "u1", 1, &u, &size, &err) == BERTH_OK && size == 0, "created, empty");
    ok(berth_store_upload_write(u, data, 5, &err) == 0, "bytes appended");
    if (!is_s3) {
        ok(berth_store_upload_open(s, "u1", 0, &u2, &size, &err) == BERTH_ECONFLICT,
           "a second writer is refused while the first holds it");
        berth_err_clear(&err);
    }
    ok(berth_store_upload_close(u, &err) == 0, "the request ends: its bytes are kept");
    ok(append(s, "u1", 0, data + 5, sizeof(data) - 6) == 5, "the next request continues at offset 5");
    ok(berth_store_upload_size(s, "u1", &size) == BERTH_OK && size == (int64_t)sizeof(data) - 1,
       "its size is what was written (%lld)", (long long)size);
    ok(berth_store_upload_each(s, count, &n) >= 1 && n == 1, "the purge walk sees one upload (%d)", n);

    berth_digest_of(&d, BERTH_DIGEST_SHA256, data, sizeof(data) - 1);
    berth_digest_of(&other, BERTH_DIGEST_SHA256, "other", 5);
    ok(commit(s, "u1", &other, 0, &err) == BERTH_EDIGEST && err.oci == BERTH_OCI_DIGEST_INVALID,
       "a wrong digest is refused on read-back: %s", err.msg);
    ok(berth_store_blob_stat(s, &other, &size, NULL) == BERTH_ENOTFOUND, "and nothing is stored under it");
    berth_store_upload_remove(s, "u1");
    ok(append(s, "u1b", 1, data, sizeof(data) - 1) == 0 && commit(s, "u1b", &d, 0, &err) == BERTH_OK,
       "commit, checked by the store: %s", err.msg);
    ok(berth_store_blob_stat(s, &d, &size, &err) == 0 && size == (int64_t)sizeof(data) - 1, "the blob has its size");
    ok(berth_store_blob_read(s, &d, 6, 5, sink, &got, &err) == 0 && got.len == 5 && memcmp(got.buf, "bytes", 5) == 0,
       "a range of it");
    size_t sl = 0;
    char *all = berth_store_blob_slurp(s, &d, 100, &sl);
    ok(all != NULL && sl == sizeof(data) - 1 && strcmp(all, data) == 0, "all of it");
    free(all);
    ok(berth_store_blob_slurp(s, &d, 4, &sl) == NULL, "not when it is larger than asked for");
    ok(berth_store_upload_size(s, "u1b", &size) == BERTH_ENOTFOUND, "the session is gone after commit");

    /* the same content again, verified by the caller: the stored blob stays */
    ok(append(s, "u2", 1, data, sizeof(data) - 1) == 0 && commit(s, "u2", &d, 1, &err) == BERTH_OK,
       "committing an already stored blob succeeds");
    ok(berth_store_upload_size(s, "u2", &size) == BERTH_ENOTFOUND && berth_store_blob_stat(s, &d, &size, &err) == 0 &&
           size == (int64_t)sizeof(data) - 1,
       "blob intact, session dropped");

    /* more than one part (the s3 test runs with 5 MiB parts), requests ending off part boundaries */
    size_t big = (11u << 20) + 123;
    char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)(i * 7 + i / 4096);
    berth_digest_t bd;
    berth_digest_of(&bd, BERTH_DIGEST_SHA256, b, big);
    ok(append(s, "u4", 1, b, 3u << 20) == 0 && append(s, "u4", 0, b + (3u << 20), 4u << 20) == (3 << 20) &&
           append(s, "u4", 0, b + (7u << 20), big - (7u << 20)) == (7 << 20),
       "11 MiB in three requests");
    ok(berth_store_upload_size(s, "u4", &size) == 0 && size == (int64_t)big, "the session's size is all of it");
    ok(commit(s, "u4", &bd, 0, &err) == 0, "committed and checked: %s", err.msg);
    got.len = 0;
    ok(berth_store_blob_read(s, &bd, (5 << 20) - 3, 10, sink, &got, &err) == 0 && got.len == 10 &&
           memcmp(got.buf, b + (5 << 20) - 3, 10) == 0,
       "the bytes across a part boundary are in order");
    got.len = 0;
    ok(berth_store_blob_read(s, &bd, 0, -1, sink, &got, &err) == 0 && got.len == big && memcmp(got.buf, b, big) == 0,
       "all 11 MiB read back equal");
    free(b);

    if (is_s3) { /* sessions of several requests are read back whatever the caller says (no writer lock on s3) */
        ok(append(s, "u6", 1, data, 3) == 0 && append(s, "u6", 0, data + 3, 3) == 3 &&
               commit(s, "u6", &other, 1, &err) == BERTH_EDIGEST,
           "a session written by two requests is checked by the store even when the caller vouches for it");
        berth_store_upload_remove(s, "u6");
    }
    ok(append(s, "u3", 1, data, 3) == 0, "a third upload");
    berth_store_upload_remove(s, "u3");
    berth_store_upload_remove(s, "u3");
    ok(berth_store_upload_size(s, "u3", &size) == BERTH_ENOTFOUND, "remove deletes it; removing twice is fine");

    ok(berth_store_put_upload(s, "u5", "made", 4, &other, &err) != 0, "put_upload refuses bytes that do not match the digest");
    berth_digest_t md;
    berth_digest_of(&md, BERTH_DIGEST_SHA256, "made", 4);
    ok(berth_store_put_upload(s, "u5", "made", 4, &md, &err) == 0 && berth_store_blob_stat(s, &md, &size, NULL) == BERTH_ENOTFOUND,
       "put_upload prepares a blob Berth makes itself, not yet visible");
    ok(berth_store_upload_place(s, "u5", &md, &err) == 0 && berth_store_blob_stat(s, &md, &size, &err) == 0 && size == 4 &&
           berth_store_upload_size(s, "u5", &size) == BERTH_ENOTFOUND,
       "placed, it is the blob and the session is gone");
    want_digest = d;

    /* what the edge is told */
    berth_resp_t r;
    berth_resp_init(&r);
    berth_store_set_edge_prefix(s, "/_berth/blobs/", "/_berth/blob-heads/");
    berth_store_blob_serve(s, &d, (int64_t)sizeof(data) - 1, "GET", &r);
    const char *x = header(&r, "x-accel-redirect");
    ok(r.status == 200 && x != NULL && strncmp(x, "/_berth/blobs/", 14) == 0, "a blob answer sends the edge to %s",
       x != NULL ? x : "(none)");
    if (is_s3 && x != NULL) {
        char url[4096];
        snprintf(url, sizeof(url), "%s/%s", upstream, x + 14);
        got.len = 0;
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &got);
        curl_easy_setopt(h, CURLOPT_RANGE, "6-10");
        long st = 0;
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        curl_easy_cleanup(h);
        ok(st == 206 && got.len == 5 && memcmp(got.buf, "bytes", 5) == 0,
           "the gateway serves that presigned path with a Range (%ld)", st);
    }
    berth_resp_dispose(&r);
    if (is_s3) {
        berth_resp_init(&r);
        berth_store_blob_serve(s, &d, (int64_t)sizeof(data) - 1, "HEAD", &r);
        x = header(&r, "x-accel-redirect");
        ok(x != NULL && strncmp(x, "/_berth/blob-heads/", 19) == 0 && strstr(x, "X-Amz-Signature=") != NULL,
           "a HEAD goes to the edge's HEAD location, to ask the gateway whether the object is there (%s)",
           x != NULL ? x : "(none)");
        berth_resp_dispose(&r);
        berth_resp_init(&r);
        berth_store_blob_serve(s, &d, 0, "GET", &r);
        ok(r.status == 200 && r.len == 0 && header(&r, "x-accel-redirect") == NULL && header(&r, "location") == NULL,
           "a blob of no bytes is answered without the gateway (the edge's slice Range would get 416)");
        berth_resp_dispose(&r);
    }

    walk_t w = {0};
    ok(berth_store_blob_each(s, walk, &w) == 0 && w.n == 3 && w.found, "the blob walk sees the 3 blobs (%d), with size and digest",
       w.n);
    w.stop_after = 1;
    w.n = 0;
    ok(berth_store_blob_each(s, walk, &w) == 1 && w.n == 1, "a walk stops when asked");
    ok(berth_store_blob_remove(s, &d, &err) == 0 && berth_store_blob_stat(s, &d, &size, NULL) == BERTH_ENOTFOUND &&
           berth_store_blob_remove(s, &d, &err) == 0,
       "remove deletes a blob; removing twice is fine");
    free(got.buf);
}

int main(int argc, char **argv)
{
    berth_err_t err = {0};
    berth_store_t *s = NULL;
    if (argc > 1 && strcmp(argv[1], "s3") == 0) {
        const char *dir = getenv("BERTH_TEST_CEPH_DIR");
        char v[S3ENV_N][256] = {{0}}, prefix[64];
        if (dir == NULL || s3env_load(dir, v) != 0) {
            printf("1..0 # SKIP no test Ceph (BERTH_TEST_CEPH_DIR/s3.env; fixture ceph)\n");
            return 77;
        }
        snprintf(prefix, sizeof(prefix), "store-%ld-%d", (long)time(NULL), (int)getpid());
        berth_store_s3_conf_t c = {.s3 = {.endpoint = v[0],
                                          .region = v[1],
                                          .bucket = v[2],
                                          .prefix = prefix,
                                          .access_key = v[3],
                                          .secret_key = v[4],
                                          .path_style = 1,
                                          .tls_verify = 1,
                                          .timeout_ms = 10000,
                                          .retries = 2},
                                   .part_size = 5 << 20};
        ok(berth_store_open_s3(&s, &c, &err) == 0, "the s3 driver opens on the test bucket: %s", err.msg);
        berth_store_s3_conf_t bad = c;
        bad.s3.bucket = "missing-bucket";
        berth_store_t *b = NULL;
        ok(berth_store_open_s3(&b, &bad, &err) != 0 && strstr(err.msg, "does not exist") != NULL, "a missing bucket stops it: %s",
           err.msg);
        bad = c;
        bad.s3.secret_key = "not-the-secret";
        ok(berth_store_open_s3(&b, &bad, &err) != 0 && strstr(err.msg, "refuses the credentials") != NULL,
           "wrong credentials stop it: %s", err.msg);
        ok(strcmp(berth_store_driver(s), "s3") == 0, "driver name");
        run(s, 1, v[0]);
        berth_store_close(s);
        return tap_done();
    }
    char root[] = "/tmp/berth-test-store-XXXXXX";
    ok(mkdtemp(root) != NULL && berth_store_open(&s, root, &err) == BERTH_OK, "a store opens on an empty directory");
    ok(strcmp(berth_store_driver(s), "filesystem") == 0, "driver name");
    run(s, 0, NULL);
    berth_store_edge_t e;
    berth_store_edge(s, &e);
    ok(e.dir != NULL && strncmp(e.dir, root, strlen(root)) == 0 && e.upstream == NULL, "the edge reads files from %s", e.dir);
    berth_store_close(s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ok(system(cmd) == 0, "cleanup"); // NOLINT(cert-env33-c): removes the test's own mkdtemp directory
    return tap_done();
}
