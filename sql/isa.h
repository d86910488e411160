/* The ISA metadata: a multi-ISA index's variant rows, derived view indexes, scanner verdicts. */
#ifndef BERTH_SQL_ISA_H
#define BERTH_SQL_ISA_H

#include <stddef.h>

#include "core/digest.h"
#include "sql/db.h"

/** The ISA policy of a project ("off", "warn", "strict", with "+scan" when resolution requires a scan pass). */
int berth_db_isa_policy(berth_dbconn_t *c, const char *project, char *out, size_t outsz, berth_err_t *err);
/**
 * The ISA variant rows (JSON array, with scan verdicts) of the manifest `ref` (tag or digest) names; its digest
 * and media type too. BERTH_ENOTFOUND (MANIFEST_UNKNOWN) when there is no such manifest.
 */
int berth_db_isa_variants(berth_dbconn_t *c, const char *repo, const char *ref, char digest[BERTH_DIGEST_MAX], char **rows_json,
                          char **media_type, berth_err_t *err);
/** Store a derived ISA view index of `source_digest` (idempotent). */
int berth_db_isa_view_put(berth_dbconn_t *c, const char *repo, const char *digest, const char *source_digest, const char *body,
                          size_t len, berth_err_t *err);
/** A stored ISA view index by digest; BERTH_ENOTFOUND when absent. */
int berth_db_isa_view_get(berth_dbconn_t *c, const char *repo, const char *digest, char **body, size_t *len, berth_err_t *err);
/**
 * Record a scanner verdict for a variant manifest of `repo` under one declaration (level and comma-joined features,
 * exactly as its isa_variants rows spell them), replacing an earlier verdict for the same declaration only; the
 * project's ISA_SCAN_COMPLETED webhook event (verdict in event_data.isa_scan) is queued in the same transaction.
 */
int berth_db_isa_scan_put(berth_dbconn_t *c, const char *repo, const char *digest, const char *declared,
                          const char *declared_features, const char *status, const char *max_level, const char *report,
                          berth_err_t *err);
/** Up to `limit` variant entries without a verdict, as JSON rows {repository, digest, level, features} (malloc'd). */
/**
 * Claim the scan of one declaration across instances (a session advisory lock on c, released with
 * berth_db_isa_unclaim or with c's connection): 1 when this berthd scans it, 0 when another is scanning it,
 * <0 on error.
 */
int berth_db_isa_claim(berth_dbconn_t *c, const char *digest, const char *level, const char *features, berth_err_t *err);
void berth_db_isa_unclaim(berth_dbconn_t *c, const char *digest, const char *level, const char *features);
int berth_db_isa_unscanned(berth_dbconn_t *c, int limit, char **rows_json, berth_err_t *err);

#endif
