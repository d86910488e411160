#include "registry/service/upload.h"

#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "auth/gate.h"
#include "core/digest.h"
#include "core/log.h"
#include "core/query.h"
#include "core/range.h"
#include "registry/service/events.h"
#include "registry/service/upload_limits.h"
#include "sql/registry.h"

typedef enum { OP_MONOLITHIC, OP_PATCH, OP_PUT } op_t;

struct st_berth_upload_t {
    berth_registry_t *reg;
    op_t op;
    char repo[BERTH_NAME_MAX + 1];
    char id[40];
    berth_digest_t want;     /* PUT / monolithic POST */
    berth_store_upload_t *w; /* the session's bytes, open for this request */
    int64_t offset;          /* file length when the request started */
    int64_t written;
    int64_t expect; /* bytes announced by Content-Length / Content-Range, -1 unknown */
    int finished;
    int released;       /* out of space: the session's bytes are gone and the session ends (the client restarts) */
    ZSTD_DStream *zstd; /* Content-Encoding: zstd (replication between Berth sites) */
    char *zbuf;
    int zdone;          /* the last frame ended */
    berth_hash_t *hash; /* sha256 of the session's first offset+written bytes; NULL: the store checks at commit */
    berth_err_t err;    /* first failure */
    int limited;        /* holds a slot of upload_limits.c for principal and address */
    berth_dbconn_t *lc; /* drivers whose session state the row keeps (s3): a transaction holding the row locked */
    int refused;        /* the answer is `refusal`, given once the body has been read and dropped */
    berth_resp_t refusal;
    char principal[BERTH_GATE_WHO_MAX], address[64];
};

/*
 * Running hash states by session, so a chunked upload is hashed once as it streams. A state is valid only for
 * the exact file length it was saved at; after a restart (or on another berthd) the file is re-hashed instead.
 */
typedef struct hash_entry {
    char id[40];
    int64_t offset;
    berth_hash_t *hash;
    struct hash_entry *next;
} hash_entry_t;
static pthread_mutex_t hash_mu = PTHREAD_MUTEX_INITIALIZER;
static hash_entry_t *hash_cache;
static long hash_states; /* entries in hash_cache, for /metrics */
static long active;

long berth_upload_active(void)
{
    return __atomic_load_n(&active, __ATOMIC_RELAXED);
}

static berth_hash_t *hash_take(const char *id, int64_t offset)
{
    berth_hash_t *h = NULL;
    pthread_mutex_lock(&hash_mu);
    for (hash_entry_t **pp = &hash_cache; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, id) == 0) {
            hash_entry_t *e = *pp;
            *pp = e->next;
            hash_states--;
            if (e->offset == offset)
                h = e->hash;
            else
                berth_hash_free(e->hash);
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&hash_mu);
    return h;
}

static void hash_put(const char *id, int64_t offset, berth_hash_t *h)
{
    hash_entry_t *e = calloc(1, sizeof(*e));
    snprintf(e->id, sizeof(e->id), "%s", id);
    e->offset = offset;
    e->hash = h;
    pthread_mutex_lock(&hash_mu);
    e->next = hash_cache;
    hash_cache = e;
    hash_states++;
    pthread_mutex_unlock(&hash_mu);
}

void berth_upload_forget(const char *id)
{
    berth_hash_free(hash_take(id, -1));
}

long berth_upload_hash_states(void)
{
    pthread_mutex_lock(&hash_mu);
    long n = hash_states;
    pthread_mutex_unlock(&hash_mu);
    return n;
}

void berth_upload_hash_ids(berth_strlist_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&hash_mu);
    out->items = calloc((size_t)hash_states + 1, sizeof(char *));
    for (hash_entry_t *e = hash_cache; e != NULL; e = e->next)
        out->items[out->n++] = strdup(e->id);
    pthread_mutex_unlock(&hash_mu);
}

static int hash_sink(const char *data, size_t len, void *arg)
{
    berth_hash_update(arg, data, len);
    return 0;
}

/*
 * Hash the first `len` bytes of a session into *out. 0 with *out NULL when the driver cannot re-read a running
 * session (s3): the bytes are then checked when they are committed.
 */
