#include "registry/http/server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <h2o.h>
#include <openssl/crypto.h>

#include "auth/gate.h"
#include "auth/offload.h"
#include "auth/realm.h"
#include "auth/service.h"
#include "core/log.h"
#include "core/query.h"
#include "registry/api/api.h"
#include "registry/http/access_log.h"
#include "registry/http/edge_blobs.h"
#include "registry/http/edge_trust.h"
#include "registry/http/limits.h"
#include "registry/http/metrics.h"
#include "registry/service/isa.h"
#include "registry/service/proxy.h"

#define MAX_BODY (8u << 20) /* manifests (4 MiB) and API payloads; blob bodies never come here */

typedef struct loop_thread {
    h2o_context_t ctx;
    h2o_timeout_t stream_poll; /* proxied blobs streamed while they arrive look for new bytes this often */
    h2o_accept_ctx_t accept_ctx;
    h2o_multithread_receiver_t done;
    h2o_socket_t *listeners[BERTH_SERVER_LISTENERS_MAX];
    pthread_t tid;
    struct st_berth_server_t *server;
} loop_thread_t;

struct st_berth_server_t {
    h2o_globalconf_t config;
    berth_registry_t *reg;
    berth_workers_t *workers;
    berth_workers_t *auth_workers; /* password hashing and LDAP (auth/offload.h) */
    int auth_queue;
    int fds[BERTH_SERVER_LISTENERS_MAX], nfds, nloops; /* listening descriptors, owned */
    atomic_int stopping; /* written by the main thread, read by every loop thread: atomic, not volatile (TSan) */
    loop_thread_t *loops;
};

typedef struct job job_t;
typedef struct guard {
    job_t *job;
} guard_t;

/* Everything a worker needs, copied off the request: the worker never touches h2o memory. */
struct job {
    berth_work_t work;
    h2o_multithread_message_t msg;
    loop_thread_t *loop;
    h2o_req_t *req; /* loop thread only; NULL once the request is gone */
    guard_t *guard;
    berth_registry_t *reg;
    enum { JOB_V2, JOB_TOKEN, JOB_API } kind;
    berth_token_req_t token;
    berth_api_req_t api;
    char *authorization, *cookie, *csrf, *path, *origin, *fetch_site, *host;
    char remote[64];
    char who[BERTH_GATE_WHO_MAX];
    char isa_view[64]; /* /v2/_isa/<view>/…: the CPU level whose derived index manifests are answered with */
    berth_v2_req_t v2;
    berth_proxy_need_t proxy;     /* a proxy-cache pull that waits for the upstream first (v2.need points here) */
    berth_proxy_stream_t *stream; /* ... or reads its blob while it arrives */
    berth_scope_t need;           /* what the request needs; has_need 0 for the base endpoint */
    int has_need, gate_passed;
    uint64_t edge_epoch; /* berth_edge_decisions_epoch() before the request was decided */
    int on_auth_pool;    /* re-run there because it needed credential work */
    char method[16];
    char *query, *accept, *ctype, *body;
    berth_resp_t resp;
    struct timespec start;
};

static double ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return status >= 500 ? "Internal Server Error" : "OK";
    }
}

/* A header only the edge may set (edge_trust.h): its value, or NULL (*len 0) when absent or not from the edge */
static const char *edge_header(h2o_req_t *req, const char *name, size_t nlen, size_t *len)
{
    ssize_t t = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-berth-edge"), -1);
    ssize_t i = -1;
    *len = 0;
    if (t < 0 || !berth_edge_trusted(req->headers.entries[t].value.base, req->headers.entries[t].value.len) ||
        (i = h2o_find_header_by_str(&req->headers, name, nlen, -1)) < 0)
        return NULL;
    *len = req->headers.entries[i].value.len;
    return req->headers.entries[i].value.base;
}

