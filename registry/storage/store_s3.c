/*
 * The s3 driver. Keys below storage.s3.prefix:
 *
 *   blobs/<alg>/<hex[0:2]>/<hex>   content-addressed, written only after the digest was checked
 *   uploads/<id>.tail-<nonce>      a session's bytes after its last full part (less than one part)
 *   uploads/<id>.data              the session's multipart upload while it runs, its staged object at the end
 *   uploads/<id>                   the state of a one-request session (blobs Berth writes itself, monolithic POST)
 *
 * Bytes stream into a multipart upload as they arrive, one part per part_size. A client's upload session keeps
 * its state (offset, multipart upload id, part ETags, the tail's name) in PostgreSQL through the caller
 * (s3_upload_resume / s3_upload_save, "db" sessions; registry/service/upload.c holds the row locked), so any
 * berthd continues it. At commit the last part goes up, the multipart upload completes to the staging key, the
 * digest is checked (by the caller's running hash, or by reading the staged object back), and only then is the
 * object copied to its content address. Pulls are served from presigned URLs: the edge proxies them (with the
 * client's Range), or the client is redirected.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "core/log.h"
#include "registry/storage/s3.h"
#include "registry/storage/store.h"
#include "registry/storage/store_driver.h"

#define STATE_HEAD_MAX (256 << 10)  /* state text before the tail bytes: 10000 parts x ETag fits */
#define COPY_MAX ((int64_t)5 << 30) /* CopyObject's limit; larger objects are copied part by part */
#define COPY_PART ((int64_t)1 << 30)

typedef struct {
    berth_store_t super;
    berth_s3_t *s3;
    int64_t part_size;
    int redirect;
    long ttl;
    int edge_cache;
    char upstream[512];
} s3s_t;

typedef struct {
    berth_store_upload_t super;
    int64_t offset;
    char upload_id[128]; /* "" until the first full part */
    int nparts, cap;
    char (*etags)[128];
    char *buf; /* part_size bytes: the tail */
    size_t tail;
    int dirty;
    int whole;           /* every byte went through this handle (created by this request), or writers are serialised */
    int db;              /* the caller keeps the state (PostgreSQL): the tail is an object of its own, see tail_key */
    int staged;          /* completed to the staging object: takes no more bytes */
    char tail_nonce[40]; /* db: the tail bytes are at uploads/<id>.tail-<nonce> ("" when none) */
} s3u_t;

#define S3S(s) ((s3s_t *)(s))

static void blob_key(const berth_digest_t *d, char *out, size_t outsz)
{
    char rel[BERTH_DIGEST_MAX + 16];
    berth_store__blob_relpath(d, rel, sizeof(rel));
    snprintf(out, outsz, "blobs/%s", rel);
}

static void state_key(const char *id, char *out, size_t outsz)
{
    snprintf(out, outsz, "uploads/%s", id);
}

static void data_key(const char *id, char *out, size_t outsz)
{
    snprintf(out, outsz, "uploads/%s.data", id);
}

/* A fresh name per save: a writer that lost its lock (its database connection died) can never overwrite the
 * tail the state of a later writer names */
static void tail_key(const char *id, const char *nonce, char *out, size_t outsz)
{
    snprintf(out, outsz, "uploads/%s.tail-%s", id, nonce);
}

int berth_store_open_s3(berth_store_t **out, const berth_store_s3_conf_t *conf, berth_err_t *err)
{
    if (conf->s3.bucket == NULL || conf->s3.bucket[0] == '\0' || conf->s3.endpoint == NULL || conf->s3.endpoint[0] == '\0')
        return berth_err_set(err, BERTH_OCI_INTERNAL,
                             "storage.s3.endpoint and storage.s3.bucket are required with storage.driver s3");
    s3s_t *s = calloc(1, sizeof(*s));
    s->super.ops = &berth_store_s3_ops;
    s->super.min_free = 0;
    s->s3 = berth_s3_new(&conf->s3);
    s->part_size = conf->part_size >= ((int64_t)5 << 20) ? conf->part_size : ((int64_t)16 << 20);
    s->redirect = conf->redirect;
    s->ttl = conf->presign_ttl > 0 ? conf->presign_ttl : 1200;
    s->edge_cache = conf->edge_cache;
    const char *e = conf->s3.endpoint, *sep = strstr(e, "://");
    size_t hl = strcspn(sep != NULL ? sep + 3 : e, "/");
    snprintf(s->upstream, sizeof(s->upstream), "%.*s", (int)((sep != NULL ? (size_t)(sep + 3 - e) : 0) + hl), e);
    int rc = berth_s3_check_bucket(s->s3, err);
    if (rc != 0) {
        berth_s3_free(s->s3);
        free(s);
        return rc;
    }
    *out = &s->super;
    return 0;
}

