/*
 * The blob store: bytes only, no metadata, behind one driver interface (a table of operations, store_driver.h)
 * with two drivers, `filesystem` (store_fs.c) and `s3` (store_s3.c). Nothing outside the drivers builds a
 * storage path or an object key; callers name blobs by digest and uploads by session id.
 *
 * Invariants both drivers keep: a blob is only ever stored whole and verified (an upload becomes a blob by an
 * atomic rename or by a copy from a staging object after its digest was checked), and an upload session's bytes
 * can be continued by any berthd sharing the store (its length is the session offset).
 */
#ifndef BERTH_STORAGE_STORE_H
#define BERTH_STORAGE_STORE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/digest.h"
#include "core/err.h"
#include "core/resp.h"
#include "registry/storage/s3.h"

typedef struct st_berth_store_t berth_store_t;
/** An upload session opened by one request for writing. */
typedef struct st_berth_store_upload_t berth_store_upload_t;
/** Receives bytes read from the store; non-zero stops the read. */
typedef int (*berth_store_sink_fn)(const char *data, size_t len, void *arg);

/** The filesystem driver on `root` (creates the tree if needed). */
int berth_store_open(berth_store_t **out, const char *root, berth_err_t *err);

typedef struct st_berth_store_s3_conf_t {
    berth_s3_conf_t s3;
    int64_t part_size; /* bytes per multipart part (storage.s3.part_size_mib, default 16 MiB; at least 5 MiB) */
    int redirect;      /* blob GETs answer 307 to a presigned URL instead of streaming through the edge */
    long presign_ttl;  /* seconds a presigned URL is valid (default 1200) */
    int edge_cache;    /* the edge keeps what it proxies (storage.s3.edge_cache_bytes > 0): its URLs live longer */
} berth_store_s3_conf_t;
/** The s3 driver: checks that the bucket answers to these credentials (err says which of the two is wrong). */
int berth_store_open_s3(berth_store_t **out, const berth_store_s3_conf_t *conf, berth_err_t *err);
void berth_store_close(berth_store_t *s);
/** "filesystem" or "s3" */
const char *berth_store_driver(const berth_store_t *s);

/* ---- blobs ---- */
/** Size of a stored blob, or BERTH_ENOTFOUND. */
int berth_store_blob_stat(berth_store_t *s, const berth_digest_t *d, int64_t *size_out, berth_err_t *err);
/** Bytes [off, off+len) of a blob (len -1: to the end) into sink. BERTH_ENOTFOUND when it is not stored. */
int berth_store_blob_read(berth_store_t *s, const berth_digest_t *d, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg,
                          berth_err_t *err);
/** Read a whole blob of at most `max` bytes into a NUL-terminated buffer (caller frees); NULL if missing or larger. */
char *berth_store_blob_slurp(berth_store_t *s, const berth_digest_t *d, size_t max, size_t *len_out);
/**
 * Garbage collection: remove blob `d`; missing is fine. The caller holds the digest's blob-file lock and has
 * seen that no blob row exists (registry/service/gc.c).
 */
int berth_store_blob_remove(berth_store_t *s, const berth_digest_t *d, berth_err_t *err);
/** Called per stored blob with its digest, size and age in seconds; nonzero stops the walk. */
typedef int (*berth_store_blob_fn)(const berth_digest_t *d, int64_t size, double age_seconds, void *cb_data);
/**
 * Walk every stored blob (GC's orphan sweep; paged on s3); names that are not a digest filed in its place are
 * skipped. Returns 1 when cb stopped the walk, else 0.
 */
int berth_store_blob_each(berth_store_t *s, berth_store_blob_fn cb, void *cb_data);
/**
 * Make `resp` a blob answer without its bytes: headers that let the edge send them (X-Accel-Redirect to the
 * file, or to a presigned URL it proxies), or a 307 to a presigned URL (s3 with redirect). `method` is the
 * client's (GET or HEAD); `size` the blob's, as the database knows it (s3 answers a blob of no bytes from it without
 * the gateway). The caller adds Docker-Content-Digest. Pure computation: safe on the event loop.
 */
void berth_store_blob_serve(berth_store_t *s, const berth_digest_t *d, int64_t size, const char *method, berth_resp_t *resp);

/* ---- upload sessions ---- */
/**
 * Open session `id` for appending (creating it when `create`), exclusively for this request where the driver
 * can lock. *size_out receives its length. BERTH_ECONFLICT when another request holds it, BERTH_ENOTFOUND
 * (BLOB_UPLOAD_UNKNOWN) when it does not exist.
 */
int berth_store_upload_open(berth_store_t *s, const char *id, int create, berth_store_upload_t **out, int64_t *size_out,
                            berth_err_t *err);
/** Append. On failure err is set (STORAGE_FULL for no space). */
int berth_store_upload_write(berth_store_upload_t *u, const void *buf, size_t len, berth_err_t *err);
/**
 * Make the session's bytes durable and checked, ready to become blob `d` (filesystem: fdatasync; s3: the last
 * part, the multipart upload completed to a staging object). `verified`: the caller hashed every byte and found
 * `d`; otherwise the driver reads the bytes back and refuses a mismatch (BERTH_EDIGEST, DIGEST_INVALID).
 * Nothing is visible yet: berth_store_upload_place does that, inside the blob's commit transaction under its
 * blob-file lock (sql/registry.h), so GC never removes bytes an upload is about to own.
 */
