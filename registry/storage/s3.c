#include "registry/storage/s3.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "registry/storage/s3_sign.h"

#define POOL_MAX 16        /* idle handles kept (each keeps its connection open) */
#define BODY_MAX (8 << 20) /* collected bodies: error documents, listings, XML answers */

struct st_berth_s3_t {
    berth_s3_conf_t conf; /* strings point into strs */
    char *strs[8];
    char scheme[8];
    char host[512];    /* "host[:port]" of the endpoint */
    char sigv4[160];   /* "aws:amz:<region>:s3" */
    char userpwd[600]; /* access:secret for libcurl's signer */
    pthread_mutex_t mu;
    CURL *idle[POOL_MAX];
    int nidle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

berth_s3_t *berth_s3_new(const berth_s3_conf_t *c)
{
    pthread_once(&curl_once, curl_init);
    berth_s3_t *s3 = calloc(1, sizeof(*s3));
    s3->conf = *c;
    const char **f[] = {&s3->conf.endpoint,   &s3->conf.region,     &s3->conf.bucket, &s3->conf.prefix,
                        &s3->conf.access_key, &s3->conf.secret_key, &s3->conf.ca_file};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (*f[i] != NULL)
            *f[i] = s3->strs[i] = strdup(*f[i]);
    if (s3->conf.region == NULL || s3->conf.region[0] == '\0')
        s3->conf.region = s3->strs[7] = strdup("us-east-1");
    if (s3->conf.prefix == NULL)
        s3->conf.prefix = "";
    if (s3->conf.timeout_ms <= 0)
        s3->conf.timeout_ms = 30000;
    if (s3->conf.retries < 0)
        s3->conf.retries = 0;
    const char *e = s3->conf.endpoint != NULL ? s3->conf.endpoint : "";
    const char *sep = strstr(e, "://");
    snprintf(s3->scheme, sizeof(s3->scheme), "%.*s", sep != NULL ? (int)(sep - e) : 5, sep != NULL ? e : "https");
    const char *h = sep != NULL ? sep + 3 : e;
    size_t hl = strcspn(h, "/");
    if (s3->conf.path_style)
        snprintf(s3->host, sizeof(s3->host), "%.*s", (int)hl, h);
    else
        snprintf(s3->host, sizeof(s3->host), "%s.%.*s", s3->conf.bucket, (int)hl, h);
    snprintf(s3->sigv4, sizeof(s3->sigv4), "aws:amz:%s:s3", s3->conf.region);
    snprintf(s3->userpwd, sizeof(s3->userpwd), "%s:%s", s3->conf.access_key != NULL ? s3->conf.access_key : "",
             s3->conf.secret_key != NULL ? s3->conf.secret_key : "");
    pthread_mutex_init(&s3->mu, NULL);
    return s3;
}

void berth_s3_free(berth_s3_t *s3)
{
    if (s3 == NULL)
        return;
    for (int i = 0; i < s3->nidle; i++)
        curl_easy_cleanup(s3->idle[i]);
    for (size_t i = 0; i < sizeof(s3->strs) / sizeof(s3->strs[0]); i++) {
        if (s3->strs[i] != NULL)
            memset(s3->strs[i], 0, strlen(s3->strs[i])); /* the secret among them */
        free(s3->strs[i]);
    }
    memset(s3->userpwd, 0, sizeof(s3->userpwd));
    pthread_mutex_destroy(&s3->mu);
    free(s3);
}

const berth_s3_conf_t *berth_s3_conf(const berth_s3_t *s3)
{
    return &s3->conf;
}

const char *berth_s3_host(const berth_s3_t *s3)
{
    return s3->host;
}

static CURL *take(berth_s3_t *s3)
{
    CURL *h = NULL;
    pthread_mutex_lock(&s3->mu);
    if (s3->nidle > 0)
        h = s3->idle[--s3->nidle];
    pthread_mutex_unlock(&s3->mu);
    if (h == NULL)
        return curl_easy_init();
    curl_easy_reset(h); /* keeps the open connection */
    return h;
}

static void give(berth_s3_t *s3, CURL *h)
{
    pthread_mutex_lock(&s3->mu);
    if (s3->nidle < POOL_MAX) {
        s3->idle[s3->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s3->mu);
    if (h != NULL)
        curl_easy_cleanup(h);
}

/* "/bucket/prefix/key" (path style) or "/prefix/key", encoded */
static int object_path(const berth_s3_t *s3, const char *key, int raw, char *out, size_t outsz)
{
    char full[2048];
    const char *p = raw ? "" : s3->conf.prefix;
    int n;
    if (key == NULL)
        n = snprintf(full, sizeof(full), "%s%s", s3->conf.path_style ? "/" : "", s3->conf.path_style ? s3->conf.bucket : "");
    else
        n = snprintf(full, sizeof(full), "%s%s/%s%s%s", s3->conf.path_style ? "/" : "", s3->conf.path_style ? s3->conf.bucket : "",
                     p, p[0] != '\0' ? "/" : "", key);
    if (n < 0 || (size_t)n >= sizeof(full))
        return -1;
    if (full[0] == '\0')
        snprintf(full, sizeof(full), "/");
    return berth_s3_uri_encode(full, 1, out, outsz);
}

typedef struct {
    const berth_s3_req_t *req;
    berth_s3_res_t *res;
    CURL *h;
    size_t sent;
    int64_t sunk; /* body bytes given to req->sink */
    int sink_failed;
} xfer_t;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t left = x->req->body_len - x->sent, k = size * n < left ? size * n : left;
    memcpy(buf, (const char *)x->req->body + x->sent, k);
    x->sent += k;
    return k;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t len = size * n;
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->req->sink != NULL && status >= 200 && status < 300) {
        if (x->req->sink(data, len, x->req->sink_arg) != 0) {
            x->sink_failed = 1;
            return 0;
        }
        x->sunk += (int64_t)len;
        return len;
    }
    berth_s3_res_t *r = x->res;
    if (r->body_len + len > BODY_MAX)
        return 0;
    char *b = realloc(r->body, r->body_len + len + 1);
    if (b == NULL)
        return 0;
    memcpy(b + r->body_len, data, len);
    r->body = b;
    r->body_len += len;
    r->body[r->body_len] = '\0';
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t len = size * n;
    if (len > 5 && strncasecmp(data, "etag:", 5) == 0) {
        const char *v = data + 5;
        size_t vl = len - 5;
        while (vl > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vl--;
        }
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        snprintf(x->res->etag, sizeof(x->res->etag), "%.*s", (int)vl, v);
    } else if (len > 15 && strncasecmp(data, "content-length:", 15) == 0) {
        x->res->content_length = strtoll(data + 15, NULL, 10);
    } else if (len > 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new response (after 100-continue): start over */
        x->res->etag[0] = '\0';
        x->res->content_length = -1;
    }
    return len;
}