static void s3_close(berth_store_t *st)
{
    berth_s3_free(S3S(st)->s3);
    free(st);
}

/* the same request as the start-up check: the bucket exists and takes the credentials */
static int s3_reachable(berth_store_t *st, berth_err_t *err)
{
    return berth_s3_check_bucket(S3S(st)->s3, err);
}

static int s3_blob_stat(berth_store_t *st, const berth_digest_t *d, int64_t *size_out, berth_err_t *err)
{
    char key[256];
    blob_key(d, key, sizeof(key));
    return berth_s3_head(S3S(st)->s3, key, size_out, err);
}

static int s3_blob_read(berth_store_t *st, const berth_digest_t *d, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg,
                        berth_err_t *err)
{
    char key[256];
    blob_key(d, key, sizeof(key));
    return berth_s3_get(S3S(st)->s3, key, off, len, sink, arg, err);
}

static int s3_blob_remove(berth_store_t *st, const berth_digest_t *d, berth_err_t *err)
{
    char key[256];
    blob_key(d, key, sizeof(key));
    return berth_s3_delete(S3S(st)->s3, key, err);
}

typedef struct {
    berth_store_blob_fn cb;
    void *cb_data;
    time_t now;
    int stop;
} blob_walk_t;

/* "blobs/<alg>/<ab>/<hex>" whose hex is a digest of that algorithm filed under its first two characters */
static void blob_key_each(const char *key, int64_t size, time_t mtime, void *arg)
{
    blob_walk_t *w = arg;
    char alg[8], ab[3], hex[160], text[sizeof(alg) + sizeof(hex) + 2];
    berth_digest_t d;
    if (w->stop || sscanf(key, "blobs/%7[a-z0-9]/%2[0-9a-f]/%159[0-9a-f]", alg, ab, hex) != 3 || strncmp(hex, ab, 2) != 0)
        return;
    snprintf(text, sizeof(text), "%s:%s", alg, hex);
    if (berth_digest_parse(&d, text, strlen(text), NULL) != 0)
        return;
    char expect[256];
    blob_key(&d, expect, sizeof(expect));
    if (strcmp(expect, key) != 0)
        return;
    w->stop = w->cb(&d, size, difftime(w->now, mtime), w->cb_data);
}

static int s3_blob_each(berth_store_t *st, berth_store_blob_fn cb, void *cb_data)
{
    blob_walk_t w = {.cb = cb, .cb_data = cb_data, .now = time(NULL)};
    char token[1024] = "", next[1024];
    berth_err_t err;
    do { /* paged: 1000 keys a request */
        if (berth_s3_list(S3S(st)->s3, "blobs/", token, next, sizeof(next), blob_key_each, &w, &err) != 0) {
            berth_log_warn("blob walk: %s", err.msg);
            return 1; /* an unfinished walk must not look complete */
        }
        snprintf(token, sizeof(token), "%s", next);
    } while (token[0] != '\0' && !w.stop);
    return w.stop;
}

/* URLs the edge keeps slices of are fetched slice by slice as the client reads (edge.c): they must outlive a slow
 * pull (6 h: 4 GiB at 200 KB/s). They never reach a client, and the edge logs nothing of them (edge.c). */
#define EDGE_TTL (6 * 3600L)

