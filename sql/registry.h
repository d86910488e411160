/* Registry metadata: one function per state change, each its own transaction. */
#ifndef BERTH_SQL_REGISTRY_H
#define BERTH_SQL_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/manifest.h"
#include "sql/db.h"

typedef struct st_berth_db_manifest_t {
    char digest[BERTH_DIGEST_MAX];
    char *media_type;
    char *content;
    size_t len;
} berth_db_manifest_t;
void berth_db_manifest_dispose(berth_db_manifest_t *m);

typedef struct st_berth_strlist_t {
    char **items;
    size_t n;
} berth_strlist_t;
void berth_strlist_dispose(berth_strlist_t *l);

typedef struct st_berth_db_referrer_t {
    char digest[BERTH_DIGEST_MAX];
    char *media_type, *artifact_type, *annotations; /* annotations: JSON text or NULL */
    int64_t size;
} berth_db_referrer_t;
void berth_db_referrers_free(berth_db_referrer_t *r, size_t n);

/** 1 if the repository exists, 0 if not, <0 on error. */
int berth_db_repo_exists(berth_dbconn_t *c, const char *repo, berth_err_t *err);
/** Size of a blob linked into `repo`; BERTH_ENOTFOUND (BLOB_UNKNOWN) otherwise. */
int berth_db_blob_stat(berth_dbconn_t *c, const char *repo, const char *digest, int64_t *size_out, berth_err_t *err);
/**
 * Record a blob, link it into `repo` (created with its project if needed) and end `upload_id` (may be NULL) in
 * one transaction. `place` (may be NULL when the file is known to be in place) moves the verified bytes into
 * storage first, under the digest's blob-file lock, which the transaction holds until the row is committed: so
 * GC, which unlinks a file only under that lock and only when the row is gone, never removes a file an upload
 * is about to own (README "Garbage collection").
 */
/** Puts the blob's file in place (0 or a negative code with err set); called inside berth_db_blob_commit's transaction. */
typedef int (*berth_db_place_fn)(void *arg, berth_err_t *err);
int berth_db_blob_commit(berth_dbconn_t *c, const char *repo, const char *digest, int64_t size, const char *upload_id,
                         berth_db_place_fn place, void *place_arg, berth_err_t *err);
/** Cross-repository mount: link a blob that `from` holds into `repo`. BERTH_ENOTFOUND if `from` lacks it. */
int berth_db_blob_mount(berth_dbconn_t *c, const char *repo, const char *from, const char *digest, int64_t *size_out,
                        berth_err_t *err);
/** Remove a blob's link from `repo`; BERTH_ENOTFOUND (BLOB_UNKNOWN) if it was not linked. */
int berth_db_blob_unlink(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err);

/** What a manifest PUT did to its project's storage quota (sql/migrations/0110_quotas.sql says what counts). */
typedef struct st_berth_db_quota_t {
    int64_t hard;   /* the limit in bytes; -1 unlimited */
    int64_t before; /* usage before the push */
    int64_t after;  /* usage after it (refused: what it would have been) */
    int refused;    /* 1: DENIED because the push adds bytes and `after` exceeds `hard`; nothing was stored */
} berth_db_quota_t;

/** Default limit of projects that projects.auto_create makes (quota.default_storage_limit; -1 unlimited). Set at start. */
void berth_db_quota_default(int64_t limit);

/**
 * Run by berth_db_manifest_put inside its transaction once the quota allowed the push, before the commit, with the
 * figures: whatever it writes on `c` commits with the push or not at all (the QUOTA_WARNING webhook event). Nonzero
 * (err set) rolls the push back.
 */
typedef int (*berth_db_push_hook_fn)(berth_dbconn_t *c, const berth_db_quota_t *q, void *arg, berth_err_t *err);

/**
 * Store a validated manifest and (if `tag` is not NULL) point the tag at it; `isa_rows` (JSON, may be NULL) are
 * the index's ISA variant rows, stored in the same transaction. Every referenced blob must be
 * linked into `repo` and every child manifest stored there, else MANIFEST_BLOB_UNKNOWN. The project's quota row is
 * locked for the transaction, so concurrent pushes into one project are charged one after the other; a push
 * that adds bytes beyond the limit is DENIED (403) with the limit, the usage and what it would add. `quota`
 * (may be NULL) receives the figures, also on that refusal. `hook` (may be NULL) runs with `hook_arg` before the
 * commit.
 */