int berth_s3_xml_text(const char *doc, size_t *pos, const char *tag, char *out, size_t outsz)
{
    char open[96], close_[96];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close_, sizeof(close_), "</%s>", tag);
    const char *a = strstr(doc + (pos != NULL ? *pos : 0), open);
    if (a == NULL)
        return -1;
    a += strlen(open);
    const char *b = strstr(a, close_);
    if (b == NULL)
        return -1;
    if (pos != NULL)
        *pos = (size_t)(b - doc) + strlen(close_);
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&#34;", '"'}};
    size_t o = 0;
    for (const char *p = a; p < b; p++) {
        char c = *p;
        if (c == '&') {
            for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
                size_t el = strlen(ents[i].ent);
                if ((size_t)(b - p) >= el && strncmp(p, ents[i].ent, el) == 0) {
                    c = ents[i].c;
                    p += el - 1;
                    break;
                }
            }
        }
        if (o + 1 >= outsz)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int retryable(const berth_s3_res_t *r)
{
    return r->status == 500 || r->status == 502 || r->status == 503 || r->status == 504 || strcmp(r->code, "SlowDown") == 0;
}

static int once(berth_s3_t *s3, const berth_s3_req_t *req, berth_s3_res_t *res, CURLcode *cc, int64_t *sunk)
{
    char path[2600], url[3400];
    if (object_path(s3, req->key, (req->flags & BERTH_S3_RAW_KEY) != 0, path, sizeof(path)) != 0)
        return -1;
    snprintf(url, sizeof(url), "%s://%s%s%s%s", s3->scheme, s3->host, path, req->query != NULL ? "?" : "",
             req->query != NULL ? req->query : "");
    CURL *h = take(s3);
    if (h == NULL)
        return -1;
    xfer_t x = {.req = req, .res = res, .h = h};
    /* the headers as name (lower case) and value, so that they can be signed here when libcurl cannot */
    char src[2600], date[20], lines[8][2800];
    const char *names[8], *values[8];
    size_t nh = 0;
    if (!(req->flags & BERTH_S3_OMIT_SHA256)) {
        names[nh] = "x-amz-content-sha256";
        values[nh++] = "UNSIGNED-PAYLOAD";
    }
    if (req->range != NULL) {
        names[nh] = "range";
        values[nh++] = req->range;
    }
    if (req->copy_source != NULL) {
        int saved = s3->conf.path_style;
        s3->conf.path_style = 1; /* x-amz-copy-source is always /bucket/key */
        int bad = object_path(s3, req->copy_source, 0, src, sizeof(src));
        s3->conf.path_style = saved;
        if (bad != 0) {
            give(s3, h);
            return -1;
        }
        names[nh] = "x-amz-copy-source";
        values[nh++] = src;
    }
    char extra_name[64];
    if (req->extra_header != NULL) {
        size_t nl = strcspn(req->extra_header, ":");
        snprintf(extra_name, sizeof(extra_name), "%.*s", (int)nl, req->extra_header);
        names[nh] = extra_name;
        values[nh] = req->extra_header + nl + (req->extra_header[nl] != '\0');
        while (*values[nh] == ' ')
            values[nh]++;
        nh++;
    }
    /* libcurl 7.88 sorts "name:value" lines, not names, so x-amz-copy-source-range lands before x-amz-copy-source
     * and RGW refuses the signature (README.md): requests with a header beyond the usual ones are signed here */
    int self_sign = req->extra_header != NULL && !(req->flags & BERTH_S3_CURL_SIGNS);
    struct curl_slist *hdr = NULL;
    if (self_sign) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
        names[nh] = "host";
        values[nh++] = s3->host;
        names[nh] = "x-amz-date";
        values[nh++] = date;
        for (size_t i = 1; i < nh; i++) /* insertion sort by name */
            for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                const char *tn = names[j], *tv = values[j];
                names[j] = names[j - 1];
                values[j] = values[j - 1];
                names[j - 1] = tn;
                values[j - 1] = tv;
            }
        const char *canon[8];
        for (size_t i = 0; i < nh; i++) {
            snprintf(lines[i], sizeof(lines[i]), "%s:%s", names[i], values[i]);
            canon[i] = lines[i];
        }
        char auth[1024], authline[1100];
        if (berth_s3_authorization(req->method, path, req->query, canon, nh, "UNSIGNED-PAYLOAD", s3->conf.access_key,
                                   s3->conf.secret_key, s3->conf.region, date, auth, sizeof(auth)) != 0) {
            give(s3, h);
            return -1;
        }
        snprintf(authline, sizeof(authline), "Authorization: %s", auth);
        hdr = curl_slist_append(hdr, authline);
        OPENSSL_cleanse(auth, sizeof(auth));
        OPENSSL_cleanse(authline, sizeof(authline));
    }
    for (size_t i = 0; i < nh; i++) {
        if (strcmp(names[i], "host") == 0)
            continue; /* libcurl sends it from the URL */
        snprintf(lines[i], sizeof(lines[i]), "%s: %s", names[i], values[i]);
        hdr = curl_slist_append(hdr, lines[i]);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (!self_sign) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s3->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, s3->userpwd);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s3->conf.timeout_ms < 10000 ? s3->conf.timeout_ms : 10000L);
    if (req->sink != NULL || req->body_len > (1 << 20)) {
        /* a stream: no overall limit, but a stall of timeout_ms ends it */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (s3->conf.timeout_ms + 999) / 1000);
    } else {
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, s3->conf.timeout_ms);
    }
    if (!s3->conf.tls_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (s3->conf.ca_file != NULL && s3->conf.ca_file[0] != '\0')
        curl_easy_setopt(h, CURLOPT_CAINFO, s3->conf.ca_file);
    const char *m = req->method;
    if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(m, "PUT") == 0 || (strcmp(m, "POST") == 0 && req->body != NULL)) {
        /* a known length: RGW answers 411 to a chunked body (README.md) */
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &x);
        if (!(req->flags & BERTH_S3_CHUNKED))
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
        if (strcmp(m, "POST") == 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(m, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    } else if (strcmp(m, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
    }
    res->content_length = -1;
    *cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
    *sunk = x.sunk;
    curl_slist_free_all(hdr);
    if (*cc != CURLE_OK) {
        curl_easy_cleanup(h); /* its connection is in an unknown state */
        if (x.sink_failed)
            return -2;
    } else {
        give(s3, h);
    }
    if (res->body != NULL && res->status >= 300)
        berth_s3_xml_text(res->body, NULL, "Code", res->code, sizeof(res->code));
    return 0;
}

int berth_s3_do(berth_s3_t *s3, const berth_s3_req_t *req, berth_s3_res_t *res, berth_err_t *err)
{
    memset(res, 0, sizeof(*res));
    long delay_ms = 100;
    for (int attempt = 0;; attempt++) {
        CURLcode cc = CURLE_OK;
        int64_t sunk = 0;
        int rc = once(s3, req, res, &cc, &sunk);
        if (rc == -1)
            return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: the key of %s is too long", req->method);
        if (rc == -2)
            return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "s3: reading %s stopped by its receiver", req->key);
        int timed_out = cc == CURLE_OPERATION_TIMEDOUT;
        int again = (cc != CURLE_OK && !timed_out) || (cc == CURLE_OK && retryable(res));
        /* bytes already passed to a sink cannot be taken back, and a gateway that does not answer within the
         * timeout is not asked again: the client gets 503 now rather than after retries x timeout */
        if (!again || sunk > 0 || attempt >= s3->conf.retries) {
            if (cc != CURLE_OK)
                return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "s3: %s %s: %s%s (object store %s)", req->method,
                                     req->key != NULL ? req->key : "(bucket)", curl_easy_strerror(cc),
                                     timed_out ? " — no answer within storage.s3.timeout_ms" : "", s3->host);
            if (retryable(res))
                return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "s3: %s %s: the object store answers %ld %s after %d attempts",
                                     req->method, req->key != NULL ? req->key : "(bucket)", res->status, res->code, attempt + 1);
            return 0;
        }
        berth_log_warn("s3: %s %s: %s; retrying in %ld ms", req->method, req->key != NULL ? req->key : "(bucket)",
                       cc != CURLE_OK ? curl_easy_strerror(cc) : (res->code[0] != '\0' ? res->code : "server error"), delay_ms);
        berth_s3_res_dispose(res);
        memset(res, 0, sizeof(*res));
        struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        delay_ms = delay_ms * 2 + (long)(random() % 50); /* jitter: instances that failed together retry apart */
    }
}