static void s3_blob_serve(berth_store_t *st, const berth_digest_t *d, int64_t size, const char *method, berth_resp_t *resp)
{
    s3s_t *s = S3S(st);
    char key[256], url[4096];
    int head = method != NULL && strcmp(method, "HEAD") == 0;
    /* a blob of no bytes is all known (a gateway would answer the edge's slice Range with 416); a HEAD is not: the
     * gateway says whether the object is still there, so a client that HEADs before pushing restores a lost one */
    if (size == 0 && !head) {
        berth_resp_header(resp, "etag", "\"%s\"", d->str); /* the edge's blob headers, as it sends them */
        berth_resp_header(resp, "cache-control", "max-age=31536000");
        berth_resp_body(resp, 200, NULL, 0, "application/octet-stream");
        return;
    }
    blob_key(d, key, sizeof(key));
    long ttl = !s->redirect && s->edge_cache && !head ? EDGE_TTL : s->ttl;
    if (berth_s3_presign(s->s3, head ? "HEAD" : "GET", key, time(NULL), ttl, url, sizeof(url)) != 0) {
        berth_err_t err;
        berth_err_set(&err, BERTH_OCI_INTERNAL, "s3: cannot presign %s", key);
        berth_resp_error(resp, &err);
        return;
    }
    if (s->redirect) { /* as Distribution's redirect middleware: the client fetches from the gateway */
        berth_resp_header(resp, "location", "%s", url);
        berth_resp_body(resp, 307, NULL, 0, "application/octet-stream");
        return;
    }
    /* the edge proxies the presigned URL: "/_berth/blobs/" + path and query after scheme://host/ */
    const char *p = strstr(url, "://");
    p = p != NULL ? strchr(p + 3, '/') : NULL;
    berth_resp_header(resp, "x-accel-redirect", "%s%s", head ? st->edge_head_prefix : st->edge_prefix, p != NULL ? p + 1 : "");
    berth_resp_body(resp, 200, NULL, 0, "application/octet-stream");
}

static void s3_edge(const berth_store_t *st, berth_store_edge_t *out)
{
    out->upstream = S3S(st)->upstream;
    out->host = berth_s3_host(S3S(st)->s3);
}

/* ---- upload state ---- */

static s3u_t *new_upload(s3s_t *s, const char *id)
{
    s3u_t *u = calloc(1, sizeof(*u));
    u->super.store = &s->super;
    snprintf(u->super.id, sizeof(u->super.id), "%s", id);
    u->buf = malloc((size_t)s->part_size);
    return u;
}

static void free_upload(s3u_t *u)
{
    free(u->etags);
    free(u->buf);
    free(u);
}

static int add_etag(s3u_t *u, const char *etag)
{
    if (u->nparts == u->cap) {
        int cap = u->cap > 0 ? u->cap * 2 : 16;
        char(*e)[128] = realloc(u->etags, (size_t)cap * sizeof(*e));
        if (e == NULL)
            return -1;
        u->etags = e;
        u->cap = cap;
    }
    snprintf(u->etags[u->nparts++], 128, "%s", etag);
    return 0;
}

typedef struct {
    char *buf;
    size_t len, cap;
} grow_t;

static int grow_sink(const char *data, size_t len, void *arg)
{
    grow_t *g = arg;
    if (g->len + len + 1 > g->cap) {
        size_t cap = (g->len + len + 1) * 2;
        char *b = realloc(g->buf, cap);
        if (b == NULL)
            return -1;
        g->buf = b;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, data, len);
    g->len += len;
    g->buf[g->len] = '\0';
    return 0;
}

/* Parse "berth-upload 1\noffset N\nupload_id X\nparts K\n<etag>…\ntail T\n\n<tail bytes>" into u */
/* The line at *p (before end) that starts with `key`: its value into out; *p moves to the next line */
static int state_line(const char **p, const char *end, const char *key, char *out, size_t outsz)
{
    const char *nl = memchr(*p, '\n', (size_t)(end + 1 - *p));
    size_t kl = strlen(key);
    if (nl == NULL || (size_t)(nl - *p) < kl || strncmp(*p, key, kl) != 0 || (size_t)(nl - *p - kl) >= outsz)
        return -1;
    snprintf(out, outsz, "%.*s", (int)(nl - *p - (ptrdiff_t)kl), *p + kl);
    *p = nl + 1;
    return 0;
}