static int rehash(berth_store_t *store, const char *id, berth_digest_alg_t alg, int64_t len, berth_hash_t **out, berth_err_t *err)
{
    *out = berth_hash_new(alg);
    int rc = berth_store_upload_read(store, id, len, hash_sink, *out, err);
    if (rc != 0) {
        berth_hash_free(*out);
        *out = NULL;
    }
    if (rc == BERTH_EINVAL)
        return 0;
    if (rc == BERTH_ENOTFOUND)
        berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
    return rc;
}

static void new_id(char out[40])
{
    unsigned char r[16];
    if (RAND_bytes(r, sizeof(r)) != 1)
        abort();
    r[6] = (r[6] & 0x0f) | 0x40; /* UUID v4 */
    r[8] = (r[8] & 0x3f) | 0x80;
    snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5],
             r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

static void session_headers(berth_resp_t *resp, const char *repo, const char *id, int64_t size)
{
    berth_resp_header(resp, "location", "/v2/%s/blobs/uploads/%s", repo, id);
    berth_resp_header(resp, "range", "0-%lld", (long long)(size > 0 ? size - 1 : 0));
    berth_resp_header(resp, "docker-upload-uuid", "%s", id);
}

/*
 * Sessions whose state the row keeps (berth_store_upload_keeps_state: s3). A PATCH or PUT holds the row locked
 * in a transaction on its own connection from its first byte to its answer (NOWAIT: a second writer, on any
 * berthd, gets 416), and commits the driver's state and the running sha256 state with the answer; a berthd
 * that dies rolls back, and the session is where its last answer said.
 */
static void lock_end(berth_upload_t *u)
{
    if (u->lc != NULL)
        berth_db_release(u->reg->db, u->lc); /* rolls back what was not committed */
    u->lc = NULL;
}

static int lock_save(berth_upload_t *u, berth_err_t *err)
{
    char *state = NULL, hs[BERTH_HASH_SAVED_MAX] = "";
    int rc = berth_store_upload_save(u->w, &state, err);
    if (rc == 0 && u->hash != NULL && berth_hash_save(u->hash, hs, sizeof(hs)) != 0)
        hs[0] = '\0';
    if (rc == 0)
        rc = berth_db_upload_save(u->lc, u->id, state != NULL ? state : "", hs, err);
    if (rc == 0)
        rc = berth_db_commit(u->lc, err);
    free(state);
    lock_end(u);
    return rc;
}

/* The length of a session as its row last said (the Range of a refused request) */
static int64_t committed_size(berth_registry_t *reg, berth_dbconn_t *c, const char *id, const char *repo)
{
    char *state = NULL;
    int64_t size = 0;
    if (berth_db_upload_state(c, id, repo, &state, NULL) != 0 || berth_store_upload_state_size(reg->store, state, &size) != 0)
        size = 0;
    free(state);
    return size;
}

static int lock_open(berth_upload_t *u, berth_dbconn_t *c, berth_resp_t *resp, berth_err_t *err)
{
    char *state = NULL, *hs = NULL;
    int rc;
    if ((u->lc = berth_db_acquire(u->reg->db, err)) == NULL)
        return err->code;
    if ((rc = berth_db_begin(u->lc, err)) == 0 && (rc = berth_db_upload_lock(u->lc, u->id, u->repo, &state, &hs, err)) == 0 &&
        (rc = berth_store_upload_resume(u->reg->store, u->id, state, &u->w, &u->offset, err)) == 0) {
        u->hash = hs[0] != '\0' ? berth_hash_load(hs) : u->offset == 0 ? berth_hash_new(BERTH_DIGEST_SHA256) : NULL;
        if (u->hash == NULL) /* the bytes are then read back and checked at commit */
            berth_log_warn("upload %s: no saved hash state at offset %lld", u->id, (long long)u->offset);
    }
    if (rc == BERTH_ECONFLICT) {
        berth_err_set(err, BERTH_OCI_RANGE_INVALID, "upload is in use by another request");
        session_headers(resp, u->repo, u->id, committed_size(u->reg, c, u->id, u->repo));
    }
    free(state);
    free(hs);
    return rc;
}

static void fail(berth_resp_t *resp, berth_err_t *err)
{
    if (berth_err_status(err->oci) >= 500)
        berth_log_err("upload: %s", err->msg);
    berth_resp_error(resp, err);
}

