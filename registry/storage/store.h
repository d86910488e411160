/*
 * Filesystem blob store. Bytes only, no metadata. On-disk tree under the storage root:
 *
 *   blobs/<alg>/<hex[0:2]>/<hex>   content-addressed, immutable, shared by all repositories
 *   uploads/<id>                   an upload session's bytes; its length is the session offset
 *
 * Uploads and blobs share one filesystem so a finished upload becomes a blob by rename(2): a blob path
 * only ever holds complete, verified content.
 */
#ifndef BERTH_STORAGE_STORE_H
#define BERTH_STORAGE_STORE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/digest.h"
#include "core/err.h"

typedef struct st_berth_store_t berth_store_t;

/** Create the tree if needed. */
int berth_store_open(berth_store_t **out, const char *root, berth_err_t *err);
void berth_store_close(berth_store_t *s);
const char *berth_store_root(const berth_store_t *s);

/** "<alg>/<ab>/<hex>" relative to blobs/ (for the edge's internal blob location). */
void berth_store_blob_relpath(const berth_digest_t *d, char *buf, size_t bufsz);
void berth_store_blob_path(const berth_store_t *s, const berth_digest_t *d, char *buf, size_t bufsz);

/**
 * Open an upload file for writing (creating it when `create`), locked exclusively for this writer.
 * *size_out receives its current length. BERTH_ECONFLICT when another request holds it,
 * BERTH_ENOTFOUND when it does not exist.
 */
int berth_store_upload_open(const berth_store_t *s, const char *id, int create, int *fd_out, int64_t *size_out, berth_err_t *err);
/** Open an upload file read-only (for re-hashing). */
int berth_store_upload_open_read(const berth_store_t *s, const char *id, int *fd_out);
/** Length of an upload file, or BERTH_ENOTFOUND. */
int berth_store_upload_size(const berth_store_t *s, const char *id, int64_t *size_out);
/**
 * Make a verified upload the blob `d`: berth_store_upload_sync, then berth_store_upload_place. `fd` stays open
 * and owned by the caller.
 */
int berth_store_upload_commit(const berth_store_t *s, const char *id, int fd, const berth_digest_t *d, berth_err_t *err);
/** Make an upload's bytes durable (fdatasync), before the blob-file lock is taken (sql/registry.h). */
int berth_store_upload_sync(const berth_store_t *s, const char *id, int fd, berth_err_t *err);
/** Rename a synced upload into place as blob `d` (or drop it when the blob is already stored), fsync the directory. */
int berth_store_upload_place(const berth_store_t *s, const char *id, const berth_digest_t *d, berth_err_t *err);

/**
 * Garbage collection: remove blob `d`'s file; a missing file is fine. The caller holds the digest's blob-file
 * lock and has seen that no blob row exists (registry/service/gc.c).
 */
int berth_store_blob_remove(const berth_store_t *s, const berth_digest_t *d, berth_err_t *err);
/** Called per stored blob file with its digest, size and age in seconds; nonzero stops the walk. */
typedef int (*berth_store_blob_fn)(const berth_digest_t *d, int64_t size, double age_seconds, void *cb_data);
/** Walk every blob file (for GC's orphan sweep); names that are not a digest filed in its place are skipped.
 * Returns 1 when cb stopped the walk, else 0. */
int berth_store_blob_each(const berth_store_t *s, berth_store_blob_fn cb, void *cb_data);
/**
 * Call cb(id, age_seconds, cb_data) for every upload file (for purging abandoned sessions). Returns the count.
 */
int berth_store_upload_each(const berth_store_t *s, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data);
/** Delete an upload file; missing is fine. */
void berth_store_upload_remove(const berth_store_t *s, const char *id);

/*
 * Free space. Below the reserve (storage.min_free_bytes; by default the smaller of 1 GiB and 2 % of the file
 * system) new uploads are refused up front, so pulls, deletions and metadata writes keep working and an
 * operator can free space through Berth itself.
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
/**
 * Turn a failed file operation into an error: ENOSPC and EDQUOT are STORAGE_FULL (507), anything else INTERNAL.
 * err->msg names the operation, the errno and the storage root's file system, for the log.
 */
int berth_store_io_error(const berth_store_t *s, const char *what, const char *id, int errnum, berth_err_t *err);
/** 1 for the errno values that mean "no space": the caller then releases what it held. */
int berth_store_errno_full(int errnum);

/** Write all of buf at the file's current position, retrying short writes. */
int berth_store_write_all(int fd, const void *buf, size_t len);

#endif