static int state_number(const char **p, const char *end, const char *key, long long max, long long *out)
{
    char v[32], *e;
    if (state_line(p, end, key, v, sizeof(v)) != 0)
        return -1;
    *out = strtoll(v, &e, 10);
    return v[0] == '\0' || *e != '\0' || *out < 0 || *out > max ? -1 : 0;
}

/* Parse "berth-upload 1\noffset N\nupload_id X\nparts K\n<etag>…\ntail T\n\n<tail bytes>" into u */
static int parse_state(s3u_t *u, const char *doc, size_t len, int with_tail, int64_t part_size)
{
    const char *end = memmem(doc, len, "\n\n", 2);
    if (end == NULL || strncmp(doc, "berth-upload 1\n", 15) != 0)
        return -1;
    long long off, nparts, tail;
    char id[128], e[128];
    const char *p = doc + 15;
    if (state_number(&p, end, "offset ", INT64_MAX, &off) != 0 || state_line(&p, end, "upload_id ", id, sizeof(id)) != 0 ||
        state_number(&p, end, "parts ", 10000, &nparts) != 0)
        return -1;
    snprintf(u->upload_id, sizeof(u->upload_id), "%s", strcmp(id, "-") == 0 ? "" : id);
    u->offset = off;
    for (long long i = 0; i < nparts; i++)
        if (state_line(&p, end, "", e, sizeof(e)) != 0 || add_etag(u, e) != 0)
            return -1;
    if (state_number(&p, end, "tail ", part_size - 1, &tail) != 0)
        return -1;
    u->tail = (size_t)tail;
    long long staged = 0;
    if (p < end && state_line(&p, end, "tail_key ", u->tail_nonce, sizeof(u->tail_nonce)) != 0)
        return -1;
    if (p < end && state_number(&p, end, "staged ", 1, &staged) != 0)
        return -1;
    u->staged = (int)staged;
    if (p < end || strspn(u->tail_nonce, "0123456789abcdef") != strlen(u->tail_nonce))
        return -1;
    if (u->db && (u->tail > 0) != (u->tail_nonce[0] != '\0')) /* a db state names its tail object when it has one */
        return -1;
    if (with_tail) {
        const char *bytes = end + 2;
        if ((size_t)(doc + len - bytes) != u->tail)
            return -1;
        memcpy(u->buf, bytes, u->tail);
    }
    return 0;
}

/* Read the state of session id (with its tail bytes when with_tail) */
static int load_state(s3s_t *s, const char *id, s3u_t *u, int with_tail, berth_err_t *err)
{
    char key[128];
    state_key(id, key, sizeof(key));
    grow_t g = {0};
    int rc = berth_s3_get(s->s3, key, 0, with_tail ? -1 : STATE_HEAD_MAX, grow_sink, &g, err);
    if (rc == BERTH_ENOTFOUND) {
        berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
        if (err != NULL)
            err->code = BERTH_ENOTFOUND;
    } else if (rc == 0 && parse_state(u, g.buf != NULL ? g.buf : "", g.len, with_tail, s->part_size) != 0) {
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: the state of upload %s is damaged", id);
    }
    free(g.buf);
    return rc;
}