/*
 * The request lets go of its session. s3 (the row keeps the state): what arrived is committed when nothing failed
 * (a client that went away keeps it), else the row stays as the last answer said; the running hash goes, the row
 * holds its own. File system: the hash is kept for what reached the file, then the file's lock goes with its
 * descriptor.
 */
static void let_go(berth_upload_t *u)
{
    if (u->lc != NULL && u->w != NULL && u->err.code == 0 && !u->released)
        lock_save(u, NULL);
    lock_end(u);
    if (u->hash != NULL && u->op != OP_MONOLITHIC && !u->released && !berth_store_upload_keeps_state(u->reg->store))
        hash_put(u->id, u->offset + u->written, u->hash); /* also after an abort: these bytes are in the file */
    else
        berth_hash_free(u->hash);
    u->hash = NULL;
    berth_store_upload_close(u->w, NULL);
    u->w = NULL;
}

/* An error answer: the session is let go before the client can see it, or a client quick to send its next
 * request finds the session busy (416) */
static void fail_session(berth_upload_t *u, berth_resp_t *resp)
{
    let_go(u);
    fail(resp, &u->err);
}

/* digest= from the query, required for PUT and monolithic POST */
static int query_digest(const berth_upload_req_t *rq, berth_digest_t *out, int *present, berth_err_t *err)
{
    char v[BERTH_DIGEST_MAX + 8];
    *present = 0;
    long n = rq->query != NULL ? berth_query_get(rq->query, rq->query_len, "digest", v, sizeof(v)) : -1;
    if (n == -1)
        return 0;
    *present = 1;
    if (n < 0)
        return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "digest parameter is malformed");
    return berth_digest_parse(out, v, (size_t)n, err);
}

/* The repository a POST ?mount=&from= reads (0), or -1 when the request is no mount from a valid name */
static int mount_source(const berth_upload_req_t *rq, char from[BERTH_NAME_MAX + 1])
{
    char v[BERTH_DIGEST_MAX + 8];
    if (rq->query == NULL || berth_query_get(rq->query, rq->query_len, "mount", v, sizeof(v)) < 0 ||
        berth_query_get(rq->query, rq->query_len, "digest", v, sizeof(v)) >= 0)
        return -1;
    long fl = berth_query_get(rq->query, rq->query_len, "from", from, BERTH_NAME_MAX + 1);
    return fl >= 0 && berth_ref_name_valid(from, (size_t)fl) ? 0 : -1;
}

/* A blob committed into `repo` (upload or mount): announce it (events.h) */
static void emit_blob_push(const char *repo, const char *digest, int64_t size, const char *who, const char *remote)
{
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_BLOB_PUSH,
                                      .surface = BERTH_EVENT_V2,
                                      .repo = repo,
                                      .digest = digest,
                                      .size = size,
                                      .principal = who,
                                      .remote = remote});
}

/* POST ?mount=&from= (the gate has checked pull on `from`): link the blob and answer 201, or return 1 to fall
 * back to a new session */
static int try_mount(berth_registry_t *reg, berth_dbconn_t *c, const berth_upload_req_t *rq, const char *who, berth_resp_t *resp,
                     berth_err_t *err)
{
    char mount[BERTH_DIGEST_MAX + 8], from[BERTH_NAME_MAX + 1];
    if (rq->query == NULL || berth_query_get(rq->query, rq->query_len, "mount", mount, sizeof(mount)) < 0)
        return 1;
    berth_digest_t d;
    if (berth_digest_parse(&d, mount, strlen(mount), err) != 0)
        return err->code;
    if (mount_source(rq, from) != 0)
        return 1; /* the spec allows a mount without from; we then start a normal upload */
    int64_t size;
    int rc = berth_db_blob_mount(c, rq->route->name, from, d.str, &size, err);
    if (rc == BERTH_ENOTFOUND) {
        berth_err_clear(err);
        return 1;
    }
    if (rc != 0)
        return rc;
    emit_blob_push(rq->route->name, d.str, size, who, rq->remote);
    berth_resp_header(resp, "location", "/v2/%s/blobs/%s", rq->route->name, d.str);
    berth_resp_header(resp, "docker-content-digest", "%s", d.str);
    berth_resp_body(resp, 201, NULL, 0, NULL);
    return 0;
}

