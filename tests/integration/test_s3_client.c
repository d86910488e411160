/*
 * The S3 client (registry/storage/s3.c) against a real Ceph RADOS Gateway (fixture ceph, deploy/berth-ceph;
 * exit 77 without it): object operations, multipart uploads, listing, the three facts of signing with libcurl
 * that RGW depends on (pinned so a libcurl upgrade cannot change them silently), presigned URLs, a missing
 * bucket and wrong credentials, retries on 503 SlowDown, and a paused gateway: a listener of our own in front of
 * the shared gateway that takes no connection (as a SIGSTOPped gateway: the kernel's backlog, no answer) and then
 * starts relaying to it, so the suites beside this one on the gateway are never paused.
 */
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "registry/storage/s3.h"
#include "s3env.h"
#include "tap.h"

static char env[S3ENV_N][256];

typedef struct {
    char *buf;
    size_t len, cap;
} sinkbuf_t;

static int sink(const char *data, size_t len, void *arg)
{
    sinkbuf_t *b = arg;
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->buf = realloc(b->buf, b->cap);
    }
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    return 0;
}

static void collect(const char *key, int64_t size, time_t mtime, void *arg)
{
    (void)size;
    if (mtime < time(NULL) - 600 || mtime > time(NULL) + 600)
        return; /* LastModified is parsed */
    if (strncmp(key, "list/", 5) == 0)
        (*(int *)arg)++;
}

static size_t curl_sink(char *d, size_t s, size_t n, void *arg)
{
    return sink(d, s * n, arg) == 0 ? s * n : 0;
}

/* A plain GET (no signing) of a URL; returns the status */
static long plain_get(const char *url, const char *range, sinkbuf_t *out)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (range != NULL)
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return status;
}

