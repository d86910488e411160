#include "registry/service/proxy.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/manifest.h"
#include "registry/service/events.h"
#include "registry/service/registry.h"
#include "registry/service/upload.h"
#include "replication/client.h"
#include "replication/replication.h"
#include "replication/task.h"
#include "sql/api.h"
#include "sql/proxy.h"
#include "sql/registry.h"

#define ACCEPT_ALL                                                                                                                 \
    "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "                                \
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"
#define MANIFEST_TIMEOUT_S 10 /* a manifest request slower than this counts as an upstream outage */
#define CLAIM_WAIT_S 900      /* how long a fetch waits for another berthd's fetch of the same thing */

/* One fetch and the requests waiting for it. */
typedef struct st_waiter_t {
    berth_proxy_done_fn done;
    berth_proxy_start_fn start; /* the request that started a blob fetch and streams it */
    void *ctx;
    struct st_waiter_t *next;
} waiter_t;

typedef struct st_flight_t {
    char key[BERTH_NAME_MAX + BERTH_DIGEST_MAX + 16]; /* kind|repo|ref: the unit of coalescing, here and in PostgreSQL */
    berth_proxy_need_t need;
    waiter_t *waiters;
    struct st_flight_t *next;  /* flights in progress or queued */
    struct st_flight_t *qnext; /* queued, not yet started */
} flight_t;

struct st_berth_proxy_stream_t {
    int refs;
    int fd;
    int64_t have, total;
    int state; /* 0 arriving, 1 complete, -1 failed */
    char digest[BERTH_DIGEST_MAX];
};

static struct {
    berth_registry_t *reg;
    int ttl, nthreads, started, stop;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    flight_t *flights, *qhead, *qtail;
    berth_proxy_stats_t st;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .ttl = 60};

/* Upstream HEAD answers for blobs not held: direct-mapped, a newer answer takes the slot. A 404 is kept too, for
 * at most NEGATIVE_TTL seconds (a blob pushed upstream meanwhile is seen that late), so HEADs of random digests
 * cost one upstream HEAD per digest, not one each */
#define HEAD_SLOTS 512
#define NEGATIVE_TTL 60
static struct {
    char key[BERTH_NAME_MAX + BERTH_REF_MAX + 4]; /* repo|digest */
    int64_t size;                                 /* -1: the upstream answered 404 */
    time_t until;
} H[HEAD_SLOTS];

#define COUNT(field, n) __atomic_add_fetch(&P.st.field, (uint64_t)(n), __ATOMIC_RELAXED)

int berth_proxy_manifest_ttl(void)
{
    return P.ttl;
}

static size_t head_slot(const char *key)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (size_t)(h % HEAD_SLOTS);
}

static void head_put(const char *repo, const char *digest, int64_t size)
{
    char key[sizeof(H[0].key)];
    snprintf(key, sizeof(key), "%s|%s", repo, digest);
    size_t i = head_slot(key);
    pthread_mutex_lock(&P.mu);
    snprintf(H[i].key, sizeof(H[i].key), "%s", key);
    H[i].size = size;
    H[i].until = time(NULL) + (size < 0 && P.ttl > NEGATIVE_TTL ? NEGATIVE_TTL : P.ttl);
    pthread_mutex_unlock(&P.mu);
}

int berth_proxy_head_lookup(const char *repo, const char *digest, int64_t *size)
{
    char key[sizeof(H[0].key)];
    snprintf(key, sizeof(key), "%s|%s", repo, digest);
    size_t i = head_slot(key);
    pthread_mutex_lock(&P.mu);
    int found = strcmp(H[i].key, key) == 0 && H[i].until > time(NULL);
    if (found)
        *size = H[i].size;
    pthread_mutex_unlock(&P.mu);
    return found;
}

void berth_proxy_check_name(berth_proxy_kind_t kind, const char *ref, char *out, size_t outsz)
{
    /* no tag contains '/', so the referrers' entries never meet a tag's */
    snprintf(out, outsz, "%s%s", kind == BERTH_PROXY_REFERRERS ? "referrers/" : "",
             kind == BERTH_PROXY_TAG || kind == BERTH_PROXY_REFERRERS ? ref : "");
}