/* The state text up to and including its blank line, with room for `extra` more bytes after it */
static char *state_text(const s3u_t *u, size_t extra, size_t *len_out)
{
    size_t cap = 320 + (size_t)u->nparts * 130 + extra, n = 0;
    char *doc = malloc(cap);
    if (doc == NULL)
        return NULL;
    n += (size_t)snprintf(doc + n, cap - n, "berth-upload 1\noffset %lld\nupload_id %s\nparts %d\n", (long long)u->offset,
                          u->upload_id[0] != '\0' ? u->upload_id : "-", u->nparts);
    for (int i = 0; i < u->nparts; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s\n", u->etags[i]);
    n += (size_t)snprintf(doc + n, cap - n, "tail %zu\n", u->tail);
    if (u->db)
        n += (size_t)snprintf(doc + n, cap - n, "tail_key %s\nstaged %d\n", u->tail_nonce, u->staged);
    n += (size_t)snprintf(doc + n, cap - n, "\n");
    *len_out = n;
    return doc;
}

static int save_state(s3s_t *s, s3u_t *u, berth_err_t *err)
{
    size_t n;
    char *doc = state_text(u, u->tail, &n);
    if (doc == NULL)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: out of memory");
    memcpy(doc + n, u->buf, u->tail);
    n += u->tail;
    char key[128];
    state_key(u->super.id, key, sizeof(key));
    int rc = berth_s3_put(s->s3, key, doc, n, err);
    free(doc);
    if (rc == 0)
        u->dirty = 0;
    return rc;
}

static int s3_upload_open(berth_store_t *st, const char *id, int create, berth_store_upload_t **out, int64_t *size_out,
                          berth_err_t *err)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, id);
    int rc = create ? save_state(s, u, err) : load_state(s, id, u, 1, err);
    u->whole = create;
    if (rc != 0) {
        free_upload(u);
        return rc;
    }
    *out = &u->super;
    *size_out = u->offset;
    return 0;
}

