/* The ISA tables' SQL: variant rows of multi-ISA indexes, derived view indexes, scanner verdicts (registry/isa/). */
#include "sql/isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/db_internal.h"

const berth_db__stmt_t berth_db__isa_stmts[BERTH_SQL__COUNT] = {
    /* run by berth_db_manifest_put (sql/registry.c), in the transaction that stores the index */
    BERTH_DB__STMT(
        BERTH_SQL_ISA_INSERT,
        "INSERT INTO isa_variants (manifest_id, position, digest, os, architecture, variant, level, features, target, priority) "
        "SELECT $1, x.position, x.digest, x.os, x.architecture, x.variant, x.level, x.features, x.target, x.priority "
        "FROM json_to_recordset($2::json) AS x(position int, digest text, os text, architecture text, variant text, level text, "
        "features text, target text, priority int) ON CONFLICT DO NOTHING",
        2),
    /* the policy of the project a repository belongs to (or would be created in) */
    BERTH_DB__STMT(BERTH_SQL_ISA_POLICY,
                   "SELECT coalesce((SELECT isa_policy || CASE WHEN isa_require_scan_pass THEN '+scan' ELSE '' END FROM projects "
                   "WHERE name = $1), 'warn')",
                   1),
    /* the variant rows of the index a tag or digest names, with scan verdicts, as JSON rows */
    BERTH_DB__STMT(
        BERTH_SQL_ISA_VARIANTS,
        "SELECT m.digest, coalesce((SELECT json_agg(json_build_object('position', v.position, 'digest', v.digest, 'os', v.os, "
        "'architecture', v.architecture, 'variant', v.variant, 'level', v.level, 'features', v.features, 'target', v.target, "
        "'priority', v.priority, 'scan_status', coalesce(s.status, ''), 'scan_max_level', s.max_level, "
        /* the first files with findings (function, instruction, ISA set) for the UI's variant table */
        "'scan_files', jsonb_path_query_array(s.report, '$.files[0 to 9]')) ORDER BY v.position) "
        "FROM isa_variants v LEFT JOIN isa_scans s ON " ISA_SCAN_OF_ENTRY " WHERE v.manifest_id = m.id), '[]')::text, m.media_type "
        "FROM repositories r JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1 AND (m.digest = $2 OR m.id = "
        "(SELECT t.manifest_id FROM tags t WHERE t.repository_id = r.id AND t.name = $2))",
        2),
    BERTH_DB__STMT(
        BERTH_SQL_ISA_VIEW_PUT,
        "INSERT INTO isa_views (repository_id, digest, source_manifest_id, content) SELECT r.id, $2, m.id, $4 FROM repositories r "
        "JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1 AND m.digest = $3 ON CONFLICT DO NOTHING",
        4),
    BERTH_DB__STMT(
        BERTH_SQL_ISA_SCAN_PUT,
        "INSERT INTO isa_scans (digest, declared_level, declared_features, status, max_level, report, scanned_at) "
        "VALUES ($1, $2, $3, $4, $5, $6::jsonb, now()) ON CONFLICT (digest, declared_level, declared_features) DO UPDATE SET "
        "status = EXCLUDED.status, max_level = EXCLUDED.max_level, report = EXCLUDED.report, scanned_at = now()",
        6),
    /* the webhook event of a verdict (sql/webhook.h): $1 repository, $2 digest, $3 declared level, $4 features,
     * $5 verdict, $6 highest level found */
    BERTH_DB__STMT(BERTH_SQL_ISA_SCAN_HOOK,
                   "SELECT berth_webhook_enqueue(NULL, 'ISA_SCAN_COMPLETED', '', $1::text, $2::text, NULL, "
                   "jsonb_build_object('isa_scan', jsonb_build_object('digest', $2::text, 'declared_level', $3::text, "
                   "'declared_features', $4::text, 'verdict', $5::text, 'max_level', $6::text)))",
                   6),
    /* entries no verdict covers yet (pushed while berthd stopped mid-queue, or dropped by migration 0090) */
    /* one scan of a declaration at a time across instances: a session advisory lock, gone with a dead berthd's
     * connection. A verdict that exists is no reason to skip: a push into another repository wants its referrer */
    BERTH_DB__STMT(BERTH_SQL_ISA_CLAIM,
                   "SELECT pg_try_advisory_lock(" ISA_SCAN_LOCK_CLASS ", hashtext($1 || '|' || $2 || '|' || $3))::text", 3),
    BERTH_DB__STMT(BERTH_SQL_ISA_UNCLAIM,
                   "SELECT pg_advisory_unlock(" ISA_SCAN_LOCK_CLASS ", hashtext($1 || '|' || $2 || '|' || $3))::text", 3),
    BERTH_DB__STMT(
        BERTH_SQL_ISA_UNSCANNED,
        "SELECT coalesce(json_agg(x), '[]')::text FROM (SELECT DISTINCT r.name AS repository, v.digest, v.level, v.features "
        "FROM isa_variants v JOIN manifests m ON m.id = v.manifest_id JOIN repositories r ON r.id = m.repository_id "
        "LEFT JOIN isa_scans s ON " ISA_SCAN_OF_ENTRY " WHERE s.digest IS NULL LIMIT $1::int) x",
        1),
    BERTH_DB__STMT(
        BERTH_SQL_ISA_VIEW_GET,
        "SELECT v.content FROM repositories r JOIN isa_views v ON v.repository_id = r.id WHERE r.name = $1 AND v.digest = $2", 2),
};