void berth_proxy_stats(berth_proxy_stats_t *out)
{
    out->upstream_requests = __atomic_load_n(&P.st.upstream_requests, __ATOMIC_RELAXED);
    out->upstream_bytes = __atomic_load_n(&P.st.upstream_bytes, __ATOMIC_RELAXED);
    out->coalesced = __atomic_load_n(&P.st.coalesced, __ATOMIC_RELAXED);
    out->stale_served = __atomic_load_n(&P.st.stale_served, __ATOMIC_RELAXED);
    out->failures = __atomic_load_n(&P.st.failures, __ATOMIC_RELAXED);
    out->digest_mismatch = __atomic_load_n(&P.st.digest_mismatch, __ATOMIC_RELAXED);
    out->streamed = __atomic_load_n(&P.st.streamed, __ATOMIC_RELAXED);
}

/* ---- streams ------------------------------------------------------------------------------------------------- */

int berth_proxy_stream_state(berth_proxy_stream_t *s, int64_t *have, int64_t *total)
{
    int st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE); /* before `have`: complete means every byte is counted */
    *have = __atomic_load_n(&s->have, __ATOMIC_ACQUIRE);
    *total = __atomic_load_n(&s->total, __ATOMIC_RELAXED);
    return st;
}

int berth_proxy_stream_fd(const berth_proxy_stream_t *s)
{
    return s->fd;
}

const char *berth_proxy_stream_digest(const berth_proxy_stream_t *s)
{
    return s->digest;
}

void berth_proxy_stream_release(berth_proxy_stream_t *s)
{
    if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (s->fd >= 0)
            close(s->fd);
        free(s);
    }
}

/* The fetch has bytes: hand the stream to the request that asks for it (it leaves the waiters) */
static void stream_started(flight_t *fl, berth_proxy_stream_t *s)
{
    pthread_mutex_lock(&P.mu);
    waiter_t **p = &fl->waiters;
    while (*p != NULL && (*p)->start == NULL)
        p = &(*p)->next;
    waiter_t *w = *p;
    if (w != NULL)
        *p = w->next;
    pthread_mutex_unlock(&P.mu);
    if (w == NULL)
        return;
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
    COUNT(streamed, 1);
    w->start(w->ctx, s);
    free(w);
}

/* ---- talking to the upstream ---------------------------------------------------------------------------------- */

typedef struct {
    berth_dbconn_t *c;
    flight_t *fl;
    const berth_proxy_need_t *need;
    berth_client_t *client;
    char url[512];    /* the endpoint, for logs */
    char upname[300]; /* the repository's name upstream */
    int is_docker_hub;
} fetch_t;

/* The endpoint and a client for it, with its sealed secret opened only for the client's credentials */
static int open_upstream(fetch_t *f, long timeout_s, berth_err_t *err)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", f->need->registry_id);
    const char *p[] = {id};
    berth_db_json_t r;
    int rc = berth_db_api(f->c, BERTH_Q_REG_ENGINE, p, &r, err);
    if (rc != 0)
        return rc;
    json_t *o = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    free(r.json);
    berth_repl_endpoint_t *e = berth_repl_endpoint_new(o);
    json_decref(o);
    if (e == NULL)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: registry endpoint %s is gone", id);
    char *secret = e->secret[0] != '\0' ? berth_repl_open(e->secret) : NULL;
    berth_client_conf_t cc = {.url = e->url,
                              .user = e->access_key,
                              .password = secret != NULL ? secret : "",
                              .insecure = e->insecure,
                              .ca_file = e->ca_file,
                              .max_recv_bytes_per_s = f->need->speed_kb > 0 ? f->need->speed_kb * 1024 : 0,
                              .timeout_s = timeout_s,
                              .max_body = BERTH_MANIFEST_MAX}; /* manifests, referrer lists: never more is stored */
    f->client = berth_client_new(&cc);
    if (secret != NULL) {
        memset(secret, 0, strlen(secret));
        free(secret);
    }
    snprintf(f->url, sizeof(f->url), "%s", e->url);
    f->is_docker_hub = strstr(e->url, "docker.io") != NULL;
    berth_repl_endpoint_free(e);
    /* "<project>/<name>" here is "<name>" there; Docker Hub keeps its official images under library/ */
    const char *name = strchr(f->need->repo, '/') + 1;
    snprintf(f->upname, sizeof(f->upname), "%s%s", f->is_docker_hub && strchr(name, '/') == NULL ? "library/" : "", name);
    return 0;
}