static void send_resp(h2o_req_t *req, berth_resp_t *resp, berth_route_kind_t route, const struct timespec *t0)
{
    if (resp->status == 401) { /* the edge says how the client came: X-Forwarded-Proto, and its Host */
        size_t plen;
        const char *proto = edge_header(req, H2O_STRLIT("x-forwarded-proto"), &plen);
        berth_realm_for_client(resp, proto, plen, req->authority.base, req->authority.len);
    }
    req->res.status = resp->status;
    req->res.reason = reason(resp->status);
    for (size_t i = 0; i < resp->nhdrs; i++) {
        h2o_iovec_t v = h2o_strdup(&req->pool, resp->hdrs[i].value, SIZE_MAX);
        h2o_add_header_by_str(&req->pool, &req->res.headers, resp->hdrs[i].name, strlen(resp->hdrs[i].name), 1, NULL, v.base,
                              v.len);
    }
    if (resp->content_type != NULL) {
        h2o_iovec_t v = h2o_strdup(&req->pool, resp->content_type, SIZE_MAX);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, v.base, v.len);
    }
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("docker-distribution-api-version"), 0, NULL,
                          H2O_STRLIT("registry/2.0"));
    req->res.content_length = resp->len;
    char method[16];
    snprintf(method, sizeof(method), "%.*s", (int)req->method.len, req->method.base);
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    char *path = h2o_mem_alloc_pool(&req->pool, plen + 1);
    memcpy(path, req->path.base, plen);
    path[plen] = '\0';
    size_t rlen;
    const char *xri = edge_header(req, H2O_STRLIT("x-real-ip"), &rlen);
    char remote[64] = "-";
    if (xri != NULL)
        snprintf(remote, sizeof(remote), "%.*s", (int)rlen, xri);
    int is_head = strcmp(method, "HEAD") == 0;
    berth_metrics_request(route, method, resp->status, req->entity.len, is_head ? 0 : resp->len);
    berth_access_log(remote, method, path, resp->status, req->entity.len, is_head ? 0 : resp->len, ms_since(t0),
                     berth_route_label(route));
    h2o_send_inline(req, resp->body != NULL ? resp->body : "", resp->body != NULL ? resp->len : 0); /* a length alone: HEAD */
}

/* A blob by digest answered with its file: the edge serves this caller's next reads of it itself for a while */
static void keep_blob_decision(const job_t *j, const berth_resp_t *resp)
{
    if (j->kind == JOB_V2 && j->v2.route.id == BERTH_V2_BLOB_GET && resp->status == 200 &&
        berth_resp_get(resp, "x-accel-redirect") != NULL)
        berth_edge_decisions_keep(j->authorization, j->v2.route.name, berth_resp_get(resp, "docker-content-digest"), j->edge_epoch);
}

/* A manifest answered from the database or the cache: the edge answers this caller's next reads of it for a while */
static void keep_manifest_decision(const job_t *j, const berth_resp_t *resp)
{
    if (j->kind == JOB_V2 && j->v2.route.id == BERTH_V2_MANIFEST_GET && resp->status == 200 && resp->edge_keep &&
        resp->body != NULL && j->isa_view[0] == '\0' && strcmp(j->method, "GET") == 0)
        berth_edge_decisions_keep_manifest(j->authorization, j->v2.route.name, j->v2.route.ref,
                                           berth_resp_get(resp, "docker-content-digest"), resp->content_type, j->who, resp->body,
                                           resp->len, j->edge_epoch);
}

static void on_guard_dispose(void *p)
{
    guard_t *g = p;
    if (g->job != NULL)
        g->job->req = NULL;
}

static void job_free(job_t *j)
{
    if (j->stream != NULL) /* a proxied blob whose client left before its stream started: its file and fd go too */
        berth_proxy_stream_release(j->stream);
    berth_resp_dispose(&j->resp);
    free(j->query);
    free(j->accept);
    free(j->ctype);
    free(j->body);
    free(j->cookie);
    free(j->csrf);
    free(j->path);
    free(j->origin);
    free(j->fetch_site);
    free(j->host);
    if (j->authorization != NULL) {
        OPENSSL_cleanse(j->authorization, strlen(j->authorization));
        free(j->authorization);
    }
    free(j);
}

/*
 * A request that needs credential work moves to the auth workers and runs again from the start there; when their
 * queue is full it is shed with 503 and Retry-After, so a login storm never waits in front of other requests.
 */
static int move_to_auth_pool(job_t *j)
{
    struct st_berth_server_t *s = j->loop->server;
    berth_resp_dispose(&j->resp);
    berth_resp_init(&j->resp);
    j->on_auth_pool = 1;
    if (berth_workers_try_submit(s->auth_workers, &j->work, s->auth_queue) == 0)
        return 0;
    berth_err_t err;
    berth_err_set(&err, BERTH_OCI_UNAVAILABLE, "too many logins in progress; retry shortly");
    berth_resp_header(&j->resp, "retry-after", "1"); /* before the error, which adds its own otherwise */
    berth_resp_error(&j->resp, &err);
    berth_metrics_auth_shed();
    berth_log_warn("auth workers busy (%d queued): login shed", s->auth_queue);
    return -1;
}

static void run_job(berth_work_t *w);

/* On a proxy thread: the blob this request asked for is arriving; the loop streams it (on_jobs_done) */
static void on_stream(void *ctx, berth_proxy_stream_t *s)
{
    job_t *j = ctx;
    j->proxy.kind = BERTH_PROXY_NONE;
    j->stream = s;
    h2o_multithread_send_message(&j->loop->done, &j->msg);
}