int berth_db_isa_policy(berth_dbconn_t *c, const char *project, char *out, size_t outsz, berth_err_t *err)
{
    const char *p[] = {project};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_POLICY, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    snprintf(out, outsz, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}

int berth_db_isa_variants(berth_dbconn_t *c, const char *repo, const char *ref, char digest[BERTH_DIGEST_MAX], char **rows_json,
                          char **media_type, berth_err_t *err)
{
    const char *p[] = {repo, ref};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_VARIANTS, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int rc = BERTH_ENOTFOUND;
    if (PQntuples(res) == 1) {
        snprintf(digest, BERTH_DIGEST_MAX, "%s", PQgetvalue(res, 0, 0));
        *rows_json = strdup(PQgetvalue(res, 0, 1));
        if (media_type != NULL)
            *media_type = strdup(PQgetvalue(res, 0, 2));
        rc = 0;
    } else {
        berth_err_set(err, BERTH_OCI_MANIFEST_UNKNOWN, NULL);
    }
    PQclear(res);
    return rc;
}

int berth_db_isa_view_put(berth_dbconn_t *c, const char *repo, const char *digest, const char *source_digest, const char *body,
                          size_t len, berth_err_t *err)
{
    const char *p[] = {repo, digest, source_digest, body};
    int lengths[4] = {0, 0, 0, (int)len}, formats[4] = {0, 0, 0, 1};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_VIEW_PUT, p, lengths, formats, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    PQclear(res);
    return 0;
}

int berth_db_isa_view_get(berth_dbconn_t *c, const char *repo, const char *digest, char **body, size_t *len, berth_err_t *err)
{
    const char *p[] = {repo, digest};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_VIEW_GET, p, NULL, NULL, 1, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int rc = BERTH_ENOTFOUND;
    if (PQntuples(res) == 1) {
        *len = (size_t)PQgetlength(res, 0, 0);
        *body = malloc(*len + 1);
        memcpy(*body, PQgetvalue(res, 0, 0), *len);
        (*body)[*len] = '\0';
        rc = 0;
    }
    PQclear(res);
    return rc;
}

int berth_db_isa_scan_put(berth_dbconn_t *c, const char *repo, const char *digest, const char *declared,
                          const char *declared_features, const char *status, const char *max_level, const char *report,
                          berth_err_t *err)
{
    const char *p[] = {digest, declared, declared_features, status, max_level, report};
    const char *hp[] = {repo, digest, declared, declared_features, status, max_level};
    int rc = berth_db_begin(c, err);
    if (rc != 0)
        return rc;
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_SCAN_PUT, p, NULL, NULL, 0, err);
    if (res != NULL) {
        PQclear(res);
        res = berth_db__run(c, BERTH_SQL_ISA_SCAN_HOOK, hp, NULL, NULL, 0, err);
    }
    if (res == NULL) {
        berth_db_rollback(c);
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    }
    PQclear(res);
    return berth_db_commit(c, err);
}

int berth_db_isa_claim(berth_dbconn_t *c, const char *digest, const char *level, const char *features, berth_err_t *err)
{
    const char *p[] = {digest, level, features != NULL ? features : ""};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_CLAIM, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int claimed = strcmp(PQgetvalue(res, 0, 0), "true") == 0;
    PQclear(res);
    return claimed;
}

void berth_db_isa_unclaim(berth_dbconn_t *c, const char *digest, const char *level, const char *features)
{
    const char *p[] = {digest, level, features != NULL ? features : ""};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_UNCLAIM, p, NULL, NULL, 0, NULL);
    PQclear(res);
}

int berth_db_isa_unscanned(berth_dbconn_t *c, int limit, char **rows_json, berth_err_t *err)
{
    char lim[16];
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *p[] = {lim};
    PGresult *res = berth_db__run(c, BERTH_SQL_ISA_UNSCANNED, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    *rows_json = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}