/* A held tag is served because the upstream could not say whether it moved */
static int serve_held(fetch_t *f, const char *why)
{
    COUNT(stale_served, 1);
    berth_log_warn("proxy: upstream %s %s for %s:%s: serving the held %s", f->url, why, f->need->repo, f->need->ref,
                   f->need->cached);
    berth_db_proxy_checked(f->c, f->need->repo, f->need->ref, NULL); /* the next attempt after the TTL, not per request */
    return 0;
}

/* The digest `body` must have: the one asked for, or the one the upstream named; 0 when it matches */
static int verify_manifest(fetch_t *f, const char *body, size_t len, const char *header_digest, berth_err_t *err)
{
    berth_digest_t want, got;
    const char *claimed = f->need->kind == BERTH_PROXY_DIGEST ? f->need->ref : header_digest;
    if (claimed == NULL || claimed[0] == '\0')
        return 0; /* a tag without Docker-Content-Digest: the digest is what the bytes are */
    if (berth_digest_parse(&want, claimed, strlen(claimed), NULL) != 0)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s named digest \"%.80s\"", f->url, claimed);
    berth_digest_of(&got, want.alg, body, len);
    if (berth_digest_equal(&want, &got))
        return 0;
    COUNT(digest_mismatch, 1);
    return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s sent %s/%s with digest %s, not %s: not stored", f->url,
                         f->upname, f->need->ref, got.str, want.str);
}

/* Store fetched manifest bytes the way a client's PUT is stored (same checks, transaction and events) */
static int store_manifest(fetch_t *f, const berth_http_t *r, berth_err_t *err)
{
    char ctype[256];
    snprintf(ctype, sizeof(ctype), "%.*s", (int)strcspn(r->content_type, ";"), r->content_type);
    berth_v2_req_t put = {
        .method = "PUT", .content_type = ctype, .body = r->body, .body_len = r->len, .who = "", .from_upstream = 1};
    put.route.kind = BERTH_ROUTE_MANIFEST;
    put.route.id = BERTH_V2_MANIFEST_PUT;
    snprintf(put.route.name, sizeof(put.route.name), "%s", f->need->repo);
    snprintf(put.route.ref, sizeof(put.route.ref), "%s", f->need->ref);
    put.route.ref_is_digest = f->need->kind == BERTH_PROXY_DIGEST;
    berth_resp_t pr;
    berth_v2_handle(P.reg, &put, &pr);
    int ok = pr.status == 201;
    if (!ok)
        berth_log_warn("proxy: storing %s:%s from %s: HTTP %d %.*s", f->need->repo, f->need->ref, f->url, pr.status,
                       (int)(pr.len < 300 ? pr.len : 300), pr.body != NULL ? pr.body : "");
    berth_resp_dispose(&pr);
    if (!ok)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: %s:%s fetched but not stored", f->need->repo, f->need->ref);
    return 0;
}

static int fetch_manifest(fetch_t *f, berth_err_t *err)
{
    const berth_proxy_need_t *n = f->need;
    char path[700];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", f->upname, n->ref);
    const char *const accept[] = {ACCEPT_ALL, NULL};
    int held = n->kind == BERTH_PROXY_TAG && n->cached[0] != '\0';
    char why[64];
    if (held) { /* revalidate: has the tag moved? */
        COUNT(upstream_requests, 1);
        int t = berth_client_do(f->client, "HEAD", path, accept, NULL, 0, &r);
        long st = r.status;
        int same = t == 0 && st == 200 && strcmp(r.digest, n->cached) == 0;
        berth_http_dispose(&r);
        if (same)
            return berth_db_proxy_checked(f->c, n->repo, n->ref, err);
        if (t != 0 || st != 200) {
            snprintf(why, sizeof(why), t != 0 ? "unreachable" : "answered HTTP %ld", st);
            return serve_held(f, why);
        }
    }
    COUNT(upstream_requests, 1);
    int t = berth_client_do(f->client, "GET", path, accept, NULL, 0, &r);
    if (t != 0 || r.status != 200) {
        long st = r.status;
        int too_big = r.too_big; /* cut at BERTH_MANIFEST_MAX: nothing is stored, a held copy is served */
        berth_http_dispose(&r);
        if (too_big)
            snprintf(why, sizeof(why), "sent a manifest over %u bytes", BERTH_MANIFEST_MAX);
        else
            snprintf(why, sizeof(why), t != 0 ? "unreachable" : "answered HTTP %ld", st);
        if (held)
            return serve_held(f, why);
        if (t == 0 && st == 404)
            return berth_err_set(err, BERTH_OCI_MANIFEST_UNKNOWN, "%s is not known upstream", n->ref);
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s %s for %s/%s", f->url, why, f->upname, n->ref);
    }
    COUNT(upstream_bytes, r.len);
    int rc = verify_manifest(f, r.body, r.len, r.digest, err);
    if (rc == 0)
        rc = store_manifest(f, &r, err);
    berth_http_dispose(&r);
    if (rc != 0 && held) /* e.g. an immutable tag here, or a quota: what is held stays what is served */
        return serve_held(f, "moved, but the new manifest was not stored");
    if (rc == 0 && n->kind == BERTH_PROXY_TAG)
        rc = berth_db_proxy_checked(f->c, n->repo, n->ref, err);
    if (rc == 0)
        berth_log_info("proxy: %s:%s fetched from %s", n->repo, n->ref, f->url);
    return rc;
}

