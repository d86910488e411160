/*
 * Blob uploads as a stream: begin (headers only, before any body byte is read), write (each piece as it
 * arrives: appended and hashed), finish (the answer). Blocking; runs on the upload server's threads.
 */
#ifndef BERTH_SERVICE_UPLOAD_H
#define BERTH_SERVICE_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "registry/service/registry.h"
#include "sql/registry.h"

typedef struct st_berth_upload_t berth_upload_t;

typedef struct st_berth_upload_req_t {
    const char *method;
    const berth_route_t *route; /* kind BERTH_ROUTE_UPLOAD */
    const char *query;
    size_t query_len;
    const char *content_range;    /* may be NULL */
    int64_t content_length;       /* -1 when unknown (chunked) */
    const char *authorization;    /* header value or NULL */
    const char *content_encoding; /* "zstd": the body is compressed; ranges and digests are of the decoded bytes */
    const char *remote;           /* client address (the edge's X-Real-IP) or NULL: counted by upload_limits.c */
    int body;                     /* a body follows (Content-Length > 0, or chunked) without waiting for an answer (no Expect) */
} berth_upload_req_t;

/**
 * Start handling a request. Returns an upload state that wants the body, or NULL when `resp` already holds the
 * complete answer (errors, mounts, status queries, session creation) and the body must not be read.
 * A request the gate let through but refused with a body (an unknown or busy session, a bad range, a full disk)
 * is a state too, while the caller's upload share has room: its body is read and dropped and berth_upload_finish
 * gives the refusal. Answered before the body and closed, the connection is reset under the edge, which is still
 * sending, and nginx answers 502 (our 503) in its place. The gate's own refusals (401, 403) and a caller at its
 * share (429, or any refusal with no slot left) still go at once, holding no listener thread: past what the
 * kernel's socket buffers take in, the edge may then say 503 (Retry-After) in their place.
 */
berth_upload_t *berth_upload_begin(berth_registry_t *reg, const berth_upload_req_t *req, berth_resp_t *resp);
/** Feed body bytes. Errors are remembered and reported by finish; the rest of the body is then discarded. */
void berth_upload_write(berth_upload_t *u, const char *data, size_t len);
/** The whole body arrived: verify, commit and fill the answer. The session (its lock) and the caller's upload
 * slot are let go before it returns, so a client's next request, sent as soon as it reads the answer, finds
 * both free. */
void berth_upload_finish(berth_upload_t *u, berth_resp_t *resp);
/** Release the state; after an abort (no finish) the bytes already written stay in the session. */
void berth_upload_free(berth_upload_t *u);
/** What berth_upload_place puts where: upload `id`'s synced bytes become blob `digest` (all borrowed). */
typedef struct st_berth_upload_place_t {
    berth_store_t *store;
    const char *id;
    const berth_digest_t *digest;
} berth_upload_place_t;
/** A berth_db_place_fn (sql/registry.h): berth_store_upload_place inside the blob's commit transaction. */
int berth_upload_place(void *arg, berth_err_t *err);

/** Number of requests currently streaming a body (for /metrics). */
long berth_upload_active(void);
/** Drop the in-memory hash state of session `id` (purged or cancelled); nothing if there is none. */
void berth_upload_forget(const char *id);
/** Number of sessions whose running hash is held in memory (for /metrics). */
long berth_upload_hash_states(void);
/** The ids of those sessions, copied into *out (caller disposes with berth_strlist_dispose). */
void berth_upload_hash_ids(berth_strlist_t *out);

#endif