/* Send the full buffer as the next part (starting the multipart upload with the first one) */
static int flush_part(s3s_t *s, s3u_t *u, berth_err_t *err)
{
    char key[128], etag[128];
    data_key(u->super.id, key, sizeof(key));
    int rc = u->upload_id[0] == '\0' ? berth_s3_mpu_begin(s->s3, key, u->upload_id, err) : 0;
    if (rc != 0)
        return rc;
    if (u->nparts >= 10000)
        return berth_err_set(err, BERTH_OCI_SIZE_INVALID, "blob larger than 10000 parts of storage.s3.part_size_mib");
    rc = berth_s3_mpu_part(s->s3, key, u->upload_id, u->nparts + 1, u->buf, u->tail, etag, err);
    if (rc != 0)
        return rc;
    if (add_etag(u, etag) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: out of memory");
    u->tail = 0;
    u->dirty = 1;
    return 0;
}

static int s3_upload_write(berth_store_upload_t *bu, const void *buf, size_t len, berth_err_t *err)
{
    s3u_t *u = (s3u_t *)bu;
    s3s_t *s = S3S(bu->store);
    const char *p = buf;
    while (len > 0) {
        size_t room = (size_t)s->part_size - u->tail, k = len < room ? len : room;
        memcpy(u->buf + u->tail, p, k);
        u->tail += k;
        u->offset += (int64_t)k;
        u->dirty = 1;
        p += k;
        len -= k;
        if (u->tail == (size_t)s->part_size) {
            int rc = flush_part(s, u, err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int s3_upload_close(berth_store_upload_t *bu, berth_err_t *err)
{
    s3u_t *u = (s3u_t *)bu;
    /* db: what was not saved through s3_upload_save is not part of the session (the caller's row says so) */
    int rc = u->dirty && !u->db ? save_state(S3S(bu->store), u, err) : 0;
    free_upload(u);
    return rc;
}

static void s3_upload_remove(berth_store_t *st, const char *id);

typedef struct {
    char (*keys)[256];
    size_t n, cap;
} keys_t;

static void collect_key(const char *key, int64_t size, time_t mtime, void *arg)
{
    (void)size;
    (void)mtime;
    keys_t *k = arg;
    if (k->n == k->cap) {
        size_t cap = k->cap > 0 ? k->cap * 2 : 16;
        char(*m)[256] = realloc(k->keys, cap * sizeof(*m));
        if (m == NULL)
            return;
        k->keys = m;
        k->cap = cap;
    }
    snprintf(k->keys[k->n++], 256, "%s", key);
}

/* Delete every object named uploads/<id><suffix>… (old tails, the staged object) */
static void remove_prefix(s3s_t *s, const char *id, const char *suffix)
{
    char prefix[160], token[1024] = "", next[1024];
    snprintf(prefix, sizeof(prefix), "uploads/%s%s", id, suffix);
    keys_t k = {0};
    berth_err_t err;
    do {
        if (berth_s3_list(s->s3, prefix, token, next, sizeof(next), collect_key, &k, &err) != 0) {
            berth_log_warn("upload %s: listing its objects: %s", id, err.msg);
            break;
        }
        snprintf(token, sizeof(token), "%s", next);
    } while (token[0] != '\0');
    for (size_t i = 0; i < k.n; i++)
        berth_s3_delete(s->s3, k.keys[i], NULL);
    free(k.keys);
}

static int s3_upload_resume(berth_store_t *st, const char *id, const char *state, berth_store_upload_t **out, int64_t *size_out,
                            berth_err_t *err)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, id);
    u->db = 1;
    u->whole = 1; /* the caller's row lock makes this the session's only writer: its running hash vouches */
    int rc = 0;
    if (state != NULL && state[0] != '\0' && parse_state(u, state, strlen(state), 0, s->part_size) != 0)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: the state of upload %s is damaged", id);
    if (rc == 0 && u->staged) {
        berth_err_set(err, BERTH_OCI_RANGE_INVALID, "upload is being completed by another request");
        if (err != NULL)
            err->code = BERTH_ECONFLICT;
        rc = BERTH_ECONFLICT;
    }
    if (rc == 0 && u->tail > 0) {
        char key[192];
        tail_key(id, u->tail_nonce, key, sizeof(key));
        grow_t g = {0};
        rc = berth_s3_get(s->s3, key, 0, -1, grow_sink, &g, err);
        if (rc == 0 && g.len != u->tail)
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "s3: the tail of upload %s has %zu bytes, not %zu", id, g.len, u->tail);
        if (rc == 0)
            memcpy(u->buf, g.buf, u->tail);
        free(g.buf);
    }
    if (rc != 0) {
        free_upload(u);
        return rc;
    }
    *out = &u->super;
    *size_out = u->offset;
    return 0;
}

static int s3_upload_save(berth_store_upload_t *bu, char **state_out, berth_err_t *err)
{
    s3u_t *u = (s3u_t *)bu;
    s3s_t *s = S3S(bu->store);
    if (u->dirty && u->tail > 0) {
        unsigned char r[8];
        char key[192];
        if (RAND_bytes(r, sizeof(r)) != 1)
            return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: no random bytes");
        for (size_t i = 0; i < sizeof(r); i++)
            snprintf(u->tail_nonce + 2 * i, 3, "%02x", r[i]);
        tail_key(bu->id, u->tail_nonce, key, sizeof(key));
        int rc = berth_s3_put(s->s3, key, u->buf, u->tail, err);
        if (rc != 0)
            return rc;
    } else if (u->tail == 0) {
        u->tail_nonce[0] = '\0';
    }
    u->dirty = 0;
    size_t n;
    if ((*state_out = state_text(u, 0, &n)) == NULL)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "s3: out of memory");
    return 0;
}

static int s3_upload_state_size(berth_store_t *st, const char *state, int64_t *size_out)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, "");
    u->db = 1;
    int rc = state == NULL || state[0] == '\0' ? 0 : parse_state(u, state, strlen(state), 0, s->part_size) != 0 ? BERTH_ERROR : 0;
    *size_out = u->offset;
    free_upload(u);
    return rc;
}

static void s3_upload_discard(berth_store_t *st, const char *id, const char *state)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, id);
    u->db = 1;
    berth_err_t err;
    if (state[0] != '\0' && parse_state(u, state, strlen(state), 0, s->part_size) == 0 && u->upload_id[0] != '\0') {
        char key[128];
        data_key(id, key, sizeof(key));
        if (berth_s3_mpu_abort(s->s3, key, u->upload_id, &err) != 0)
            berth_log_warn("upload %s: aborting its multipart upload: %s", id, err.msg);
    }
    free_upload(u);
    s3_upload_remove(st, id);
}