/* A blob's bytes: to the file and through the hash as they arrive */
typedef struct {
    berth_store_upload_t *w;
    berth_hash_t *h;
    int64_t n;
    int write_failed;
    berth_err_t err;
    flight_t *fl;
    berth_proxy_stream_t *stream; /* NULL: nobody reads along */
} sink_t;

static int blob_sink(void *ctx, const char *data, size_t len, int64_t total)
{
    sink_t *s = ctx;
    if (berth_store_upload_write(s->w, data, len, &s->err) != 0) {
        s->write_failed = 1;
        return -1;
    }
    berth_hash_update(s->h, data, len);
    int first = s->n == 0;
    s->n += (int64_t)len;
    COUNT(upstream_bytes, len);
    if (s->stream != NULL) {
        if (first)
            __atomic_store_n(&s->stream->total, total, __ATOMIC_RELAXED);
        __atomic_store_n(&s->stream->have, s->n, __ATOMIC_RELEASE);
        if (first)
            stream_started(s->fl, s->stream);
    }
    return 0;
}

static int fetch_blob(fetch_t *f, berth_err_t *err)
{
    const berth_proxy_need_t *n = f->need;
    berth_store_t *store = P.reg->store;
    berth_digest_t want, got;
    if (berth_digest_parse(&want, n->ref, strlen(n->ref), err) != 0)
        return BERTH_EINVAL;
    /* a file of the uploads area, so a crash leaves debris the janitor removes */
    unsigned char rnd[12];
    char id[40];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "proxy: no random bytes");
    snprintf(id, sizeof(id), "proxy-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(id + 6 + 2 * i, 3, "%02x", rnd[i]);
    int64_t have;
    sink_t s = {.fl = f->fl};
    int rc = berth_store_upload_open(store, id, 1, &s.w, &have, err);
    if (rc != 0)
        return rc;
    s.h = berth_hash_new(want.alg);
    int rfd;
    if (berth_store_upload_open_read(store, id, &rfd) == 0) { /* a reader follows the file, renamed or not (filesystem) */
        s.stream = calloc(1, sizeof(*s.stream));
        s.stream->refs = 1;
        s.stream->fd = rfd;
        s.stream->total = -1;
        snprintf(s.stream->digest, sizeof(s.stream->digest), "%s", want.str);
    }
    char path[700];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/blobs/%s", f->upname, n->ref);
    COUNT(upstream_requests, 1);
    int t = berth_client_get_to(f->client, path, NULL, blob_sink, &s, &r);
    long st = r.status;
    berth_http_dispose(&r);
    if (s.write_failed) {
        if (err != NULL)
            *err = s.err;
        rc = s.err.code != 0 ? s.err.code : BERTH_ERROR;
    } else if (t != 0 || st != 200) {
        rc = t == 0 && st == 404 ? berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, "%s is not known upstream", n->ref)
                                 : berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s %s%ld for blob %s/%s", f->url,
                                                 t != 0 ? "failed after HTTP " : "answered HTTP ", st, f->upname, n->ref);
    }
    if (rc == 0) {
        berth_hash_peek(s.h, &got);
        if (!berth_digest_equal(&got, &want)) {
            COUNT(digest_mismatch, 1);
            rc =
                berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s sent %lld bytes for %s/%s with digest %s: not stored",
                              f->url, (long long)s.n, f->upname, n->ref, got.str);
        }
    }
    /* visible only once verified: rename into place under the blob-file lock, then the row (sql/registry.h) */
    if (rc == 0)
        rc = berth_store_upload_prepare(s.w, &want, 1, err);
    berth_store_upload_close(s.w, NULL);
    berth_hash_free(s.h);
    berth_upload_place_t place = {.store = store, .id = id, .digest = &want};
    if (rc == 0)
        rc = berth_db_blob_commit(f->c, n->repo, want.str, s.n, NULL, berth_upload_place, &place, err);
    if (s.stream != NULL) { /* the reader may finish (or must abort) now */
        __atomic_store_n(&s.stream->state, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
        berth_proxy_stream_release(s.stream);
    }
    if (rc != 0) {
        berth_store_upload_remove(store, id); /* missing once placed: fine */
        return rc;
    }
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_BLOB_PUSH,
                                      .surface = BERTH_EVENT_INTERNAL,
                                      .repo = n->repo,
                                      .digest = want.str,
                                      .size = s.n,
                                      .principal = ""});
    berth_log_info("proxy: %s@%s fetched from %s (%lld bytes)", n->repo, want.str, f->url, (long long)s.n);
    return 0;
}

