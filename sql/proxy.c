#include "sql/proxy.h"

#include <stdlib.h>
#include <string.h>

#include "core/ref.h"
#include "sql/db_internal.h"

/* advisory lock keys are hashtextextended(key, PROXY_LOCK_SEED): a seed of its own keeps them apart from other users */
#define PROXY_LOCK_SEED "1414"

const berth_db__stmt_t berth_db__proxy_stmts[BERTH_SQL__COUNT] = {
    /* $1 project, $2 repository, $3 tag (NULL: no age asked) */
    BERTH_DB__STMT(
        BERTH_SQL_PROXY_OF,
        "SELECT p.registry_id, p.proxy_speed_kb, (SELECT extract(epoch FROM now() - c.checked_at) FROM repositories r "
        "JOIN proxy_tag_checks c ON c.repository_id = r.id WHERE r.name = $2::text AND c.tag = $3::text) FROM projects p "
        "WHERE p.name = $1::text AND p.registry_id IS NOT NULL",
        3),
    BERTH_DB__STMT(BERTH_SQL_PROXY_CHECKED,
                   "INSERT INTO proxy_tag_checks (repository_id, tag) SELECT id, $2::text FROM repositories WHERE name = $1::text "
                   "ON CONFLICT (repository_id, tag) DO UPDATE SET checked_at = now()",
                   2),
    BERTH_DB__STMT(BERTH_SQL_PROXY_TRYLOCK, "SELECT pg_try_advisory_lock(hashtextextended($1::text, " PROXY_LOCK_SEED "))", 1),
    BERTH_DB__STMT(BERTH_SQL_PROXY_UNLOCK, "SELECT pg_advisory_unlock(hashtextextended($1::text, " PROXY_LOCK_SEED "))", 1),
};

int berth_db_proxy_of(berth_dbconn_t *c, const char *repo, const char *tag, berth_db_proxy_t *out, berth_err_t *err)
{
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    memcpy(project, repo, plen);
    project[plen] = '\0';
    const char *p[] = {project, repo, tag};
    PGresult *res = berth_db__run(c, BERTH_SQL_PROXY_OF, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    int rc = PQntuples(res) > 0;
    if (rc) {
        out->registry_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        out->speed_kb = strtol(PQgetvalue(res, 0, 1), NULL, 10);
        out->tag_age = PQgetisnull(res, 0, 2) ? -1 : strtod(PQgetvalue(res, 0, 2), NULL);
    }
    PQclear(res);
    return rc;
}

int berth_db_proxy_checked(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err)
{
    const char *p[] = {repo, tag};
    PGresult *res = berth_db__run(c, BERTH_SQL_PROXY_CHECKED, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    PQclear(res);
    return 0;
}

int berth_db_proxy_trylock(berth_dbconn_t *c, const char *key, berth_err_t *err)
{
    const char *p[] = {key};
    PGresult *res = berth_db__run(c, BERTH_SQL_PROXY_TRYLOCK, p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
    int got = PQntuples(res) > 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return got;
}

void berth_db_proxy_unlock(berth_dbconn_t *c, const char *key)
{
    const char *p[] = {key};
    PGresult *res = berth_db__run(c, BERTH_SQL_PROXY_UNLOCK, p, NULL, NULL, 0, NULL);
    if (res != NULL)
        PQclear(res);
}