/* On a proxy thread: the fetch a request waited for ended. Run it again on a worker, or answer the fetch's error. */
static void on_fetched(void *ctx, int rc, const berth_err_t *err)
{
    job_t *j = ctx;
    j->proxy.kind = BERTH_PROXY_NONE;
    if (rc == 0) {
        j->v2.proxy_done = 1;
        berth_workers_submit(j->loop->server->workers, &j->work);
        return;
    }
    berth_resp_dispose(&j->resp);
    berth_resp_init(&j->resp);
    berth_resp_error(&j->resp, err);
    h2o_multithread_send_message(&j->loop->done, &j->msg);
}

static void run_job(berth_work_t *w)
{
    job_t *j = H2O_STRUCT_FROM_MEMBER(job_t, work, w);
    j->proxy.kind = BERTH_PROXY_NONE;
    berth_offload_enter(j->on_auth_pool);
    if (j->kind == JOB_TOKEN)
        berth_authsvc_token(j->reg->auth, &j->token, &j->resp);
    else if (j->kind == JOB_API)
        berth_api_handle(j->reg, &j->api, &j->resp);
    else if (j->gate_passed ||
             berth_gate_check(j->reg->auth, j->authorization, j->authorization != NULL ? strlen(j->authorization) : 0,
                              j->has_need ? &j->need : NULL, j->remote, &j->resp, j->who) == BERTH_GATE_ALLOW) {
        if (j->isa_view[0] != '\0' && j->v2.route.kind == BERTH_ROUTE_MANIFEST)
            berth_isa_view(j->reg, j->isa_view, &j->v2, &j->resp);
        else if (j->isa_view[0] != '\0' || !berth_v2_cached(j->reg, &j->v2, &j->resp)) /* decided here, maybe cached */
            berth_v2_handle(j->reg, &j->v2, &j->resp);
    }
    if (berth_offload_leave() && move_to_auth_pool(j) == 0)
        return;
    if (j->proxy.kind != BERTH_PROXY_NONE) { /* the upstream first; the request runs again when it answered */
        j->gate_passed = 1;
        if (j->proxy.kind == BERTH_PROXY_BLOB && strcmp(j->method, "GET") == 0)
            berth_proxy_fetch_stream(&j->proxy, on_stream, on_fetched, j);
        else
            berth_proxy_fetch(&j->proxy, on_fetched, j);
        return;
    }
    h2o_multithread_send_message(&j->loop->done, &j->msg);
}

/*
 * Stream while storing: a proxied blob goes to the client that started its fetch as it lands in the store's
 * file. Reads are pread(2) of just-written pages (the page cache), STREAM_CHUNK at a time; with nothing new the
 * loop looks again after stream_poll. The last byte is held back until the fetch says the digest matched and the
 * blob is stored; on a mismatch the response is aborted, so the client never sees a body that looks complete.
 */
#define STREAM_CHUNK (256u << 10)

typedef struct {
    h2o_generator_t super;
    job_t *j;
    h2o_req_t *req;
    h2o_timeout_entry_t poll;
    int64_t sent;
    char *buf;
} blob_stream_t;

static void stream_end(blob_stream_t *bs)
{
    if (h2o_timeout_is_linked(&bs->poll))
        h2o_timeout_unlink(&bs->poll);
    job_free(bs->j); /* releases the stream */
    bs->j = NULL;
}

