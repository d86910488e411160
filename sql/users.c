#include "sql/users.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/db_internal.h"

/* statement ids continue after sql/registry.c's (they share the per-connection prepared[] table) */
enum { S_USER_GET = 40, S_USER_BOOTSTRAP, S_PROJECT_PUBLIC, S_USER_ANY };

static const berth_db__stmt_t stmts[] = {
    {S_USER_GET, "SELECT id, username, coalesce(password_hash, ''), sysadmin, disabled FROM users WHERE username = $1", 1},
    /* one statement, so two berthd starting at once cannot both create a first admin */
    {S_USER_BOOTSTRAP,
     "INSERT INTO users (username, password_hash, sysadmin) SELECT $1, $2, true "
     "WHERE NOT EXISTS (SELECT 1 FROM users) ON CONFLICT (username) DO NOTHING",
     2},
    {S_PROJECT_PUBLIC,
     "SELECT p.public, coalesce((SELECT m.role FROM project_members m WHERE m.project_id = p.id AND m.user_id = $2), 0) "
     "FROM projects p WHERE p.name = $1",
     2},
    {S_USER_ANY, "SELECT EXISTS (SELECT 1 FROM users)", 0},
};

static const berth_db__stmt_t *stmt(int id)
{
    return &stmts[id - S_USER_GET];
}

int berth_db_user_get(berth_dbconn_t *c, const char *username, berth_db_user_t *out, berth_err_t *err)
{
    const char *p[] = {username};
    PGresult *res = berth_db__run(c, stmt(S_USER_GET), p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int rc = BERTH_ENOTFOUND;
    if (PQntuples(res) == 1) {
        memset(out, 0, sizeof(*out));
        out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        snprintf(out->username, sizeof(out->username), "%s", PQgetvalue(res, 0, 1));
        snprintf(out->password_hash, sizeof(out->password_hash), "%s", PQgetvalue(res, 0, 2));
        out->sysadmin = PQgetvalue(res, 0, 3)[0] == 't';
        out->disabled = PQgetvalue(res, 0, 4)[0] == 't';
        rc = 0;
    }
    PQclear(res);
    return rc;
}

int berth_db_user_bootstrap_admin(berth_dbconn_t *c, const char *username, const char *password_hash, int *created,
                                  berth_err_t *err)
{
    const char *p[] = {username, password_hash};
    PGresult *res = berth_db__run(c, stmt(S_USER_BOOTSTRAP), p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    *created = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    return 0;
}

int berth_db_project_access(berth_dbconn_t *c, const char *project, int64_t user_id, int *is_public, int *role,
                            berth_err_t *err)
{
    char uid[24];
    snprintf(uid, sizeof(uid), "%lld", (long long)user_id);
    const char *p[] = {project, uid};
    PGresult *res = berth_db__run(c, stmt(S_PROJECT_PUBLIC), p, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    *is_public = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
    *role = PQntuples(res) == 1 ? (int)strtol(PQgetvalue(res, 0, 1), NULL, 10) : 0;
    PQclear(res);
    return 0;
}

int berth_db_user_any(berth_dbconn_t *c, berth_err_t *err)
{
    PGresult *res = berth_db__run(c, stmt(S_USER_ANY), NULL, NULL, NULL, 0, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int any = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return any;
}