/* A request's state, holding an upload slot already taken for `who` and rq->remote. */
static berth_upload_t *alloc_state(berth_registry_t *reg, op_t op, const berth_upload_req_t *rq, const char *id, const char *who)
{
    berth_upload_t *u = calloc(1, sizeof(*u));
    u->limited = 1;
    snprintf(u->principal, sizeof(u->principal), "%s", who);
    snprintf(u->address, sizeof(u->address), "%s", rq->remote != NULL ? rq->remote : "");
    u->reg = reg;
    u->op = op;
    u->expect = rq->content_length;
    snprintf(u->repo, sizeof(u->repo), "%s", rq->route->name);
    snprintf(u->id, sizeof(u->id), "%s", id);
    __atomic_add_fetch(&active, 1, __ATOMIC_RELAXED);
    return u;
}

/*
 * State for a request that streams a body, or NULL with err set (429 + Retry-After) when its caller already
 * streams its share: checked before the first body byte, so a refused caller holds no listener thread.
 */
static berth_upload_t *new_state(berth_registry_t *reg, op_t op, const berth_upload_req_t *rq, const char *id, const char *who,
                                 berth_err_t *err)
{
    const char *address = rq->remote != NULL ? rq->remote : "";
    if (berth_upload_limits_acquire(who, address) != 0) {
        berth_log_info("upload refused (429): %s from %s is at its share of concurrent uploads", who[0] != '\0' ? who : "anonymous",
                       address[0] != '\0' ? address : "an unknown address");
        berth_err_set(err, BERTH_OCI_TOOMANYREQUESTS, "too many concurrent uploads; retry later");
        return NULL;
    }
    return alloc_state(reg, op, rq, id, who);
}

/*
 * `resp` refuses a request of a caller the gate let push: when a body follows, a state that reads and drops it and
 * then gives that answer (see berth_upload_begin). It streams under an upload slot like any body: `held`'s, or one
 * taken for `who`; without a slot (the caller is at its share), NULL, and the answer goes out at once.
 */
static berth_upload_t *refusal(berth_registry_t *reg, const berth_upload_req_t *rq, const char *who, berth_resp_t *resp,
                               berth_upload_t *held)
{
    if (!rq->body)
        return NULL;
    if (held != NULL && held->limited)
        held->limited = 0; /* the slot passes to the refusal */
    else if (berth_upload_limits_acquire(who, rq->remote != NULL ? rq->remote : "") != 0)
        return NULL;
    berth_upload_t *u = alloc_state(reg, OP_PATCH, rq, "", who); /* names no session: it only reads */
    u->refused = 1;
    u->refusal = *resp;
    berth_resp_init(resp);
    return u;
}