static void stream_pump(blob_stream_t *bs)
{
    int64_t have, total;
    int st = berth_proxy_stream_state(bs->j->stream, &have, &total);
    if (st < 0) {
        h2o_req_t *req = bs->req;
        stream_end(bs);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    int64_t limit = st == 1 ? have : have - 1;
    if (limit > bs->sent) {
        size_t n = limit - bs->sent < (int64_t)STREAM_CHUNK ? (size_t)(limit - bs->sent) : STREAM_CHUNK;
        ssize_t got = pread(berth_proxy_stream_fd(bs->j->stream), bs->buf, n, bs->sent);
        if (got > 0) {
            bs->sent += got;
            int final = st == 1 && bs->sent == have;
            h2o_iovec_t v = h2o_iovec_init(bs->buf, (size_t)got);
            h2o_req_t *req = bs->req;
            if (final)
                stream_end(bs);
            h2o_send(req, &v, 1, final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
            return;
        }
        if (got < 0) {
            berth_log_err("proxy stream of %s: read failed: %s", berth_proxy_stream_digest(bs->j->stream), strerror(errno));
            h2o_req_t *req = bs->req;
            stream_end(bs);
            h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
            return;
        }
    } else if (st == 1) {
        h2o_req_t *req = bs->req;
        stream_end(bs);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    h2o_timeout_link(bs->req->conn->ctx->loop, &bs->j->loop->stream_poll, &bs->poll);
}

static void on_stream_poll(h2o_timeout_entry_t *entry)
{
    stream_pump(H2O_STRUCT_FROM_MEMBER(blob_stream_t, poll, entry));
}

static void on_stream_proceed(h2o_generator_t *self, h2o_req_t *req)
{
    stream_pump((blob_stream_t *)self);
}

static void on_stream_stop(h2o_generator_t *self, h2o_req_t *req)
{
    blob_stream_t *bs = (blob_stream_t *)self;
    if (bs->j != NULL)
        stream_end(bs);
}

static void stream_start(job_t *j)
{
    h2o_req_t *req = j->req;
    blob_stream_t *bs = h2o_mem_alloc_pool(&req->pool, sizeof(*bs));
    memset(bs, 0, sizeof(*bs));
    bs->super.proceed = on_stream_proceed;
    bs->super.stop = on_stream_stop;
    bs->j = j;
    bs->req = req;
    bs->poll.cb = on_stream_poll;
    bs->buf = h2o_mem_alloc_pool(&req->pool, STREAM_CHUNK);
    int64_t have, total;
    berth_proxy_stream_state(j->stream, &have, &total);
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = total >= 0 ? (size_t)total : SIZE_MAX;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/octet-stream"));
    /* a copy in the request's pool: headers are sent by reference, and a blob already whole ends (and frees) its
     * stream in the first pump, before h2o writes them */
    h2o_iovec_t d = h2o_strdup(&req->pool, berth_proxy_stream_digest(j->stream), SIZE_MAX);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("docker-content-digest"), 0, NULL, d.base, d.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("docker-distribution-api-version"), 0, NULL,
                          H2O_STRLIT("registry/2.0"));
    /* the edge passes the bytes on as they come instead of buffering the response */
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
    berth_metrics_request(j->v2.route.kind, j->method, 200, 0, total > 0 ? (uint64_t)total : 0);
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    char *path = h2o_mem_alloc_pool(&req->pool, plen + 1);
    memcpy(path, req->path.base, plen);
    path[plen] = '\0';
    berth_access_log(j->remote, j->method, path, 200, 0, total > 0 ? (uint64_t)total : 0, ms_since(&j->start),
                     berth_route_label(j->v2.route.kind));
    h2o_start_response(req, &bs->super);
    stream_pump(bs);
}

static void on_jobs_done(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    /* the next node is read before this one is unlinked and freed (clang-analyzer cannot prove they differ) */
    for (h2o_linklist_t *node = messages->next, *next; node != messages; node = next) {
        next = node->next;
        h2o_linklist_unlink(node);
        job_t *j = H2O_STRUCT_FROM_MEMBER(job_t, msg.link, node);
        if (j->stream != NULL && j->req != NULL) {
            j->guard->job = NULL;
            stream_start(j); /* the job lives on with the response */
            continue;
        }
        if (j->req != NULL) {
            j->guard->job = NULL;
            keep_blob_decision(j, &j->resp);
            keep_manifest_decision(j, &j->resp);
            send_resp(j->req, &j->resp, j->v2.route.kind, &j->start);
        }
        job_free(j);
    }
}

/* The first value of a header h2o has no token for, or NULL */
static char *header_dup_str(h2o_req_t *req, const char *name, size_t name_len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, name_len, -1);
    return i >= 0 ? strndup(req->headers.entries[i].value.base, req->headers.entries[i].value.len) : NULL;
}

/* All values of a header joined with ", " (clients send Accept once per media type). */
static char *header_dup(h2o_req_t *req, const h2o_token_t *token, size_t *len_out)
{
    ssize_t i = h2o_find_header(&req->headers, token, -1);
    if (i < 0)
        return NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    for (int first = 1; i >= 0; i = h2o_find_header(&req->headers, token, i), first = 0) {
        h2o_iovec_t v = req->headers.entries[i].value;
        fprintf(f, "%s%.*s", first ? "" : ", ", (int)v.len, v.base);
    }
    fclose(f);
    if (len_out != NULL)
        *len_out = len;
    return out;
}

static void send_now(h2o_req_t *req, berth_resp_t *resp, berth_route_kind_t route)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    send_resp(req, resp, route, &t0);
    berth_resp_dispose(resp);
}

/* The spec's endpoint table allows only 404 on a manifest GET/HEAD: a reference that is neither a tag nor a
 * digest names no manifest (PUT and DELETE keep their 400). A bad repository name stays NAME_INVALID. */