/* A HEAD of a blob not held: the upstream's HEAD says whether it exists and its size; the body is fetched only
 * when a client GETs it */
static int fetch_blob_head(fetch_t *f, berth_err_t *err)
{
    const berth_proxy_need_t *n = f->need;
    char path[700];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/blobs/%s", f->upname, n->ref);
    COUNT(upstream_requests, 1);
    int t = berth_client_do(f->client, "HEAD", path, NULL, NULL, 0, &r);
    long st = r.status;
    long long len = r.content_length;
    int other = r.digest[0] != '\0' && strcmp(r.digest, n->ref) != 0;
    berth_http_dispose(&r);
    if (t == 0 && st == 404) {
        head_put(n->repo, n->ref, -1);
        return berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, "%s is not known upstream", n->ref);
    }
    if (t != 0 || st != 200 || len < 0 || other)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: upstream %s %s%ld%s for HEAD of blob %s/%s", f->url,
                             t != 0 ? "failed after HTTP " : "answered HTTP ", st,
                             other     ? " with another digest"
                             : len < 0 ? " without a length"
                                       : "",
                             f->upname, n->ref);
    head_put(n->repo, n->ref, (int64_t)len);
    return 0;
}

/* Referrers pass through: the upstream's list names manifests; those not held are fetched and stored by digest
 * (their subject is the digest asked), so the answer is built from what is held, filters included. An upstream
 * without the referrers API, or one that fails, leaves what is held. */
static int fetch_referrers(fetch_t *f, berth_err_t *err)
{
    const berth_proxy_need_t *n = f->need;
    char path[700], name[BERTH_REF_MAX + 16];
    berth_http_t r;
    berth_proxy_check_name(n->kind, n->ref, name, sizeof(name));
    snprintf(path, sizeof(path), "/v2/%s/referrers/%s", f->upname, n->ref);
    COUNT(upstream_requests, 1);
    int t = berth_client_do(f->client, "GET", path, (const char *const[]){"Accept: application/vnd.oci.image.index.v1+json", NULL},
                            NULL, 0, &r);
    json_t *idx = t == 0 && r.status == 200 ? json_loadb(r.body != NULL ? r.body : "", r.len, 0, NULL) : NULL;
    berth_http_dispose(&r);
    json_t *d;
    size_t i;
    json_array_foreach(json_object_get(idx, "manifests"), i, d)
    {
        const char *digest = json_string_value(json_object_get(d, "digest"));
        berth_db_manifest_t m = {0};
        if (digest == NULL || strlen(digest) > BERTH_REF_MAX || berth_db_manifest_get(f->c, n->repo, digest, 1, &m, NULL) == 0) {
            berth_db_manifest_dispose(&m);
            continue;
        }
        berth_proxy_need_t one = *n;
        one.kind = BERTH_PROXY_DIGEST;
        snprintf(one.ref, sizeof(one.ref), "%s", digest);
        fetch_t g = *f;
        g.need = &one;
        berth_err_t one_err;
        berth_err_clear(&one_err);
        if (fetch_manifest(&g, &one_err) != 0) /* one that cannot be had leaves the others */
            berth_log_warn("proxy: referrer %s of %s/%s: %s", digest, n->repo, n->ref, one_err.msg);
    }
    json_decref(idx);
    return berth_db_proxy_checked(f->c, n->repo, name, err);
}