berth_upload_t *berth_upload_begin(berth_registry_t *reg, const berth_upload_req_t *rq, berth_resp_t *resp)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_resp_init(resp);
    const char *m = rq->method;
    const char *id = rq->route->ref;
    berth_upload_t *u = NULL;
    int rc = 0;

    int is_post = strcmp(m, "POST") == 0, is_patch = strcmp(m, "PATCH") == 0, is_put = strcmp(m, "PUT") == 0;
    int is_get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0, is_delete = strcmp(m, "DELETE") == 0;
    if ((is_post && id[0] != '\0') || (!is_post && id[0] == '\0') || !(is_post || is_patch || is_put || is_get || is_delete)) {
        berth_err_set(&err, BERTH_OCI_METHOD, NULL);
        fail(resp, &err);
        return NULL;
    }
    /* the gate runs before a single body byte is read: a refused push costs no bandwidth. A mount also reads
     * `from`; as Distribution does, both scopes are asked for in the first challenge, and the answer does not
     * depend on what `from` holds */
    berth_scope_t need[2];
    size_t nneed = 1;
    berth_gate_required(&need[0], rq->route);
    if (is_post && mount_source(rq, need[1].name) == 0 && strcmp(need[1].name, rq->route->name) != 0) {
        snprintf(need[1].type, sizeof(need[1].type), "repository");
        need[1].actions = BERTH_ACTION_PULL;
        nneed = 2;
    }
    berth_resp_dispose(resp);
    char who[BERTH_GATE_WHO_MAX] = "";
    if (berth_gate_check_all(reg->auth, rq->authorization, rq->authorization != NULL ? strlen(rq->authorization) : 0, need, nneed,
                             rq->remote, resp, who) != BERTH_GATE_ALLOW)
        return NULL; /* at once: a caller who may not push here never holds a listener thread */
    berth_resp_init(resp);
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL) {
        fail(resp, &err);
        return NULL;
    }
    if (is_post) {
        berth_digest_t want;
        int has_digest;
        if ((rc = query_digest(rq, &want, &has_digest, &err)) != 0 || (rc = berth_db_project_check(c, rq->route->name, &err)) != 0)
            goto Fail;
        if (!has_digest && (rc = try_mount(reg, c, rq, who, resp, &err)) <= 0) {
            if (rc < 0)
                goto Fail;
            goto Done; /* mounted */
        }
        /* below the free-space reserve no new upload starts; a mount above needs no space, so it still works */
        if ((rc = berth_store_check_reserve(reg->store, &err)) != 0)
            goto Fail;
        char nid[40];
        new_id(nid);
        if (has_digest) {
            if ((u = new_state(reg, OP_MONOLITHIC, rq, nid, who, &err)) == NULL) {
                goto Fail;
            }
            u->want = want;
        }
        int64_t size;
        berth_store_upload_t *w = NULL;
        if (u == NULL && berth_store_upload_keeps_state(reg->store))
            goto Row; /* an empty session is a row without state */
        if ((rc = berth_store_upload_open(reg->store, nid, 1, &w, &size, &err)) != 0)
            goto Fail;
        if (u != NULL) {
            u->w = w;
            u->hash = berth_hash_new(want.alg);
            goto Done;
        }
        if ((rc = berth_store_upload_close(w, &err)) != 0) {
            berth_store_upload_remove(reg->store, nid);
            goto Fail;
        }
    Row:
        if ((rc = berth_db_upload_create(c, nid, rq->route->name, &err)) != 0) {
            berth_store_upload_remove(reg->store, nid);
            goto Fail;
        }
        session_headers(resp, rq->route->name, nid, 0);
        berth_resp_body(resp, 202, NULL, 0, NULL);
        goto Done;
    }

    if ((rc = berth_db_upload_check(c, id, rq->route->name, &err)) != 0)
        goto Fail;
    if (is_delete) {
        char *state = NULL, *hs = NULL;
        if (berth_store_upload_keeps_state(reg->store)) { /* what it names goes with it; not while a request writes */
            if ((rc = berth_db_begin(c, &err)) != 0 ||
                (rc = berth_db_upload_lock(c, id, rq->route->name, &state, &hs, &err)) == BERTH_ECONFLICT)
                berth_err_set(&err, BERTH_OCI_RANGE_INVALID, "upload is in use by another request");
            if (rc == 0 && (rc = berth_db_upload_delete(c, id, &err)) == 0)
                rc = berth_db_commit(c, &err);
        } else {
            rc = berth_db_upload_delete(c, id, &err);
        }
        free(hs);
        if (rc != 0) {
            free(state);
            goto Fail;
        }
        berth_store_upload_discard(reg->store, id, state);
        free(state);
        berth_upload_forget(id);
        berth_resp_body(resp, 204, NULL, 0, NULL);
        goto Done;
    }
    if (is_get) {
        int64_t size;
        char *state = NULL;
        if (berth_store_upload_keeps_state(reg->store)) {
            rc = berth_db_upload_state(c, id, rq->route->name, &state, &err);
            if (rc == 0 && berth_store_upload_state_size(reg->store, state, &size) != 0)
                rc = berth_err_set(&err, BERTH_OCI_INTERNAL, "the state of upload %s is damaged", id);
            free(state);
            if (rc != 0)
                goto Fail;
        } else if (berth_store_upload_size(reg->store, id, &size) != 0) {
            berth_err_set(&err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
            goto Fail;
        }
        session_headers(resp, rq->route->name, id, size);
        berth_resp_body(resp, 204, NULL, 0, NULL);
        goto Done;
    }

    /* PATCH or PUT: append to the session */
    if ((u = new_state(reg, is_patch ? OP_PATCH : OP_PUT, rq, id, who, &err)) == NULL) {
        goto Fail;
    }
    if (rq->content_length != 0 && (rc = berth_store_check_reserve(reg->store, &err)) != 0) {
        /* the client restarts the blob: what this session holds is released now, not by the janitor in 24 h */
        u->released = 1;
        berth_store_upload_remove(reg->store, id);
        goto Fail;
    }
    if (is_put) {
        int has_digest;
        if ((rc = query_digest(rq, &u->want, &has_digest, &err)) != 0)
            goto Fail;
        if (!has_digest) {
            berth_err_set(&err, BERTH_OCI_DIGEST_INVALID, "digest parameter is required");
            goto Fail;
        }
    }
    if (berth_store_upload_keeps_state(reg->store)) {
        if ((rc = lock_open(u, c, resp, &err)) != 0)
            goto Fail;
    } else if ((rc = berth_store_upload_open(reg->store, id, 0, &u->w, &u->offset, &err)) != 0) {
        int64_t size; /* another request writes: what the file holds now, as a GET says (was 0-0, outside review) */
        if (rc == BERTH_ECONFLICT)
            session_headers(resp, rq->route->name, id, berth_store_upload_size(reg->store, id, &size) == 0 ? size : 0);
        goto Fail;
    }
    int zstd = rq->content_encoding != NULL && strcmp(rq->content_encoding, "zstd") == 0;
    if (rq->content_encoding != NULL && !zstd && strcmp(rq->content_encoding, "identity") != 0) {
        berth_err_set(&err, BERTH_OCI_ENCODING, "Content-Encoding %s is not supported (zstd is)", rq->content_encoding);
        goto Fail;
    }
    if (zstd) { /* the body is compressed: sizes are checked on the decoded bytes */
        u->zstd = ZSTD_createDStream();
        u->zbuf = malloc(ZSTD_DStreamOutSize());
        ZSTD_initDStream(u->zstd);
        u->expect = -1;
    }
    if (rq->content_range != NULL && (is_patch || rq->content_length != 0)) {
        uint64_t start, end;
        if (berth_range_parse(rq->content_range, strlen(rq->content_range), &start, &end) != 0 || start != (uint64_t)u->offset ||
            (!zstd && rq->content_length >= 0 && (uint64_t)rq->content_length != end - start + 1)) {
            berth_err_set(&err, BERTH_OCI_RANGE_INVALID, "Content-Range must continue at offset %lld", (long long)u->offset);
            session_headers(resp, rq->route->name, id, u->offset);
            goto Fail;
        }
        if (zstd)
            u->expect = (int64_t)(end - start + 1);
    }
    if (u->lc != NULL) /* the row is ours: touched in its transaction (another connection would wait for it) */
        goto Done;
    if ((rc = berth_db_upload_touch(c, id, &err)) != 0)
        goto Fail;
    u->hash = hash_take(id, u->offset);
    if (u->hash == NULL && (rc = rehash(reg->store, id, BERTH_DIGEST_SHA256, u->offset, &u->hash, &err)) != 0)
        goto Fail;
Done:
    berth_db_release(reg->db, c);
    return u;
Fail:
    berth_db_release(reg->db, c);
    berth_resp_error(resp, &err); /* keeps headers already set: a 416 carries Range */
    if (berth_err_status(err.oci) >= 500)
        berth_log_err("upload %s %s: %s", m, rq->route->name, err.msg);
    /* a caller at its share is told at once (the edge may say 503 in the 429's place for a big body: both mean
     * retry later); it would otherwise hold yet another thread */
    berth_upload_t *r = err.oci == BERTH_OCI_TOOMANYREQUESTS ? NULL : refusal(reg, rq, who, resp, u);
    berth_upload_free(u);
    return r;
}