/* Copy key `from` to `to` on the gateway: one CopyObject up to 5 GiB, UploadPartCopy ranges above */
static int copy_object(s3s_t *s, const char *from, const char *to, int64_t size, berth_err_t *err)
{
    if (size <= COPY_MAX)
        return berth_s3_copy(s->s3, from, to, err);
    char uid[128];
    int rc = berth_s3_mpu_begin(s->s3, to, uid, err);
    if (rc != 0)
        return rc;
    int n = (int)((size + COPY_PART - 1) / COPY_PART);
    char(*etags)[128] = calloc((size_t)n, sizeof(*etags));
    const char **ep = calloc((size_t)n, sizeof(*ep));
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t off = (int64_t)i * COPY_PART, len = size - off < COPY_PART ? size - off : COPY_PART;
        rc = berth_s3_mpu_part_copy(s->s3, to, uid, i + 1, from, off, len, etags[i], err);
        ep[i] = etags[i];
    }
    if (rc == 0)
        rc = berth_s3_mpu_complete(s->s3, to, uid, n, ep, err);
    if (rc != 0)
        berth_s3_mpu_abort(s->s3, to, uid, NULL);
    free(ep);
    free(etags);
    return rc;
}

static int s3_upload_prepare(berth_store_upload_t *bu, const berth_digest_t *d, int verified, berth_err_t *err)
{
    s3u_t *u = (s3u_t *)bu;
    s3s_t *s = S3S(bu->store);
    char staged[128];
    data_key(bu->id, staged, sizeof(staged));
    int rc = 0;
    /* nothing stops two requests from writing one session at once on s3 (no lock like the filesystem's flock),
     * so the caller's running hash vouches for the object only when this request wrote all of it */
    if (!u->whole)
        verified = 0;
    if (u->nparts == 0) {
        rc = berth_s3_put(s->s3, staged, u->buf, u->tail, err);
    } else {
        if (u->tail > 0 && (rc = flush_part(s, u, err)) != 0)
            return rc;
        const char **ep = calloc((size_t)u->nparts, sizeof(*ep));
        for (int i = 0; i < u->nparts; i++)
            ep[i] = u->etags[i];
        rc = berth_s3_mpu_complete(s->s3, staged, u->upload_id, u->nparts, ep, err);
        free(ep);
    }
    if (rc != 0)
        return rc;
    /* from here the staged object holds the bytes and the multipart upload is gone: the session cannot take
     * more bytes, and its state is not written back */
    u->upload_id[0] = '\0';
    u->nparts = 0;
    u->dirty = 0;
    if (u->db) { /* the caller saves this state: the session takes no more bytes, its tail objects are spent */
        u->staged = 1;
        u->tail = 0;
        u->tail_nonce[0] = '\0';
        remove_prefix(s, bu->id, ".tail-");
    }
    if (!verified) {
        berth_hash_t *h = berth_hash_new(d->alg);
        berth_digest_t got;
        rc = berth_s3_get(s->s3, staged, 0, -1, berth_store__hash_sink, h, err);
        berth_hash_peek(h, &got);
        berth_hash_free(h);
        if (rc == 0 && !berth_digest_equal(&got, d)) {
            berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "content digest %s does not match %s", got.str, d->str);
            rc = BERTH_EDIGEST;
            if (err != NULL)
                err->code = rc;
            berth_s3_delete(s->s3, staged, NULL);
        }
    }
    return rc;
}

static int s3_upload_place(berth_store_t *st, const char *id, const berth_digest_t *d, berth_err_t *err)
{
    s3s_t *s = S3S(st);
    char staged[128], key[256], state[128];
    data_key(id, staged, sizeof(staged));
    state_key(id, state, sizeof(state));
    blob_key(d, key, sizeof(key));
    int64_t size;
    int rc = berth_s3_head(s->s3, key, &size, err);
    if (rc == BERTH_ENOTFOUND) { /* content addressing: a stored copy is the same bytes */
        berth_err_clear(err);
        if ((rc = berth_s3_head(s->s3, staged, &size, err)) == 0)
            rc = copy_object(s, staged, key, size, err);
    }
    if (rc != 0)
        return rc;
    berth_s3_delete(s->s3, staged, NULL);
    berth_s3_delete(s->s3, state, NULL);
    return 0;
}

static int s3_upload_read(berth_store_t *st, const char *id, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err)
{
    (void)st;
    (void)id;
    (void)len;
    (void)sink;
    (void)arg;
    (void)err;
    return BERTH_EINVAL; /* parts of a running multipart upload cannot be read: the commit reads the staged object */
}