int berth_db_manifest_put(berth_dbconn_t *c, const char *repo, const char *tag, const berth_digest_t *digest,
                          const berth_manifest_info_t *info, const char *body, size_t len, const char *isa_rows,
                          berth_db_quota_t *quota, berth_db_push_hook_fn hook, void *hook_arg, berth_err_t *err);
/** Fetch by tag or digest; MANIFEST_UNKNOWN / NAME_UNKNOWN when absent. Caller disposes `out`. */
int berth_db_manifest_get(berth_dbconn_t *c, const char *repo, const char *ref, int ref_is_digest, berth_db_manifest_t *out,
                          berth_err_t *err);
/** Delete a manifest by digest (its tags go with it). */
int berth_db_manifest_delete(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err);
/** Delete one tag, keeping the manifest. */
int berth_db_tag_delete(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err);
/** Delete a repository and everything in it; NOT_FOUND when absent. */
int berth_db_repo_delete(berth_dbconn_t *c, const char *repo, berth_err_t *err);
/* The three deletes above and the tag of berth_db_manifest_put are refused with BERTH_OCI_IMMUTABLE (412, DENIED on
 * /v2) when an immutable tag rule protects a tag they would move or remove (sql/immutable.h). */
/** Up to `n` tags after `last` (may be NULL), in byte order. NAME_UNKNOWN for a missing repository. */
int berth_db_tags_list(berth_dbconn_t *c, const char *repo, const char *last, long n, berth_strlist_t *out, berth_err_t *err);
/** Up to `n` repository names after `last`. */
int berth_db_catalog(berth_dbconn_t *c, const char *last, long n, berth_strlist_t *out, berth_err_t *err);
/** Manifests in `repo` whose subject is `digest`, optionally filtered by artifact type. */
int berth_db_referrers(berth_dbconn_t *c, const char *repo, const char *digest, const char *artifact_type,
                       berth_db_referrer_t **out, size_t *n_out, berth_err_t *err);

/** projects.auto_create: whether a push may create its project (off: NAME_UNKNOWN). Call once at start. */
void berth_db_projects_auto_create(int on);
/** 0 when a push into `repo` may proceed: the repository or its project exists (or projects are auto-created);
 *  NAME_UNKNOWN otherwise. Uploads ask before reading a body byte. */
int berth_db_project_check(berth_dbconn_t *c, const char *repo, berth_err_t *err);

int berth_db_upload_create(berth_dbconn_t *c, const char *id, const char *repo, berth_err_t *err);
/** BLOB_UPLOAD_UNKNOWN unless `id` is a live session of `repo`. */
int berth_db_upload_check(berth_dbconn_t *c, const char *id, const char *repo, berth_err_t *err);
int berth_db_upload_touch(berth_dbconn_t *c, const char *id, berth_err_t *err);
int berth_db_upload_delete(berth_dbconn_t *c, const char *id, berth_err_t *err);
/** Delete sessions idle for more than `max_age_s` seconds; their ids go to *out, their driver states ("" when none)
 *  to *states, in the same order (caller disposes both). */
int berth_db_upload_expire(berth_dbconn_t *c, long max_age_s, berth_strlist_t *out, berth_strlist_t *states, berth_err_t *err);
/**
 * Inside a transaction on c: lock session `id` of `repo` for this request (NOWAIT: BERTH_ECONFLICT if another
 * request holds it) and read its driver state and saved sha256 state ("" when none). Strings are the caller's.
 */
int berth_db_upload_lock(berth_dbconn_t *c, const char *id, const char *repo, char **state, char **hash_state, berth_err_t *err);
/** Store a locked session's driver state and hash state (NULL or "": none) */
int berth_db_upload_save(berth_dbconn_t *c, const char *id, const char *state, const char *hash_state, berth_err_t *err);
/** The driver state of session `id` of `repo` as last committed, without locking it ("" when none). */
int berth_db_upload_state(berth_dbconn_t *c, const char *id, const char *repo, char **state, berth_err_t *err);
/** 1 if `id` is a live session, 0 if not, <0 on error. */
int berth_db_upload_exists(berth_dbconn_t *c, const char *id, berth_err_t *err);

#endif