static int manifest_read_of_bad_reference(const berth_route_t *r, const char *method, const berth_err_t *err)
{
    if (r->kind != BERTH_ROUTE_MANIFEST || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0))
        return 0;
    return err->oci == BERTH_OCI_TAG_INVALID || err->oci == BERTH_OCI_MANIFEST_INVALID || err->oci == BERTH_OCI_DIGEST_INVALID;
}

static void send_err(h2o_req_t *req, const berth_err_t *err, berth_route_kind_t route)
{
    berth_resp_t resp;
    berth_resp_init(&resp);
    berth_resp_error(&resp, err);
    send_now(req, &resp, route);
}

/* A job for a request that goes to a worker: who asked and how, copied off the request */
static job_t *job_new(h2o_req_t *req)
{
    job_t *j = calloc(1, sizeof(*j));
    size_t rlen;
    const char *xri = edge_header(req, H2O_STRLIT("x-real-ip"), &rlen);
    if (xri != NULL)
        snprintf(j->remote, sizeof(j->remote), "%.*s", (int)rlen, xri);
    snprintf(j->method, sizeof(j->method), "%.*s", (int)req->method.len, req->method.base);
    return j;
}

/* Hand the job to the workers; the answer comes back through the loop's queue (on_jobs_done) */
static int job_submit(loop_thread_t *lt, job_t *j, h2o_req_t *req)
{
    j->guard = h2o_mem_alloc_shared(&req->pool, sizeof(guard_t), on_guard_dispose);
    j->guard->job = j;
    j->work.run = run_job;
    berth_workers_submit(lt->server->workers, &j->work);
    return 0;
}

static int serve_metrics(loop_thread_t *lt, h2o_req_t *req)
{
    struct st_berth_server_t *s = lt->server;
    berth_resp_t resp;
    berth_resp_init(&resp);
    size_t len;
    char *text = berth_metrics_render(s->reg->db, s->reg->store, berth_workers_queued(s->workers),
                                      berth_workers_queued(s->auth_workers), &len);
    berth_resp_body(&resp, 200, text, len, "text/plain; version=0.0.4");
    send_now(req, &resp, BERTH_ROUTE_NONE);
    return 0;
}

static int serve_ping(loop_thread_t *lt, h2o_req_t *req)
{
    berth_resp_t resp;
    berth_resp_init(&resp);
    berth_resp_body(&resp, 200, strdup("Pong"), 4, "text/plain");
    send_now(req, &resp, BERTH_ROUTE_NONE);
    return 0;
}

/* The token service and the REST API (/api/v2.0/…, the web UI's /c/…): answered on a worker */
static int serve_rest(loop_thread_t *lt, h2o_req_t *req, int is_token)
{
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const char *path = req->path.base;
    if (req->entity.len > MAX_BODY) {
        berth_err_t err;
        berth_err_set(&err, BERTH_OCI_MANIFEST_TOO_BIG, "request body too large");
        send_err(req, &err, BERTH_ROUTE_NONE);
        return 0;
    }
    job_t *j = job_new(req);
    j->kind = is_token ? JOB_TOKEN : JOB_API;
    clock_gettime(CLOCK_MONOTONIC, &j->start);
    j->loop = lt;
    j->req = req;
    j->reg = lt->server->reg;
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at - 1 : 0;
    j->query = req->query_at != SIZE_MAX ? strndup(req->path.base + req->query_at + 1, qlen) : strdup("");
    if (req->entity.base != NULL && req->entity.len > 0) {
        j->body = malloc(req->entity.len + 1);
        memcpy(j->body, req->entity.base, req->entity.len);
        j->body[req->entity.len] = '\0';
    }
    size_t alen = 0;
    j->authorization = header_dup(req, H2O_TOKEN_AUTHORIZATION, &alen);
    if (is_token) {
        j->token = (berth_token_req_t){.query = j->query,
                                       .query_len = qlen,
                                       .authorization = j->authorization,
                                       .authorization_len = alen,
                                       .method = j->method,
                                       .body = j->body,
                                       .body_len = j->body != NULL ? req->entity.len : 0,
                                       .remote = j->remote};
    } else {
        j->path = strndup(path, plen);
        j->cookie = header_dup(req, H2O_TOKEN_COOKIE, NULL);
        j->csrf = header_dup_str(req, H2O_STRLIT("x-harbor-csrf-token"));
        j->origin = header_dup_str(req, H2O_STRLIT("origin"));
        j->fetch_site = header_dup_str(req, H2O_STRLIT("sec-fetch-site"));
        j->host = req->authority.base != NULL ? strndup(req->authority.base, req->authority.len) : NULL;
        size_t prlen;
        const char *proto = edge_header(req, H2O_STRLIT("x-forwarded-proto"), &prlen);
        int secure = proto != NULL && prlen == 5 && memcmp(proto, "https", 5) == 0;
        ssize_t ri = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-is-resource-name"), -1);
        int resource_name =
            ri >= 0 && req->headers.entries[ri].value.len == 4 && strncasecmp(req->headers.entries[ri].value.base, "true", 4) == 0;
        j->api = (berth_api_req_t){.method = j->method,
                                   .path = j->path,
                                   .path_len = plen,
                                   .query = j->query,
                                   .query_len = qlen,
                                   .body = j->body,
                                   .body_len = j->body != NULL ? req->entity.len : 0,
                                   .authorization = j->authorization,
                                   .cookie = j->cookie,
                                   .csrf = j->csrf,
                                   .remote = j->remote,
                                   .origin = j->origin,
                                   .fetch_site = j->fetch_site,
                                   .host = j->host,
                                   .secure = secure,
                                   .resource_name = resource_name};
    }
    return job_submit(lt, j, req);
}