static void write_plain(berth_upload_t *u, const char *data, size_t len);

/* The session's bytes go: closed first, so a driver that keeps state on close (s3) does not write it back */
static void drop_bytes(berth_upload_t *u)
{
    char *state = NULL;
    if (u->lc != NULL && u->w != NULL) /* names the multipart upload to abort */
        berth_store_upload_save(u->w, &state, NULL);
    berth_store_upload_close(u->w, NULL);
    u->w = NULL;
    berth_store_upload_discard(u->reg->store, u->id, state);
    free(state);
}

/*
 * Out of space: give back what this session holds at once (the filesystem driver has truncated the file, so the
 * space returns even while a reader holds it open; then it goes). Every other push needs that space, and the
 * client restarts the blob anyway. The session row goes in berth_upload_free.
 */
static void release(berth_upload_t *u)
{
    if (u->released)
        return;
    u->released = 1;
    drop_bytes(u);
    berth_log_warn("upload %s of %s released after running out of space (%lld bytes freed)", u->id, u->repo,
                   (long long)(u->offset + u->written));
}

void berth_upload_write(berth_upload_t *u, const char *data, size_t len)
{
    if (u->refused)
        return;
    if (u->err.code != 0 || u->zstd == NULL)
        return write_plain(u, data, len);
    ZSTD_inBuffer in = {.src = data, .size = len, .pos = 0};
    while (in.pos < in.size && u->err.code == 0) {
        ZSTD_outBuffer out = {.dst = u->zbuf, .size = ZSTD_DStreamOutSize(), .pos = 0};
        size_t r = ZSTD_decompressStream(u->zstd, &out, &in);
        if (ZSTD_isError(r)) {
            berth_err_set(&u->err, BERTH_OCI_BLOB_UPLOAD_INVALID, "zstd body: %s", ZSTD_getErrorName(r));
            return;
        }
        u->zdone = r == 0;
        write_plain(u, u->zbuf, out.pos);
    }
}