/* ---- one flight ------------------------------------------------------------------------------------------------ */

/* Another berthd (or an earlier flight here) may have done the work while this one waited for the claim */
static int already_done(berth_dbconn_t *c, const berth_proxy_need_t *n)
{
    int64_t size;
    berth_db_manifest_t m = {0};
    berth_db_proxy_t facts;
    switch (n->kind) {
    case BERTH_PROXY_BLOB: return berth_db_blob_stat(c, n->repo, n->ref, &size, NULL) == 0;
    case BERTH_PROXY_BLOB_HEAD:
        return berth_db_blob_stat(c, n->repo, n->ref, &size, NULL) == 0 || berth_proxy_head_lookup(n->repo, n->ref, &size);
    case BERTH_PROXY_DIGEST:
    case BERTH_PROXY_TAG: {
        if (n->kind == BERTH_PROXY_TAG &&
            !(berth_db_proxy_of(c, n->repo, n->ref, &facts, NULL) == 1 && facts.tag_age >= 0 && facts.tag_age < P.ttl))
            return 0;
        int held = berth_db_manifest_get(c, n->repo, n->ref, n->kind == BERTH_PROXY_DIGEST, &m, NULL) == 0;
        berth_db_manifest_dispose(&m);
        return held;
    }
    case BERTH_PROXY_REFERRERS: {
        char name[BERTH_REF_MAX + 16];
        berth_proxy_check_name(n->kind, n->ref, name, sizeof(name));
        return berth_db_proxy_of(c, n->repo, name, &facts, NULL) == 1 && facts.tag_age >= 0 && facts.tag_age < P.ttl;
    }
    default: return 1;
    }
}

/* The cross-process claim: one berthd fetches, the others wait for it and then find the work done */
static int claim(berth_dbconn_t *c, const char *key, berth_err_t *err)
{
    time_t until = time(NULL) + CLAIM_WAIT_S;
    useconds_t pause = 10000;
    for (;;) {
        int got = berth_db_proxy_trylock(c, key, err);
        if (got != 0)
            return got < 0 ? got : 0;
        if (time(NULL) > until)
            return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "proxy: another berthd's fetch of %s did not end", key);
        usleep(pause);
        pause = pause < 200000 ? pause * 2 : pause;
    }
}

static int run_flight(flight_t *fl, berth_err_t *err)
{
    berth_dbconn_t *c = berth_db_acquire(P.reg->db, err);
    if (c == NULL)
        return err->code != 0 ? err->code : BERTH_ERROR;
    int rc = claim(c, fl->key, err);
    if (rc == 0) {
        if (!already_done(c, &fl->need)) {
            fetch_t f = {.c = c, .fl = fl, .need = &fl->need};
            rc = open_upstream(&f, fl->need.kind == BERTH_PROXY_BLOB ? -1 : MANIFEST_TIMEOUT_S, err);
            if (rc == 0)
                rc = fl->need.kind == BERTH_PROXY_BLOB        ? fetch_blob(&f, err)
                     : fl->need.kind == BERTH_PROXY_BLOB_HEAD ? fetch_blob_head(&f, err)
                     : fl->need.kind == BERTH_PROXY_REFERRERS ? fetch_referrers(&f, err)
                                                              : fetch_manifest(&f, err);
            berth_client_free(f.client);
        }
        berth_db_proxy_unlock(c, fl->key);
    }
    berth_db_release(P.reg->db, c);
    return rc;
}