static int serve_token(loop_thread_t *lt, h2o_req_t *req)
{
    return serve_rest(lt, req, 1);
}

static int serve_api(loop_thread_t *lt, h2o_req_t *req)
{
    return serve_rest(lt, req, 0);
}

/* /v2 (and, as the distribution spec answers them, every path no other surface claims: 404 in its format) */
static int serve_v2(loop_thread_t *lt, h2o_req_t *req)
{
    struct st_berth_server_t *s = lt->server;
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const char *path = req->path.base;
    berth_err_t err;
    berth_err_clear(&err);
    job_t *j = job_new(req);
    /* the ISA view: "/v2/_isa/<view>/<name>/…" is routed as "/v2/<name>/…" (no repository name starts with '_') */
    char *rewritten = NULL;
    if (plen > 9 && memcmp(path, "/v2/_isa/", 9) == 0) {
        const char *v = path + 9, *slash = memchr(v, '/', plen - 9);
        int is_get = strcmp(j->method, "GET") == 0 || strcmp(j->method, "HEAD") == 0;
        if (slash == NULL || (size_t)(slash - v) >= sizeof(j->isa_view) || slash == v || !is_get || s->reg->isa_view_disabled) {
            berth_err_set(&err, is_get ? BERTH_OCI_NAME_UNKNOWN : BERTH_OCI_UNSUPPORTED,
                          is_get ? "no such ISA view" : "ISA views are read-only paths");
            send_err(req, &err, BERTH_ROUTE_NONE);
            free(j);
            return 0;
        }
        snprintf(j->isa_view, sizeof(j->isa_view), "%.*s", (int)(slash - v), v);
        size_t rest = plen - (size_t)(slash - path);
        rewritten = malloc(rest + 4);
        memcpy(rewritten, "/v2", 3);
        memcpy(rewritten + 3, slash, rest);
        path = rewritten;
        plen = rest + 3;
    }
    int rc = berth_route_parse(&j->v2.route, path, plen, &err);
    free(rewritten);
    /* a method the route table has no row for is refused before the gate, as on the upload listener */
    if (rc != 0 || j->v2.route.kind == BERTH_ROUTE_UPLOAD || berth_route_select(&j->v2.route, j->method, &err) != 0) {
        if (rc == BERTH_ENOTFOUND || j->v2.route.kind == BERTH_ROUTE_UPLOAD)
            berth_err_set(&err, BERTH_OCI_NOT_FOUND, NULL);
        else if (manifest_read_of_bad_reference(&j->v2.route, j->method, &err))
            berth_err_set(&err, BERTH_OCI_MANIFEST_UNKNOWN, "no manifest has this reference");
        send_err(req, &err, j->v2.route.kind);
        free(j);
        return 0;
    }
    if (req->query_at != SIZE_MAX &&
        berth_query_check(req->path.base + req->query_at + 1, req->path.len - req->query_at - 1, SIZE_MAX) != 0) {
        /* the edge of every /v2 query parser: what PostgreSQL, JSON and logs see below is text */
        berth_err_set(&err, BERTH_OCI_PARAM_INVALID, "malformed query parameter (bad escape, NUL byte or not UTF-8)");
        send_err(req, &err, j->v2.route.kind);
        free(j);
        return 0;
    }
    if (req->entity.len > MAX_BODY) {
        berth_err_set(&err, BERTH_OCI_MANIFEST_TOO_BIG, NULL);
        send_err(req, &err, j->v2.route.kind);
        free(j);
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &j->start);
    j->loop = lt;
    j->req = req;
    j->reg = s->reg;
    j->v2.method = j->method;
    j->v2.who = j->who;
    j->v2.remote = j->remote;
    if (req->query_at != SIZE_MAX) {
        j->v2.query_len = req->path.len - req->query_at - 1;
        j->query = strndup(req->path.base + req->query_at + 1, j->v2.query_len);
        j->v2.query = j->query;
    }
    j->accept = header_dup(req, H2O_TOKEN_ACCEPT, &j->v2.accept_len);
    j->v2.accept = j->accept;
    j->v2.need = &j->proxy;
    j->ctype = header_dup(req, H2O_TOKEN_CONTENT_TYPE, NULL);
    j->v2.content_type = j->ctype;
    j->authorization = header_dup(req, H2O_TOKEN_AUTHORIZATION, NULL);
    j->edge_epoch = berth_edge_decisions_epoch(); /* before any answer is read: a forget after it voids the keep */
    j->has_need = berth_gate_required(&j->need, &j->v2.route);
    berth_resp_t cached;
    j->gate_passed = berth_gate_fast(j->authorization, j->authorization != NULL ? strlen(j->authorization) : 0,
                                     j->has_need ? &j->need : NULL, j->who) == BERTH_GATE_ALLOW;
    if (j->gate_passed && j->isa_view[0] == '\0' &&
        berth_v2_cached(s->reg, &j->v2, &cached)) { /* hot pull path: no worker hop, no SQL */
        keep_blob_decision(j, &cached);
        keep_manifest_decision(j, &cached);
        send_resp(req, &cached, j->v2.route.kind, &j->start);
        berth_resp_dispose(&cached);
        job_free(j);
        return 0;
    }
    if (req->entity.base != NULL && req->entity.len > 0) {
        j->body = malloc(req->entity.len);
        memcpy(j->body, req->entity.base, req->entity.len);
        j->v2.body = j->body;
        j->v2.body_len = req->entity.len;
    }
    return job_submit(lt, j, req);
}