static void write_plain(berth_upload_t *u, const char *data, size_t len)
{
    if (u->err.code != 0)
        return;
    if (berth_store_upload_write(u->w, data, len, &u->err) != 0) {
        if (u->err.oci == BERTH_OCI_STORAGE_FULL)
            release(u);
        return;
    }
    if (u->hash != NULL)
        berth_hash_update(u->hash, data, len);
    u->written += (int64_t)len;
}

int berth_upload_place(void *arg, berth_err_t *err)
{
    const berth_upload_place_t *p = arg;
    return berth_store_upload_place(p->store, p->id, p->digest, err);
}

static void finish_blob(berth_upload_t *u, berth_resp_t *resp)
{
    berth_err_t *err = &u->err;
    berth_digest_t got;
    int64_t size = u->offset + u->written;
    /* streamed as sha256; a sha512 upload, or one whose running hash is not here (s3, another berthd), is
     * checked by the store as it commits */
    int verified = u->hash != NULL && u->want.alg == BERTH_DIGEST_SHA256;
    if (verified) {
        berth_hash_peek(u->hash, &got);
        if (!berth_digest_equal(&got, &u->want)) {
            berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "content digest %s does not match %s", got.str, u->want.str);
            goto Drop;
        }
    }
    int crc = berth_store_upload_prepare(u->w, &u->want, verified, err);
    if (crc == BERTH_EDIGEST)
        goto Drop;
    if (crc != 0) {
        if (err->oci == BERTH_OCI_STORAGE_FULL)
            release(u);
        goto Fail;
    }
    /* the row says "staged" (no more bytes) and is unlocked before the commit below deletes it */
    if (u->lc != NULL && lock_save(u, err) != 0)
        goto Fail;
    berth_dbconn_t *c = berth_db_acquire(u->reg->db, err);
    if (c == NULL)
        goto Fail;
    berth_upload_place_t place = {.store = u->reg->store, .id = u->id, .digest = &u->want};
    int rc = berth_db_blob_commit(c, u->repo, u->want.str, size, u->op == OP_PUT ? u->id : NULL, berth_upload_place, &place, err);
    berth_db_release(u->reg->db, c);
    if (rc != 0) {
        if (err->oci == BERTH_OCI_STORAGE_FULL)
            release(u);
        goto Fail; /* a placed file without its row is an orphan: GC removes it after its window */
    }
    emit_blob_push(u->repo, u->want.str, size, u->principal, u->address);
    berth_resp_header(resp, "location", "/v2/%s/blobs/%s", u->repo, u->want.str);
    berth_resp_header(resp, "docker-content-digest", "%s", u->want.str);
    berth_resp_body(resp, 201, NULL, 0, NULL);
    berth_log_debug("blob %s@%s committed (%lld bytes)", u->repo, u->want.str, (long long)size);
    return;