int berth_store_upload_prepare(berth_store_upload_t *u, const berth_digest_t *d, int verified, berth_err_t *err);
/** Put prepared session `id` in place as blob `d` (or drop it when the blob is already stored); the session is gone. */
int berth_store_upload_place(berth_store_t *s, const char *id, const berth_digest_t *d, berth_err_t *err);
/** prepare + place, for callers without a blob row to commit (tests). */
int berth_store_upload_commit(berth_store_upload_t *u, const berth_digest_t *d, int verified, berth_err_t *err);
/** End of this request's bytes: keep them for the next request on any instance, release the session. */
int berth_store_upload_close(berth_store_upload_t *u, berth_err_t *err);
/** Re-read the first `len` bytes of a session (to rebuild a hash). BERTH_EINVAL when the driver cannot (s3). */
int berth_store_upload_read(berth_store_t *s, const char *id, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err);
/**
 * A descriptor that reads session `id`'s bytes as they are written and keeps reading them once the session
 * became a blob (the proxy cache serves a blob while it arrives). Filesystem only: BERTH_EINVAL where the
 * bytes are not local files (s3), and the reader then waits for the blob.
 */
int berth_store_upload_open_read(berth_store_t *s, const char *id, int *fd_out);
/** Length of a session, or BERTH_ENOTFOUND. */
int berth_store_upload_size(berth_store_t *s, const char *id, int64_t *size_out);
/** Call cb(id, age_seconds, cb_data) for every session's bytes (for purging abandoned sessions). Returns the count. */
int berth_store_upload_each(berth_store_t *s, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data);
/** Delete a session's bytes (an S3 multipart upload is aborted); missing is fine. */
void berth_store_upload_remove(berth_store_t *s, const char *id);

/*
 * Sessions whose state the caller keeps (s3): the driver's state of a session (multipart upload id, part ETags,
 * offset, where the tail bytes are) is a short text the caller stores in PostgreSQL with the session row and
 * hands back on the next request, on any instance. The caller serialises writers (a row lock); the driver then
 * trusts the caller's running hash. The filesystem driver keeps no such state: there the calls below fall back
 * to the ones above.
 */
/** 1 when the caller keeps session state (berth_store_upload_resume / _save), 0 when the bytes are all there is. */
int berth_store_upload_keeps_state(const berth_store_t *s);
/** Open session `id` for appending from its saved `state` ("" or NULL: new and empty). */
int berth_store_upload_resume(berth_store_t *s, const char *id, const char *state, berth_store_upload_t **out, int64_t *size_out,
                              berth_err_t *err);
/** Make what u holds durable and return the state that resumes it in *state_out (malloc'd; NULL for drivers that keep none). */
int berth_store_upload_save(berth_store_upload_t *u, char **state_out, berth_err_t *err);
/** The length of a session from its saved state. */
int berth_store_upload_state_size(berth_store_t *s, const char *state, int64_t *size_out);
/** Delete a session's bytes knowing its saved state (aborts its multipart upload); NULL state: berth_store_upload_remove. */
void berth_store_upload_discard(berth_store_t *s, const char *id, const char *state);
/**
 * Write `len` bytes as session `id` and prepare them as blob `d` (checked here), for blobs Berth makes itself;
 * the caller then commits the row with berth_store_upload_place (or removes the session on failure).
 */
int berth_store_put_upload(berth_store_t *s, const char *id, const void *data, size_t len, const berth_digest_t *d,
                           berth_err_t *err);

/* ---- where the edge reads bytes (main.c writes the nginx configuration from it) ---- */
typedef struct st_berth_store_edge_t {
    const char *dir;      /* filesystem: the directory X-Accel-Redirect paths are relative to */
    const char *upstream; /* s3: "scheme://host:port" presigned URLs are proxied to */
    const char *host;     /* s3: the Host header the signatures cover */
} berth_store_edge_t;
void berth_store_edge(const berth_store_t *s, berth_store_edge_t *out);
/** The internal edge locations of blob bytes ("/_berth/blobs/") and of a HEAD (s3), set once at start. */
void berth_store_set_edge_prefix(berth_store_t *s, const char *prefix, const char *head_prefix);

/*
 * Free space (filesystem). Below the reserve (storage.min_free_bytes; by default the smaller of 1 GiB and 2 % of
 * the file system) new uploads are refused up front, so pulls, deletions and metadata writes keep working and an
 * operator can free space through Berth itself. An object store reports no figures (BERTH_ERROR) and never refuses.
 */
typedef struct st_berth_store_space_t {
    int64_t free_bytes; /* available to berthd (f_bavail) */
    int64_t total_bytes;
    int64_t reserve_bytes;
    int below_reserve;
} berth_store_space_t;

/** Set the reserve in bytes; -1 = the default, 0 = none. */
void berth_store_set_reserve(berth_store_t *s, int64_t min_free);
/** Measure now (statvfs). Logs once when the reserve is reached and once when it clears. */
int berth_store_space(berth_store_t *s, berth_store_space_t *out);
/** 0, or STORAGE_FULL (507) when free space is below the reserve: for requests that are about to write bytes. */
int berth_store_check_reserve(berth_store_t *s, berth_err_t *err);
/** 0 when the store answers now (a file system whose space can be read; the bucket for an object store), for
 *  GET /health and so readiness probes; otherwise err says why. Blocks up to the store's timeout: workers only. */
int berth_store_reachable(berth_store_t *s, berth_err_t *err);

#endif