/*
 * The surfaces, each registered with h2o as a path of its own. h2o picks a path by the *normalized* path
 * (percent-decoded, dot-segments resolved: findings P4) while every surface reads the raw one, so a surface
 * first checks that the raw path is its own, and otherwise the raw path decides through this same table (only
 * paths like "/v2/../api/…" differ). A path no surface claims goes to the /v2 parser, which answers it 404.
 */
typedef enum {
    RAW_EXACT,   /* the path itself */
    RAW_BELOW,   /* "<path>/" and at least one more byte */
    RAW_SEGMENT, /* the path, or below it: h2o's own rule */
} raw_match_t;

typedef struct {
    const char *path;
    raw_match_t match;
    int (*serve)(loop_thread_t *lt, h2o_req_t *req);
} surface_t;

static const surface_t surfaces[] = {
    {"/metrics", RAW_EXACT, serve_metrics},
    {"/api/v2.0/ping", RAW_EXACT, serve_ping},
    {"/service/token", RAW_EXACT, serve_token},
    {"/api/v2.0", RAW_BELOW, serve_api},
    {"/c", RAW_BELOW, serve_api}, /* the web UI's session endpoints (Harbor's /c/login) */
    {"/v2", RAW_SEGMENT, serve_v2},
};

typedef struct {
    h2o_handler_t super;
    const surface_t *surface; /* NULL for "/": whatever no surface claims */
} surface_handler_t;

static int raw_is(const surface_t *sf, const char *path, size_t plen)
{
    size_t len = strlen(sf->path);
    if (plen < len || memcmp(path, sf->path, len) != 0)
        return 0;
    switch (sf->match) {
    case RAW_EXACT: return plen == len;
    case RAW_BELOW: return plen > len + 1 && path[len] == '/';
    default: return plen == len || path[len] == '/';
    }
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    loop_thread_t *lt = H2O_STRUCT_FROM_MEMBER(loop_thread_t, ctx, req->conn->ctx);
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const surface_t *sf = ((surface_handler_t *)self)->surface;
    if (sf != NULL && raw_is(sf, req->path.base, plen))
        return sf->serve(lt, req);
    for (size_t i = 0; i < sizeof(surfaces) / sizeof(surfaces[0]); i++)
        if (raw_is(&surfaces[i], req->path.base, plen))
            return surfaces[i].serve(lt, req);
    return serve_v2(lt, req);
}