Drop:
    /* a wrong digest ends the session: nothing of it is kept */
    drop_bytes(u);
    berth_hash_free(u->hash);
    u->hash = NULL;
    if (u->lc != NULL) { /* delete the row we hold locked */
        if (berth_db_upload_delete(u->lc, u->id, NULL) == 0)
            berth_db_commit(u->lc, NULL);
        lock_end(u);
    } else if (u->op == OP_PUT) {
        berth_dbconn_t *dc = berth_db_acquire(u->reg->db, NULL);
        if (dc != NULL) {
            berth_db_upload_delete(dc, u->id, NULL);
            berth_db_release(u->reg->db, dc);
        }
    }
Fail:
    if (u->op == OP_MONOLITHIC)
        drop_bytes(u);
    fail_session(u, resp);
}

static void finish(berth_upload_t *u, berth_resp_t *resp);

/* The caller's upload slot goes with the answer's being ready, not after it is sent: a client that sends its
 * next request at once must not find its own share still full (429) */
void berth_upload_finish(berth_upload_t *u, berth_resp_t *resp)
{
    finish(u, resp);
    if (u->limited)
        berth_upload_limits_release(u->principal, u->address);
    u->limited = 0;
}

static void finish(berth_upload_t *u, berth_resp_t *resp)
{
    berth_resp_init(resp);
    u->finished = 1;
    __atomic_sub_fetch(&active, 1, __ATOMIC_RELAXED); /* the body is complete: no longer streaming */
    if (u->refused) {
        berth_resp_dispose(resp);
        *resp = u->refusal;
        u->refused = 0;
        return;
    }
    if (u->err.code == 0 && u->zstd != NULL && !u->zdone && u->written > 0)
        berth_err_set(&u->err, BERTH_OCI_BLOB_UPLOAD_INVALID, "zstd body ends inside a frame");
    if (u->err.code == 0 && u->expect >= 0 && u->written != u->expect)
        berth_err_set(&u->err, BERTH_OCI_SIZE_INVALID, "received %lld of %lld bytes", (long long)u->written, (long long)u->expect);
    if (u->err.code != 0) {
        if (u->op == OP_MONOLITHIC)
            drop_bytes(u);
        fail_session(u, resp);
        return;
    }
    if (u->op == OP_PATCH) {
        /* the bytes are kept for the next request (s3: the tail and the session state are written now) and the
         * hash state and the lock handed on before the client can see the answer: its next PATCH may arrive on
         * another connection while this request is still being torn down */
        int db = u->lc != NULL;
        if (db && lock_save(u, &u->err) != 0) {
            fail_session(u, resp);
            return;
        }
        if (u->hash != NULL && !db) /* before the file's lock goes with its descriptor */
            hash_put(u->id, u->offset + u->written, u->hash);
        else
            berth_hash_free(u->hash); /* db: saved with the row */
        u->hash = NULL;
        berth_store_upload_t *w = u->w;
        u->w = NULL;
        if (berth_store_upload_close(w, &u->err) != 0) {
            fail_session(u, resp);
            return;
        }
        session_headers(resp, u->repo, u->id, u->offset + u->written);
        berth_resp_body(resp, 202, NULL, 0, NULL);
    } else {
        finish_blob(u, resp);
        berth_hash_free(u->hash); /* committed (a failure has kept it for a retry in fail_session) */
        u->hash = NULL;
    }
    berth_store_upload_close(u->w, NULL);
    u->w = NULL;
}

void berth_upload_free(berth_upload_t *u)
{
    if (u == NULL)
        return;
    if (u->released && u->op != OP_MONOLITHIC) { /* the session ended with its bytes: nothing to resume */
        berth_hash_free(u->hash);
        u->hash = NULL;
        berth_hash_free(hash_take(u->id, -1));
        berth_dbconn_t *c = berth_db_acquire(u->reg->db, NULL);
        if (c != NULL) {
            berth_db_upload_delete(c, u->id, NULL);
            berth_db_release(u->reg->db, c);
        }
    }
    let_go(u); /* after an abort (the client went away) what arrived is kept for a retry */
    ZSTD_freeDStream(u->zstd);
    free(u->zbuf);
    /* a monolithic upload has no session to resume: a truncated one leaves nothing behind */
    if (u->op == OP_MONOLITHIC && !u->finished)
        drop_bytes(u);
    if (!u->finished)
        __atomic_sub_fetch(&active, 1, __ATOMIC_RELAXED);
    if (u->refused)
        berth_resp_dispose(&u->refusal);
    if (u->limited)
        berth_upload_limits_release(u->principal, u->address);
    free(u);
}