static void *thread_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (P.qhead == NULL && !P.stop)
            pthread_cond_wait(&P.cv, &P.mu);
        if (P.qhead == NULL)
            break;
        flight_t *fl = P.qhead;
        P.qhead = fl->qnext;
        if (P.qhead == NULL)
            P.qtail = NULL;
        pthread_mutex_unlock(&P.mu);
        berth_err_t err;
        berth_err_clear(&err);
        int rc = run_flight(fl, &err);
        if (rc != 0) {
            COUNT(failures, 1);
            if (berth_err_status(err.oci) >= 500)
                berth_log_err("%s", err.msg[0] ? err.msg : "proxy: fetch failed");
        }
        pthread_mutex_lock(&P.mu);
        for (flight_t **p = &P.flights; *p != NULL; p = &(*p)->next)
            if (*p == fl) {
                *p = fl->next;
                break;
            }
        waiter_t *w = fl->waiters;
        pthread_mutex_unlock(&P.mu);
        /* joined no later than the unlink above: every waiter gets this flight's answer */
        while (w != NULL) {
            waiter_t *next = w->next;
            w->done(w->ctx, rc, &err);
            free(w);
            w = next;
        }
        free(fl);
        pthread_mutex_lock(&P.mu);
    }
    pthread_mutex_unlock(&P.mu);
    return NULL;
}

void berth_proxy_fetch(const berth_proxy_need_t *need, berth_proxy_done_fn done, void *ctx)
{
    berth_proxy_fetch_stream(need, NULL, done, ctx);
}

void berth_proxy_fetch_stream(const berth_proxy_need_t *need, berth_proxy_start_fn start, berth_proxy_done_fn done, void *ctx)
{
    char key[sizeof(((flight_t *)0)->key)];
    static const char kind_letter[] = "-tdbrh"; /* by berth_proxy_kind_t */
    snprintf(key, sizeof(key), "%c|%s|%s", kind_letter[need->kind], need->repo, need->ref);
    waiter_t *w = calloc(1, sizeof(*w));
    w->done = done;
    w->ctx = ctx;
    pthread_mutex_lock(&P.mu);
    if (!P.started || P.stop) {
        pthread_mutex_unlock(&P.mu);
        free(w);
        berth_err_t err;
        berth_err_set(&err, BERTH_OCI_UNAVAILABLE, "proxy: not running");
        done(ctx, err.code, &err);
        return;
    }
    flight_t *fl = P.flights;
    while (fl != NULL && strcmp(fl->key, key) != 0)
        fl = fl->next;
    if (fl != NULL) {
        COUNT(coalesced, 1); /* joins: waits for the verified blob */
    } else {
        w->start = need->kind == BERTH_PROXY_BLOB ? start : NULL;
        fl = calloc(1, sizeof(*fl));
        snprintf(fl->key, sizeof(fl->key), "%s", key);
        fl->need = *need;
        fl->next = P.flights;
        P.flights = fl;
        if (P.qtail != NULL)
            P.qtail->qnext = fl;
        else
            P.qhead = fl;
        P.qtail = fl;
        pthread_cond_signal(&P.cv);
    }
    w->next = fl->waiters;
    fl->waiters = w;
    pthread_mutex_unlock(&P.mu);
}

int berth_proxy_start(berth_registry_t *reg, const berth_proxy_conf_t *conf, berth_err_t *err)
{
    P.reg = reg;
    P.ttl = conf->manifest_ttl > 0 ? conf->manifest_ttl : 60;
    P.nthreads = conf->workers > 0 ? conf->workers : 4;
    P.threads = calloc((size_t)P.nthreads, sizeof(pthread_t));
    P.stop = 0;
    for (int i = 0; i < P.nthreads; i++)
        if (pthread_create(&P.threads[i], NULL, thread_main, NULL) != 0) {
            P.nthreads = i;
            berth_proxy_stop();
            return berth_err_set(err, BERTH_OCI_INTERNAL, "proxy: cannot start its threads");
        }
    pthread_mutex_lock(&P.mu);
    P.started = 1;
    pthread_mutex_unlock(&P.mu);
    return 0;
}

void berth_proxy_stop(void)
{
    pthread_mutex_lock(&P.mu);
    P.stop = 1;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < P.nthreads; i++)
        pthread_join(P.threads[i], NULL);
    free(P.threads);
    P.threads = NULL;
    P.nthreads = 0;
    pthread_mutex_lock(&P.mu);
    P.started = 0;
    pthread_mutex_unlock(&P.mu);
}