static int s3_upload_size(berth_store_t *st, const char *id, int64_t *size_out)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, id);
    int rc = load_state(s, id, u, 0, NULL);
    if (rc == 0)
        *size_out = u->offset;
    free_upload(u);
    return rc;
}

typedef struct {
    void (*cb)(const char *id, double age_seconds, void *cb_data);
    void *cb_data;
    time_t now;
    int n;
    char last[64]; /* a session's keys are listed together: each session is reported once */
} each_t;

/* uploads/<id> (a state), uploads/<id>.data, uploads/<id>.tail-<nonce>: all name session <id> */
static void each_key(const char *key, int64_t size, time_t mtime, void *arg)
{
    (void)size;
    each_t *e = arg;
    if (strncmp(key, "uploads/", 8) != 0)
        return;
    char id[64];
    size_t n = strcspn(key + 8, "./");
    if (n == 0 || n >= sizeof(id) || key[8 + n] == '/')
        return;
    snprintf(id, sizeof(id), "%.*s", (int)n, key + 8);
    if (strcmp(id, e->last) == 0)
        return;
    snprintf(e->last, sizeof(e->last), "%s", id);
    e->cb(id, difftime(e->now, mtime), e->cb_data);
    e->n++;
}

static int s3_upload_each(berth_store_t *st, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data)
{
    each_t e = {.cb = cb, .cb_data = cb_data, .now = time(NULL)};
    char token[1024] = "", next[1024];
    berth_err_t err;
    do { /* paged: 1000 keys a request */
        if (berth_s3_list(S3S(st)->s3, "uploads/", token, next, sizeof(next), each_key, &e, &err) != 0) {
            berth_log_warn("upload sweep: %s", err.msg);
            break;
        }
        snprintf(token, sizeof(token), "%s", next);
    } while (token[0] != '\0');
    return e.n;
}

static void s3_upload_remove(berth_store_t *st, const char *id)
{
    s3s_t *s = S3S(st);
    s3u_t *u = new_upload(s, id);
    char key[128];
    berth_err_t err;
    int rc = load_state(s, id, u, 0, &err);
    if (rc == BERTH_EUNAVAIL) { /* the gateway does not answer: the janitor tries again later */
        berth_log_warn("cannot remove upload %s now: %s", id, err.msg);
        free_upload(u);
        return;
    }
    if (rc == 0 && u->upload_id[0] != '\0') {
        data_key(id, key, sizeof(key));
        if (berth_s3_mpu_abort(s->s3, key, u->upload_id, &err) != 0)
            berth_log_warn("upload %s: aborting its multipart upload: %s", id, err.msg);
    }
    free_upload(u);
    remove_prefix(s, id, "."); /* the staged object, tails */
    state_key(id, key, sizeof(key));
    if (berth_s3_delete(s->s3, key, &err) != 0)
        berth_log_warn("cannot remove upload %s: %s", id, err.msg);
}

const berth_store_ops_t berth_store_s3_ops = {.name = "s3",
                                              .close = s3_close,
                                              .blob_stat = s3_blob_stat,
                                              .blob_read = s3_blob_read,
                                              .blob_remove = s3_blob_remove,
                                              .blob_each = s3_blob_each,
                                              .blob_serve = s3_blob_serve,
                                              .upload_open = s3_upload_open,
                                              .upload_write = s3_upload_write,
                                              .upload_prepare = s3_upload_prepare,
                                              .upload_place = s3_upload_place,
                                              .upload_close = s3_upload_close,
                                              .upload_read = s3_upload_read,
                                              .upload_size = s3_upload_size,
                                              .upload_each = s3_upload_each,
                                              .upload_remove = s3_upload_remove,
                                              .upload_resume = s3_upload_resume,
                                              .upload_save = s3_upload_save,
                                              .upload_state_size = s3_upload_state_size,
                                              .upload_discard = s3_upload_discard,
                                              .space = NULL,
                                              .reachable = s3_reachable,
                                              .edge = s3_edge};