/* A fake gateway that answers every request 503 SlowDown and counts them */
static int slow_fd, slow_hits;
static void *slow_server(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(slow_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char buf[8192];
        (void)!read(c, buf, sizeof(buf));
        __atomic_add_fetch(&slow_hits, 1, __ATOMIC_SEQ_CST);
        const char body[] =
            "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
        char resp[512];
        int n = snprintf(resp, sizeof(resp), "HTTP/1.1 503 Slow Down\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                         strlen(body), body);
        (void)!write(c, resp, (size_t)n);
        close(c);
    }
}

/* The paused gateway: relay_fd listens and takes nothing until relay_accept runs, which relays each connection to
 * the real gateway (relay_up) */
static int relay_fd;
static struct sockaddr_in relay_up;
static void *relay_conn(void *arg)
{
    int c = (int)(intptr_t)arg, u = socket(AF_INET, SOCK_STREAM, 0);
    if (u >= 0 && connect(u, (struct sockaddr *)&relay_up, sizeof(relay_up)) == 0) {
        struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = u, .events = POLLIN}};
        char buf[16384];
        while (poll(p, 2, 10000) > 0) {
            int from = (p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 0 : 1;
            ssize_t n = read(p[from].fd, buf, sizeof(buf));
            if (n <= 0 || send(p[1 - from].fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
                break;
        }
    }
    if (u >= 0)
        close(u);
    close(c);
    return NULL;
}
static void *relay_accept(void *arg)
{
    (void)arg;
    for (int c; (c = accept(relay_fd, NULL, NULL)) >= 0;) {
        pthread_t t;
        if (pthread_create(&t, NULL, relay_conn, (void *)(intptr_t)c) == 0)
            pthread_detach(t);
        else
            close(c);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
    const char *dir = getenv("BERTH_TEST_CEPH_DIR");
    if (dir == NULL || s3env_load(dir, env) != 0) {
        printf("1..0 # SKIP no test Ceph (BERTH_TEST_CEPH_DIR/s3.env; fixture ceph)\n");
        return 77;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    berth_err_t err = {0};
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "t%ld-%d", (long)time(NULL), (int)getpid());
    berth_s3_conf_t conf = {.endpoint = env[0],
                            .region = env[1],
                            .bucket = env[2],
                            .prefix = prefix,
                            .access_key = env[3],
                            .secret_key = env[4],
                            .path_style = 1,
                            .tls_verify = 1,
                            .timeout_ms = 5000,
                            .retries = 2};
    berth_s3_t *s3 = berth_s3_new(&conf);
    ok(berth_s3_check_bucket(s3, &err) == 0, "the bucket is reachable: %s", err.msg);

    /* start-up checks: one clear sentence each */
    berth_s3_conf_t bad = conf;
    bad.bucket = "no-such-bucket";
    berth_s3_t *b = berth_s3_new(&bad);
    ok(berth_s3_check_bucket(b, &err) != 0 && strstr(err.msg, "bucket no-such-bucket does not exist") != NULL, "missing bucket: %s",
       err.msg);
    berth_s3_free(b);
    bad = conf;
    bad.secret_key = "wrong-secret-wrong-secret-wrong-secret00";
    b = berth_s3_new(&bad);
    ok(berth_s3_check_bucket(b, &err) != 0 && strstr(err.msg, "refuses the credentials") != NULL, "wrong secret: %s", err.msg);
    berth_s3_free(b);

    /* objects */
    const char data[] = "0123456789abcdefghij";
    int64_t size = 0;
    ok(berth_s3_put(s3, "obj/a", data, 20, &err) == 0, "PUT an object: %s", err.msg);
    ok(berth_s3_head(s3, "obj/a", &size, &err) == 0 && size == 20, "HEAD gives its size (%lld)", (long long)size);
    sinkbuf_t got = {0};
    ok(berth_s3_get(s3, "obj/a", 5, 4, sink, &got, &err) == 0 && got.len == 4 && memcmp(got.buf, "5678", 4) == 0,
       "GET with Range returns the bytes asked for");
    got.len = 0;
    ok(berth_s3_get(s3, "obj/a", 0, -1, sink, &got, &err) == 0 && got.len == 20 && memcmp(got.buf, data, 20) == 0, "GET all");
    ok(berth_s3_copy(s3, "obj/a", "obj/b", &err) == 0 && berth_s3_head(s3, "obj/b", &size, &err) == 0 && size == 20,
       "server-side copy: %s", err.msg);
    ok(berth_s3_delete(s3, "obj/a", &err) == 0 && berth_s3_head(s3, "obj/a", &size, &err) == BERTH_ENOTFOUND,
       "DELETE, then HEAD is not found");
    ok(berth_s3_delete(s3, "obj/a", &err) == 0, "deleting a missing object is fine");
    got.len = 0;
    ok(berth_s3_get(s3, "obj/a", 0, -1, sink, &got, &err) == BERTH_ENOTFOUND && got.len == 0, "GET of a missing object: not found");

    /* multipart: a 5 MiB part and a small last one, then one part copied server-side */
    size_t p1 = 5u << 20;
    char *big = malloc(p1);
    for (size_t i = 0; i < p1; i++)
        big[i] = (char)('a' + i % 26);
    char uid[128], e1[128], e2[128];
    ok(berth_s3_mpu_begin(s3, "mpu/x", uid, &err) == 0 && uid[0] != '\0', "initiate a multipart upload (?uploads=): %s", err.msg);
    ok(berth_s3_mpu_part(s3, "mpu/x", uid, 1, big, p1, e1, &err) == 0, "part 1 (5 MiB): %s", err.msg);
    ok(berth_s3_mpu_part(s3, "mpu/x", uid, 2, "tail", 4, e2, &err) == 0, "part 2 (4 bytes)");
    const char *etags[] = {e1, e2};
    ok(berth_s3_mpu_complete(s3, "mpu/x", uid, 2, etags, &err) == 0, "complete: %s", err.msg);
    ok(berth_s3_head(s3, "mpu/x", &size, &err) == 0 && size == (int64_t)p1 + 4, "the object has both parts (%lld bytes)",
       (long long)size);
    got.len = 0;
    ok(berth_s3_get(s3, "mpu/x", (int64_t)p1 - 2, 6, sink, &got, &err) == 0 && got.len == 6 && memcmp(got.buf + 2, "tail", 4) == 0,
       "the bytes across the part boundary are in order");
    ok(berth_s3_mpu_begin(s3, "mpu/y", uid, &err) == 0 &&
           berth_s3_mpu_part_copy(s3, "mpu/y", uid, 1, "mpu/x", 0, (int64_t)p1, e1, &err) == 0 &&
           berth_s3_mpu_part(s3, "mpu/y", uid, 2, "!", 1, e2, &err) == 0 &&
           berth_s3_mpu_complete(s3, "mpu/y", uid, 2, etags, &err) == 0 && berth_s3_head(s3, "mpu/y", &size, &err) == 0 &&
           size == (int64_t)p1 + 1,
       "UploadPartCopy of a range, then a written part: %s", err.msg);
    /* fact 4: libcurl 7.88 signs UploadPartCopy with a range wrongly (it sorts header lines, so
     * x-amz-copy-source-range comes before x-amz-copy-source); berth_s3_authorization signs it */
    {
        char q[400];
        berth_s3_res_t r4;
        ok(berth_s3_mpu_begin(s3, "mpu/w", uid, &err) == 0 && snprintf(q, sizeof(q), "partNumber=1&uploadId=%s", uid) > 0,
           "begin mpu/w");
        berth_s3_req_t lc = {.method = "PUT",
                             .key = "mpu/w",
                             .query = q,
                             .body = "",
                             .copy_source = "mpu/x",
                             .extra_header = "x-amz-copy-source-range: bytes=0-9",
                             .flags = BERTH_S3_CURL_SIGNS};
        ok(berth_s3_do(s3, &lc, &r4, &err) == 0 && r4.status == 403 && strcmp(r4.code, "SignatureDoesNotMatch") == 0,
           "4: signed by libcurl, UploadPartCopy with a range is refused (%ld %s)", r4.status, r4.code);
        berth_s3_res_dispose(&r4);
        lc.flags = 0;
        ok(berth_s3_do(s3, &lc, &r4, &err) == 0 && r4.status == 200, "4: signed by berth_s3_authorization it succeeds (%ld %s)",
           r4.status, r4.code);
        berth_s3_res_dispose(&r4);
        berth_s3_mpu_abort(s3, "mpu/w", uid, &err);
    }
    ok(berth_s3_mpu_begin(s3, "mpu/z", uid, &err) == 0 && berth_s3_mpu_part(s3, "mpu/z", uid, 1, "x", 1, e1, &err) == 0 &&
           berth_s3_mpu_abort(s3, "mpu/z", uid, &err) == 0 && berth_s3_head(s3, "mpu/z", &size, &err) == BERTH_ENOTFOUND,
       "an aborted multipart upload leaves no object");
    ok(berth_s3_mpu_part(s3, "mpu/z", uid, 2, "x", 1, e1, &err) == BERTH_ENOTFOUND,
       "a part for an aborted upload: not found (NoSuchUpload)");
    free(big);

    /* listing */
    for (int i = 0; i < 3; i++) {
        char k[32];
        snprintf(k, sizeof(k), "list/%d", i);
        berth_s3_put(s3, k, "x", 1, &err);
    }
    int seen = 0;
    char next[1024];
    ok(berth_s3_list(s3, "list/", "", next, sizeof(next), collect, &seen, &err) == 0 && seen == 3 && next[0] == '\0',
       "a listing below a prefix sees its 3 keys (%d)", seen);

    /* the three facts (registry/storage/README.md) */
    berth_s3_res_t res;
    berth_s3_req_t rq = {.method = "PUT", .key = "facts/1", .body = "abc", .body_len = 3, .flags = BERTH_S3_OMIT_SHA256};
    ok(berth_s3_do(s3, &rq, &res, &err) == 0 && res.status == 403 && strcmp(res.code, "SignatureDoesNotMatch") == 0,
       "1: without x-amz-content-sha256 RGW answers SignatureDoesNotMatch (%ld %s)", res.status, res.code);
    berth_s3_res_dispose(&res);
    rq.flags = 0;
    ok(berth_s3_do(s3, &rq, &res, &err) == 0 && res.status == 200, "1: with it the same PUT succeeds (%ld)", res.status);
    berth_s3_res_dispose(&res);
    berth_s3_req_t bare = {.method = "POST", .key = "facts/2", .query = "uploads"};
    ok(berth_s3_do(s3, &bare, &res, &err) == 0 && res.status == 403, "2: ?uploads without '=' fails verification (%ld %s)",
       res.status, res.code);
    berth_s3_res_dispose(&res);
    bare.query = "uploads=";
    ok(berth_s3_do(s3, &bare, &res, &err) == 0 && res.status == 200 && strstr(res.body, "<UploadId>") != NULL,
       "2: ?uploads= initiates (%ld)", res.status);
    berth_s3_res_dispose(&res);
    rq.flags = BERTH_S3_CHUNKED;
    ok(berth_s3_do(s3, &rq, &res, &err) == 0 && res.status >= 400 && res.status < 500,
       "3: a body of unknown length (chunked) is refused (%ld %s)", res.status, res.code);
    berth_s3_res_dispose(&res);

    /* presigned URLs, fetched by a client that signs nothing */
    char url[4096];
    berth_s3_put(s3, "pre/p", data, 20, &err);
    ok(berth_s3_presign(s3, "GET", "pre/p", time(NULL), 60, url, sizeof(url)) == 0, "presign a GET");
    got.len = 0;
    ok(plain_get(url, NULL, &got) == 200 && got.len == 20 && memcmp(got.buf, data, 20) == 0, "the gateway serves a presigned URL");
    got.len = 0;
    ok(plain_get(url, "2-4", &got) == 206 && got.len == 3 && memcmp(got.buf, "234", 3) == 0,
       "with Range: 206 and the bytes asked for");
    berth_s3_presign(s3, "GET", "pre/p", time(NULL) - 3600, 60, url, sizeof(url));
    got.len = 0;
    ok(plain_get(url, NULL, &got) == 403, "an expired presigned URL is refused");
    berth_s3_presign(s3, "GET", "pre/p", time(NULL), 60, url, sizeof(url));
    char *sig = strstr(url, "X-Amz-Signature=");
    sig[16] = sig[16] == '0' ? '1' : '0';
    got.len = 0;
    ok(plain_get(url, NULL, &got) == 403, "a tampered presigned URL is refused");

    /* retries: a gateway that keeps answering 503 SlowDown is asked 1 + retries times, then a clean error */
    slow_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ok(bind(slow_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(slow_fd, 16) == 0 &&
           getsockname(slow_fd, (struct sockaddr *)&sa, &sl) == 0,
       "a fake gateway that answers 503 SlowDown listens");
    pthread_t th;
    pthread_create(&th, NULL, slow_server, NULL);
    char slow_ep[64];
    snprintf(slow_ep, sizeof(slow_ep), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    berth_s3_conf_t sc = conf;
    sc.endpoint = slow_ep;
    b = berth_s3_new(&sc);
    double t0 = now_s();
    got.len = 0;
    int rc = berth_s3_get(b, "x", 0, -1, sink, &got, &err);
    double dt = now_s() - t0;
    ok(rc == BERTH_EUNAVAIL && __atomic_load_n(&slow_hits, __ATOMIC_SEQ_CST) == 3 && strstr(err.msg, "SlowDown") != NULL,
       "503 SlowDown: 3 attempts with back-off (%.2f s), then %s", dt, err.msg);
    ok(dt >= 0.3, "the attempts are spaced (back-off 100 ms, then ~200 ms)");
    berth_s3_free(b);

    /* the gateway paused: a clear error within the timeout, and recovery once resumed */
    int up_port = 0;
    const char *colon = strrchr(conf.endpoint, ':');
    if (colon != NULL)
        up_port = (int)strtol(colon + 1, NULL, 10);
    relay_up = (struct sockaddr_in){
        .sin_family = AF_INET, .sin_port = htons((uint16_t)up_port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    relay_fd = socket(AF_INET, SOCK_STREAM, 0);
    sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sl = sizeof(sa);
    ok(up_port > 0 && bind(relay_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(relay_fd, 16) == 0 &&
           getsockname(relay_fd, (struct sockaddr *)&sa, &sl) == 0,
       "a paused gateway (a listener that takes no connection) in front of the gateway at port %d", up_port);
    char relay_ep[64];
    snprintf(relay_ep, sizeof(relay_ep), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    berth_s3_conf_t qc = conf;
    qc.endpoint = relay_ep;
    qc.timeout_ms = 1500;
    b = berth_s3_new(&qc);
    t0 = now_s();
    rc = berth_s3_head(b, "pre/p", &size, &err);
    dt = now_s() - t0;
    ok(rc == BERTH_EUNAVAIL && strstr(err.msg, "no answer within") != NULL && dt < 4.0, "paused gateway: %s after %.2f s", err.msg,
       dt);
    pthread_t rt;
    pthread_create(&rt, NULL, relay_accept, NULL); /* resumed: the listener relays to the gateway */
    ok(berth_s3_head(b, "pre/p", &size, &err) == 0 && size == 20, "resumed: the next request works (%s)", err.msg);
    berth_s3_free(b);
    shutdown(relay_fd, SHUT_RDWR); /* ends relay_accept */
    pthread_join(rt, NULL);
    close(relay_fd);
    free(got.buf);
    berth_s3_free(s3);
    curl_global_cleanup();
    return tap_done();
}