void berth_s3_res_dispose(berth_s3_res_t *res)
{
    free(res->body);
    res->body = NULL;
    res->body_len = 0;
}

/* The common ending: a status outside 2xx becomes an error */
static int finish(const berth_s3_req_t *req, berth_s3_res_t *res, int rc, berth_err_t *err)
{
    if (rc == 0 && (res->status < 200 || res->status >= 300)) {
        if (res->status == 404 || strcmp(res->code, "NoSuchUpload") == 0 || strcmp(res->code, "NoSuchKey") == 0)
            rc = berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, "s3: %s %s: not found (%s)", req->method,
                               req->key != NULL ? req->key : "", res->code);
        else
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: %s %s: the object store answers %ld %s", req->method,
                               req->key != NULL ? req->key : "(bucket)", res->status, res->code[0] != '\0' ? res->code : "");
        if (res->status == 404 || strcmp(res->code, "NoSuchUpload") == 0 || strcmp(res->code, "NoSuchKey") == 0)
            rc = BERTH_ENOTFOUND;
    } else if (rc != 0) {
        rc = BERTH_EUNAVAIL;
    }
    if (rc != 0 && err != NULL)
        err->code = rc;
    return rc;
}

int berth_s3_check_bucket(berth_s3_t *s3, berth_err_t *err)
{
    berth_s3_req_t req = {.method = "GET", .key = NULL, .query = "max-keys=1"};
    berth_s3_res_t res;
    int rc = berth_s3_do(s3, &req, &res, err);
    if (rc == 0 && (res.status == 404 || strcmp(res.code, "NoSuchBucket") == 0))
        rc = berth_err_set(err, BERTH_OCI_UNAVAILABLE, "bucket %s does not exist at %s (create it first)", s3->conf.bucket,
                           s3->conf.endpoint);
    else if (rc == 0 && (res.status == 403 || res.status == 401))
        rc = berth_err_set(err, BERTH_OCI_UNAVAILABLE, "the object store %s refuses the credentials for bucket %s (%s)",
                           s3->conf.endpoint, s3->conf.bucket, res.code[0] != '\0' ? res.code : "403");
    else if (rc == 0 && res.status != 200)
        rc = berth_err_set(err, BERTH_OCI_UNAVAILABLE, "bucket %s at %s answers %ld %s", s3->conf.bucket, s3->conf.endpoint,
                           res.status, res.code);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_head(berth_s3_t *s3, const char *key, int64_t *size_out, berth_err_t *err)
{
    berth_s3_req_t req = {.method = "HEAD", .key = key};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    if (rc == 0 && size_out != NULL)
        *size_out = res.content_length;
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_put(berth_s3_t *s3, const char *key, const void *body, size_t len, berth_err_t *err)
{
    berth_s3_req_t req = {.method = "PUT", .key = key, .body = body != NULL ? body : "", .body_len = len};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_get(berth_s3_t *s3, const char *key, int64_t off, int64_t len, int (*sink)(const char *, size_t, void *), void *arg,
                 berth_err_t *err)
{
    char range[64];
    if (len == 0)
        return 0;
    if (len > 0)
        snprintf(range, sizeof(range), "bytes=%lld-%lld", (long long)off, (long long)(off + len - 1));
    else
        snprintf(range, sizeof(range), "bytes=%lld-", (long long)off);
    berth_s3_req_t req = {.method = "GET", .key = key, .range = off > 0 || len > 0 ? range : NULL, .sink = sink, .sink_arg = arg};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_delete(berth_s3_t *s3, const char *key, berth_err_t *err)
{
    berth_s3_req_t req = {.method = "DELETE", .key = key};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    berth_s3_res_dispose(&res);
    if (rc == BERTH_ENOTFOUND) {
        berth_err_clear(err);
        rc = 0;
    }
    return rc;
}

int berth_s3_copy(berth_s3_t *s3, const char *from_key, const char *to_key, berth_err_t *err)
{
    berth_s3_req_t req = {.method = "PUT", .key = to_key, .body = "", .body_len = 0, .copy_source = from_key};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    /* a copy may fail after its 200 has been sent: the error is then in the body */
    if (rc == 0 && res.body != NULL && strstr(res.body, "<Error>") != NULL)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: copy %s to %s failed: %.200s", from_key, to_key, res.body);
    berth_s3_res_dispose(&res);
    return rc;
}

static int upload_query(char *out, size_t outsz, int part, const char *upload_id)
{
    char enc[400];
    if (berth_s3_uri_encode(upload_id, 0, enc, sizeof(enc)) != 0)
        return -1;
    /* canonical order: partNumber before uploadId */
    int n = part > 0 ? snprintf(out, outsz, "partNumber=%d&uploadId=%s", part, enc) : snprintf(out, outsz, "uploadId=%s", enc);
    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

int berth_s3_mpu_begin(berth_s3_t *s3, const char *key, char upload_id[128], berth_err_t *err)
{
    /* "uploads=" with '=': RGW does not verify the signature of a bare "uploads" (README.md) */
    berth_s3_req_t req = {.method = "POST", .key = key, .query = "uploads="};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    if (rc == 0 && (res.body == NULL || berth_s3_xml_text(res.body, NULL, "UploadId", upload_id, 128) != 0))
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: initiating a multipart upload of %s: no UploadId in the answer", key);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_mpu_part(berth_s3_t *s3, const char *key, const char *upload_id, int part, const void *body, size_t len,
                      char etag[128], berth_err_t *err)
{
    char q[512];
    if (upload_query(q, sizeof(q), part, upload_id) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: upload id too long");
    berth_s3_req_t req = {.method = "PUT", .key = key, .query = q, .body = body, .body_len = len};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    if (rc == 0 && res.etag[0] == '\0')
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: part %d of %s: no ETag in the answer", part, key);
    if (rc == 0)
        snprintf(etag, 128, "%s", res.etag);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_mpu_part_copy(berth_s3_t *s3, const char *key, const char *upload_id, int part, const char *from_key, int64_t off,
                           int64_t len, char etag[128], berth_err_t *err)
{
    char q[512], range[96];
    if (upload_query(q, sizeof(q), part, upload_id) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: upload id too long");
    snprintf(range, sizeof(range), "x-amz-copy-source-range: bytes=%lld-%lld", (long long)off, (long long)(off + len - 1));
    berth_s3_req_t req = {
        .method = "PUT", .key = key, .query = q, .body = "", .body_len = 0, .copy_source = from_key, .extra_header = range};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    if (rc == 0 && (res.body == NULL || berth_s3_xml_text(res.body, NULL, "ETag", etag, 128) != 0))
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: part copy %d of %s: no ETag in the answer", part, key);
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_mpu_complete(berth_s3_t *s3, const char *key, const char *upload_id, int nparts, const char *const *etags,
                          berth_err_t *err)
{
    char q[512];
    if (upload_query(q, sizeof(q), 0, upload_id) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: upload id too long");
    size_t cap = 64 + (size_t)nparts * 200, n = 0;
    char *xml = malloc(cap);
    n += (size_t)snprintf(xml + n, cap - n, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts; i++)
        n += (size_t)snprintf(xml + n, cap - n, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1, etags[i]);
    n += (size_t)snprintf(xml + n, cap - n, "</CompleteMultipartUpload>");
    berth_s3_req_t req = {.method = "POST", .key = key, .query = q, .body = xml, .body_len = n};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    /* the answer is 200 from its first byte; a failure shows as an <Error> document */
    if (rc == 0 && res.body != NULL && strstr(res.body, "<Error>") != NULL)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: completing %s failed: %.200s", key, res.body);
    berth_s3_res_dispose(&res);
    free(xml);
    return rc;
}

int berth_s3_mpu_abort(berth_s3_t *s3, const char *key, const char *upload_id, berth_err_t *err)
{
    char q[512];
    if (upload_query(q, sizeof(q), 0, upload_id) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: upload id too long");
    berth_s3_req_t req = {.method = "DELETE", .key = key, .query = q};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    berth_s3_res_dispose(&res);
    if (rc == BERTH_ENOTFOUND) { /* already gone */
        berth_err_clear(err);
        rc = 0;
    }
    return rc;
}

int berth_s3_list(berth_s3_t *s3, const char *prefix, const char *token, char *next_token, size_t next_size,
                  void (*cb)(const char *key, int64_t size, time_t mtime, void *arg), void *arg, berth_err_t *err)
{
    char full[1200], enc[1800], tok[2400], q[4400];
    const char *p = s3->conf.prefix;
    snprintf(full, sizeof(full), "%s%s%s", p, p[0] != '\0' ? "/" : "", prefix);
    if (berth_s3_uri_encode(full, 0, enc, sizeof(enc)) != 0 || berth_s3_uri_encode(token, 0, tok, sizeof(tok)) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: list prefix too long");
    /* canonical order of the query keys */
    if (token[0] != '\0')
        snprintf(q, sizeof(q), "continuation-token=%s&list-type=2&max-keys=1000&prefix=%s", tok, enc);
    else
        snprintf(q, sizeof(q), "list-type=2&max-keys=1000&prefix=%s", enc);
    berth_s3_req_t req = {.method = "GET", .key = NULL, .query = q};
    berth_s3_res_t res;
    int rc = finish(&req, &res, berth_s3_do(s3, &req, &res, err), err);
    next_token[0] = '\0';
    if (rc == 0 && res.body != NULL) {
        size_t pos = 0, skip = p[0] != '\0' ? strlen(p) + 1 : 0;
        char key[1100], size[32], trunc[8], lm[40];
        while (berth_s3_xml_text(res.body, &pos, "Key", key, sizeof(key)) == 0) {
            size_t spos = pos, mpos = pos;
            int64_t sz = berth_s3_xml_text(res.body, &spos, "Size", size, sizeof(size)) == 0 ? strtoll(size, NULL, 10) : -1;
            struct tm tm = {0};
            time_t mtime = 0;
            if (berth_s3_xml_text(res.body, &mpos, "LastModified", lm, sizeof(lm)) == 0 &&
                strptime(lm, "%Y-%m-%dT%H:%M:%S", &tm) != NULL)
                mtime = timegm(&tm);
            if (strlen(key) >= skip)
                cb(key + skip, sz, mtime, arg);
        }
        if (berth_s3_xml_text(res.body, NULL, "IsTruncated", trunc, sizeof(trunc)) == 0 && strcmp(trunc, "true") == 0 &&
            berth_s3_xml_text(res.body, NULL, "NextContinuationToken", next_token, next_size) != 0)
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: a truncated listing without a continuation token");
    }
    berth_s3_res_dispose(&res);
    return rc;
}

int berth_s3_presign(const berth_s3_t *s3, const char *method, const char *key, time_t now, long expires, char *out, size_t outsz)
{
    char path[2600];
    if (object_path(s3, key, 0, path, sizeof(path)) != 0)
        return -1;
    berth_s3_presign_t p = {.method = method,
                            .scheme = s3->scheme,
                            .host = s3->host,
                            .path = path,
                            .access_key = s3->conf.access_key,
                            .secret_key = s3->conf.secret_key,
                            .region = s3->conf.region,
                            .now = now,
                            .expires = expires};
    return berth_s3_presign_url(&p, out, outsz);
}