static void register_surface(h2o_hostconf_t *host, const char *path, const surface_t *sf)
{
    /* h2o takes the first registered path that matches, not the longest: register "/api/v2.0/ping" before
     * "/api/v2.0", and "/" last. A pathconf may move when the next one is registered: use it at once. */
    h2o_pathconf_t *pathconf = h2o_config_register_path(host, path, 0);
    surface_handler_t *h = (surface_handler_t *)h2o_create_handler(pathconf, sizeof(*h));
    h->super.on_req = on_req;
    h->surface = sf;
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    if (err != NULL)
        return;
    loop_thread_t *lt = listener->data;
    h2o_socket_t *sock;
    /* drain the backlog: nginx opens keep-alive upstream connections in bursts */
    for (int i = 0; i < 64 && (sock = h2o_evloop_socket_accept(listener)) != NULL; i++)
        h2o_accept(&lt->accept_ctx, sock);
}

static void *loop_main(void *arg)
{
    loop_thread_t *lt = arg;
    /* h2o keeps buffer prototypes and recycling allocators in thread-local storage: the context and every
     * socket of a loop must be created on that loop's own thread, or buffers cross threads (ASan caught it) */
    /* Every request in flight holds its connection's input buffer, which h2o starts at 8 KiB; a request's head
     * (the edge's are ~0.5 KiB) fits in the 4 KiB that h2o reserves per read anyway, and a larger one grows it.
     * A burst of 10,000 clients keeps thousands in flight at once: 8232 -> 4136 bytes each (docs/benchmarks.md).
     * The prototype is thread-local in libh2o (`extern __thread`): each loop sets its own copy, before it makes
     * a socket; set from the main thread it changed nothing. */
    h2o_socket_buffer_prototype._initial_buf.capacity = 4096;
    h2o_context_init(&lt->ctx, h2o_evloop_create(), &lt->server->config);
    h2o_timeout_init(lt->ctx.loop, &lt->stream_poll, 5);
    h2o_multithread_register_receiver(lt->ctx.queue, &lt->done, on_jobs_done);
    lt->accept_ctx.ctx = &lt->ctx;
    lt->accept_ctx.hosts = lt->server->config.hosts;
    for (int i = 0; i < lt->server->nfds; i++) { /* the Unix socket and its backup port (internal_listen.h) */
        lt->listeners[i] =
            h2o_evloop_socket_create(lt->ctx.loop, fcntl(lt->server->fds[i], F_DUPFD_CLOEXEC, 0), H2O_SOCKET_FLAG_DONT_READ);
        lt->listeners[i]->data = lt;
        h2o_socket_read_start(lt->listeners[i], on_accept);
    }
    while (!lt->server->stopping)
        h2o_evloop_run(lt->ctx.loop, 100); /* returns on EINTR too (findings P2): loop on a flag */
    return NULL;
}

int berth_server_start(berth_server_t **out, berth_registry_t *reg, berth_workers_t *workers, berth_workers_t *auth_workers,
                       int auth_queue, int nloops, const int *fds, int nfds)
{
    berth_server_t *s = calloc(1, sizeof(*s));
    s->reg = reg;
    s->workers = workers;
    s->auth_workers = auth_workers;
    s->auth_queue = auth_queue;
    h2o_config_init(&s->config);
    s->config.server_name = h2o_iovec_init(H2O_STRLIT("berth"));
    s->config.max_request_entity_size = MAX_BODY + 1;
    h2o_hostconf_t *host = h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    for (size_t i = 0; i < sizeof(surfaces) / sizeof(surfaces[0]); i++)
        register_surface(host, surfaces[i].path, &surfaces[i]);
    register_surface(host, "/", NULL);

    s->nfds = nfds < BERTH_SERVER_LISTENERS_MAX ? nfds : BERTH_SERVER_LISTENERS_MAX;
    memcpy(s->fds, fds, (size_t)s->nfds * sizeof(int));
    s->loops = calloc((size_t)nloops, sizeof(loop_thread_t));
    for (s->nloops = 0; s->nloops < nloops; s->nloops++) {
        loop_thread_t *lt = &s->loops[s->nloops];
        lt->server = s;
        int rc = pthread_create(&lt->tid, NULL, loop_main, lt);
        if (rc != 0) {
            berth_log_err("cannot start event loop thread %d of %d: %s", s->nloops + 1, nloops, strerror(rc));
            berth_server_stop(s); /* joins the s->nloops already running */
            return BERTH_ERROR;
        }
    }
    *out = s;
    return 0;
}

void berth_server_stop(berth_server_t *s)
{
    if (s == NULL)
        return;
    s->stopping = 1;
    for (int i = 0; i < s->nloops; i++)
        pthread_join(s->loops[i].tid, NULL);
    for (int i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    /* contexts and sockets die with the process; tearing h2o down piecemeal buys nothing at exit */
}
