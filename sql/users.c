#include "sql/users.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/db_internal.h"

const berth_db__stmt_t berth_db__users_stmts[BERTH_SQL__COUNT] = {
    /* principals: id, name, password hash, sysadmin, disabled, then one extra column (see read_principal) */
    BERTH_DB__STMT(
        BERTH_SQL_USER_GET,
        "SELECT id, username, coalesce(password_hash, ''), sysadmin OR ldap_admin, disabled, coalesce(ldap_dn, '') FROM users "
        "WHERE username = $1",
        1),
    /* one statement, so two berthd starting at once cannot both create a first admin; the first start also
     * creates Harbor's default public project `library`, owned by that admin */
    BERTH_DB__STMT(
        BERTH_SQL_USER_BOOTSTRAP,
        "WITH u AS (INSERT INTO users (username, password_hash, sysadmin) SELECT $1, $2, true "
        "WHERE NOT EXISTS (SELECT 1 FROM users) ON CONFLICT (username) DO NOTHING RETURNING id), "
        "p AS (INSERT INTO projects (name, public, owner_id) SELECT 'library', true, id FROM u ON CONFLICT (name) DO NOTHING "
        "RETURNING id, owner_id), "
        "m AS (INSERT INTO project_members (project_id, user_id, role) SELECT id, owner_id, 1 FROM p) "
        "SELECT id FROM u",
        2),
    /* $2 user or robot id, $3 whether it is a robot: a member role for users, the permission list for robots */
    BERTH_DB__STMT(
        BERTH_SQL_PROJECT_FACTS,
        "SELECT p.id, p.public, "
        "CASE WHEN $3::bool THEN 0 ELSE coalesce(berth_member_role(p.id, $2::bigint), 0) END, "
        "CASE WHEN $3::bool THEN coalesce((SELECT string_agg(rp.resource || ':' || rp.action, ' ') FROM robot_permissions rp "
        "WHERE rp.robot_id = $2::bigint AND rp.namespace IN (p.name, '*')), '') ELSE '' END "
        "FROM projects p WHERE p.name = $1",
        3),
    BERTH_DB__STMT(BERTH_SQL_USER_ANY, "SELECT EXISTS (SELECT 1 FROM users)", 0),
    BERTH_DB__STMT(BERTH_SQL_ROBOT_GET,
                   "SELECT id, name, '', false, disabled OR (expires_at IS NOT NULL AND expires_at <= now()), "
                   "encode(secret_sha256, 'hex') FROM robots WHERE name = $1",
                   1),
    BERTH_DB__STMT(BERTH_SQL_SESSION_CREATE,
                   "WITH gone AS (DELETE FROM sessions WHERE expires_at < now()) "
                   "INSERT INTO sessions (id_sha256, user_id, csrf, expires_at) "
                   "VALUES (decode($1, 'hex'), $2, $3, now() + make_interval(secs => $4::int))",
                   4),
    /* column 5: the CSRF token; 6: LDAP-backed; 7: due for a directory check ($2 seconds since the last one) */
    BERTH_DB__STMT(
        BERTH_SQL_SESSION_GET,
        "SELECT u.id, u.username, '', u.sysadmin OR u.ldap_admin, u.disabled, s.csrf, u.ldap_dn IS NOT NULL, "
        "u.ldap_dn IS NOT NULL AND s.checked_at <= now() - make_interval(secs => $2::int) "
        "FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_sha256 = decode($1, 'hex') AND s.expires_at > now()",
        2),
    BERTH_DB__STMT(BERTH_SQL_SESSION_DELETE, "DELETE FROM sessions WHERE id_sha256 = decode($1, 'hex')", 1),
    /*
     * A refresh token belongs to an account id ($2; $3 robot or user) and to the credential the login verified
     * ($5: the user's password hash, '' for LDAP users, or the robot's secret hash): no row when that changed
     * since (the caller answers as for bad credentials).
     */
    BERTH_DB__STMT(BERTH_SQL_REFRESH_CREATE,
                   "WITH gone AS (DELETE FROM refresh_tokens WHERE expires_at < now()) "
                   "INSERT INTO refresh_tokens (token_sha256, user_id, robot_id, credential, expires_at) "
                   "SELECT decode($1, 'hex'), u.id, NULL, berth_user_credential(u.password_hash, u.ldap_dn), "
                   "now() + make_interval(secs => $4::int) FROM users u "
                   "WHERE NOT $3::bool AND u.id = $2::bigint AND NOT u.disabled AND coalesce(u.password_hash, '') = $5 "
                   "UNION ALL "
                   "SELECT decode($1, 'hex'), NULL, r.id, r.secret_sha256, now() + make_interval(secs => $4::int) FROM robots r "
                   "WHERE $3::bool AND r.id = $2::bigint AND NOT r.disabled AND encode(r.secret_sha256, 'hex') = $5",
                   5),
    /* the live account a refresh token still speaks for, as a principal row (column 6: robot) */
    BERTH_DB__STMT(BERTH_SQL_REFRESH_GET,
                   "SELECT u.id, u.username, coalesce(u.password_hash, ''), u.sysadmin OR u.ldap_admin, u.disabled, "
                   "coalesce(u.ldap_dn, ''), false FROM refresh_tokens t JOIN users u ON u.id = t.user_id "
                   "WHERE t.token_sha256 = decode($1, 'hex') AND t.expires_at > now() AND NOT u.disabled "
                   "AND t.credential = berth_user_credential(u.password_hash, u.ldap_dn) "
                   "UNION ALL "
                   "SELECT r.id, r.name, '', false, false, encode(r.secret_sha256, 'hex'), true FROM refresh_tokens t "
                   "JOIN robots r ON r.id = t.robot_id WHERE t.token_sha256 = decode($1, 'hex') AND t.expires_at > now() "
                   "AND NOT r.disabled AND (r.expires_at IS NULL OR r.expires_at > now()) AND t.credential = r.secret_sha256",
                   1),
    /* one round trip per batch: the rows, then pull counts and pull times for successful pulls */
    BERTH_DB__STMT(
        BERTH_SQL_AUDIT_INSERT,
        "WITH x AS (SELECT * FROM json_to_recordset($1::json) AS x(username text, remote text, operation text, "
        "resource_type text, resource text, project text, result text, detail text, repo text, digest text, count int)), "
        "ins AS (INSERT INTO audit_log (username, remote, operation, resource_type, resource, project_id, result, detail, count) "
        "SELECT x.username, x.remote, x.operation, x.resource_type, x.resource, (SELECT p.id FROM projects p WHERE p.name = "
        "x.project), x.result, x.detail, greatest(coalesce(x.count, 1), 1) FROM x RETURNING 1), "
        "pulls AS (SELECT repo, digest, greatest(coalesce(count, 1), 1) AS n FROM x WHERE operation = 'pull' AND result = "
        "'success' AND repo <> ''), "
        /* webhooks' PULL_ARTIFACT (issue 14): pulls have no transaction of their own; this batch is where they are
         * counted, so their events are queued with the count (a coalesced row is one event) */
        "hooks AS (INSERT INTO webhook_events (project_id, type, actor, repo, digest, tag) SELECT r.project_id, "
        "'PULL_ARTIFACT', x.username, x.repo, nullif(x.digest, ''), CASE WHEN left(x.resource, length(x.repo) + 1) = "
        "x.repo || ':' THEN substr(x.resource, length(x.repo) + 2) END FROM x JOIN repositories r ON r.name = x.repo WHERE "
        "x.operation = 'pull' AND x.result = 'success' AND berth_webhook_wanted(r.project_id, 'PULL_ARTIFACT')), "
        "cnt AS (UPDATE repositories r SET pull_count = r.pull_count + y.n FROM (SELECT repo, sum(n) AS n FROM pulls "
        "GROUP BY repo) y WHERE r.name = y.repo RETURNING 1) "
        "UPDATE manifests m SET pull_time = now() FROM (SELECT DISTINCT repo, digest FROM pulls WHERE digest <> '') z "
        "JOIN repositories r ON r.name = z.repo WHERE m.repository_id = r.id AND m.digest = z.digest",
        1),
    /* an LDAP login: create or refresh the user (never one with a local password) and replace its groups */
    /*
     * An LDAP login: create or refresh the user, named as the directory spells it, and replace its groups. Never
     * an account with a local password, nor one whose name differs from a local user's by case only (one person,
     * one account: `Admin` from the directory does not sit next to the local `admin`).
     */
    BERTH_DB__STMT(BERTH_SQL_LDAP_UPSERT,
                   "WITH u AS (INSERT INTO users (username, ldap_dn, email, realname, ldap_admin) SELECT $1, $2, $3, $4, $5::bool "
                   "WHERE NOT EXISTS (SELECT 1 FROM users l WHERE lower(l.username) = lower($1) AND l.ldap_dn IS NULL) "
                   "ON CONFLICT (username) DO UPDATE SET ldap_dn = EXCLUDED.ldap_dn, email = EXCLUDED.email, realname = "
                   "EXCLUDED.realname, ldap_admin = EXCLUDED.ldap_admin, updated_at = now() WHERE users.password_hash IS NULL "
                   "AND users.ldap_dn IS NOT NULL RETURNING id), "
                   "gone AS (DELETE FROM user_ldap_groups g USING u WHERE g.user_id = u.id AND g.group_dn <> ALL ($6::text[])), "
                   "added AS (INSERT INTO user_ldap_groups (user_id, group_dn) SELECT u.id, d FROM u, unnest($6::text[]) AS d "
                   "ON CONFLICT DO NOTHING) "
                   "SELECT id FROM u",
                   6),
    /* berthd's own system user (replication through its own edge): a new password at every start */
    BERTH_DB__STMT(BERTH_SQL_INTERNAL_USER,
                   "INSERT INTO users (username, password_hash, sysadmin, comment, internal) VALUES ($1, $2, true, "
                   "'internal: replication', true) ON CONFLICT (username) DO UPDATE SET password_hash = EXCLUDED.password_hash, "
                   "sysadmin = true, disabled = false, internal = true",
                   2),
    BERTH_DB__STMT(BERTH_SQL_SESSION_CHECKED, "UPDATE sessions SET checked_at = now() WHERE id_sha256 = decode($1, 'hex')", 1),
    /* an LDAP user the directory no longer knows: every browser session of it ends */
    BERTH_DB__STMT(BERTH_SQL_SESSIONS_END, "DELETE FROM sessions WHERE user_id = $1::bigint", 1),
};

static PGresult *run(berth_dbconn_t *c, berth_sql_id_t id, const char *const *p, berth_err_t *err)
{
    return berth_db__run(c, id, p, NULL, NULL, 0, err);
}

static int fail(berth_err_t *err)
{
    return err != NULL && err->code != 0 ? err->code : BERTH_ERROR; /* never 0: callers read *out on 0 */
}

/* One principal row (id, name, hash, sysadmin, disabled, extra) into *out; `extra` gets column 5. */
static int read_row(PGresult *res, berth_db_user_t *out, char *extra, size_t extrasz)
{
    if (PQntuples(res) != 1)
        return BERTH_ENOTFOUND;
    memset(out, 0, sizeof(*out));
    out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    snprintf(out->username, sizeof(out->username), "%s", PQgetvalue(res, 0, 1));
    snprintf(out->password_hash, sizeof(out->password_hash), "%s", PQgetvalue(res, 0, 2));
    out->sysadmin = PQgetvalue(res, 0, 3)[0] == 't';
    out->disabled = PQgetvalue(res, 0, 4)[0] == 't';
    snprintf(extra, extrasz, "%s", PQgetvalue(res, 0, 5));
    return 0;
}

/* Run a principal query with one parameter into *out (see read_row) */
static int read_principal(berth_dbconn_t *c, berth_sql_id_t id, const char *arg, berth_db_user_t *out, char *extra, size_t extrasz,
                          berth_err_t *err)
{
    const char *p[] = {arg};
    PGresult *res = run(c, id, p, err);
    if (res == NULL)
        return fail(err);
    int rc = read_row(res, out, extra, extrasz);
    PQclear(res);
    return rc;
}

int berth_db_user_get(berth_dbconn_t *c, const char *username, berth_db_user_t *out, berth_err_t *err)
{
    char dn[2];
    int rc = read_principal(c, BERTH_SQL_USER_GET, username, out, dn, sizeof(dn), err);
    if (rc == 0)
        out->ldap = dn[0] != '\0';
    return rc;
}

int berth_db_robot_get(berth_dbconn_t *c, const char *name, berth_db_user_t *out, berth_err_t *err)
{
    char secret[65];
    int rc = read_principal(c, BERTH_SQL_ROBOT_GET, name, out, secret, sizeof(secret), err);
    if (rc == 0) {
        out->robot = 1;
        memcpy(out->secret_sha256, secret, sizeof(secret));
    }
    return rc;
}

int berth_db_user_bootstrap_admin(berth_dbconn_t *c, const char *username, const char *password_hash, int *created,
                                  berth_err_t *err)
{
    const char *p[] = {username, password_hash};
    PGresult *res = run(c, BERTH_SQL_USER_BOOTSTRAP, p, err);
    if (res == NULL)
        return fail(err);
    *created = PQntuples(res) == 1;
    PQclear(res);
    return 0;
}

int berth_db_project_facts(berth_dbconn_t *c, const char *project, const berth_db_user_t *who, berth_db_project_facts_t *out,
                           berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    char id[24];
    snprintf(id, sizeof(id), "%lld", who != NULL ? (long long)who->id : 0LL);
    const char *p[] = {project, id, who != NULL && who->robot ? "true" : "false"};
    PGresult *res = run(c, BERTH_SQL_PROJECT_FACTS, p, err);
    if (res == NULL)
        return fail(err);
    if (PQntuples(res) == 1) {
        out->exists = 1;
        out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        out->is_public = PQgetvalue(res, 0, 1)[0] == 't';
        out->role = (int)strtol(PQgetvalue(res, 0, 2), NULL, 10);
        if (PQgetvalue(res, 0, 3)[0] != '\0')
            out->robot_perms = strdup(PQgetvalue(res, 0, 3));
    }
    PQclear(res);
    return 0;
}

void berth_db_project_facts_dispose(berth_db_project_facts_t *f)
{
    free(f->robot_perms);
    f->robot_perms = NULL;
}

int berth_db_user_any(berth_dbconn_t *c, berth_err_t *err)
{
    PGresult *res = run(c, BERTH_SQL_USER_ANY, NULL, err);
    if (res == NULL)
        return fail(err);
    int any = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return any;
}

/* a statement whose result is only success or failure */
static int exec(berth_dbconn_t *c, berth_sql_id_t id, const char *const *p, berth_err_t *err)
{
    PGresult *res = run(c, id, p, err);
    if (res == NULL)
        return fail(err);
    PQclear(res);
    return 0;
}

int berth_db_session_create(berth_dbconn_t *c, const char *id_hex, int64_t user_id, const char *csrf, int ttl, berth_err_t *err)
{
    char uid[24], t[16];
    snprintf(uid, sizeof(uid), "%lld", (long long)user_id);
    snprintf(t, sizeof(t), "%d", ttl);
    const char *p[] = {id_hex, uid, csrf, t};
    return exec(c, BERTH_SQL_SESSION_CREATE, p, err);
}

int berth_db_session_get(berth_dbconn_t *c, const char *id_hex, int recheck_seconds, berth_db_user_t *out, char csrf[65],
                         int *recheck_due, berth_err_t *err)
{
    char secs[16];
    snprintf(secs, sizeof(secs), "%d", recheck_seconds);
    const char *p[] = {id_hex, secs};
    PGresult *res = run(c, BERTH_SQL_SESSION_GET, p, err);
    if (res == NULL)
        return fail(err);
    int rc = read_row(res, out, csrf, 65);
    if (rc == 0) {
        out->ldap = PQgetvalue(res, 0, 6)[0] == 't';
        *recheck_due = PQgetvalue(res, 0, 7)[0] == 't';
    }
    PQclear(res);
    return rc == 0 && out->disabled ? BERTH_ENOTFOUND : rc;
}

int berth_db_session_checked(berth_dbconn_t *c, const char *id_hex, berth_err_t *err)
{
    const char *p[] = {id_hex};
    return exec(c, BERTH_SQL_SESSION_CHECKED, p, err);
}

int berth_db_sessions_end(berth_dbconn_t *c, int64_t user_id, berth_err_t *err)
{
    char uid[24];
    snprintf(uid, sizeof(uid), "%lld", (long long)user_id);
    const char *p[] = {uid};
    return exec(c, BERTH_SQL_SESSIONS_END, p, err);
}

int berth_db_session_delete(berth_dbconn_t *c, const char *id_hex, berth_err_t *err)
{
    const char *p[] = {id_hex};
    return exec(c, BERTH_SQL_SESSION_DELETE, p, err);
}

int berth_db_refresh_create(berth_dbconn_t *c, const char *hex, const berth_db_user_t *who, int ttl, berth_err_t *err)
{
    char id[24], t[16];
    snprintf(id, sizeof(id), "%lld", (long long)who->id);
    snprintf(t, sizeof(t), "%d", ttl);
    const char *p[] = {hex, id, who->robot ? "true" : "false", t, who->robot ? who->secret_sha256 : who->password_hash};
    PGresult *res = run(c, BERTH_SQL_REFRESH_CREATE, p, err);
    if (res == NULL)
        return fail(err);
    int rc = strcmp(PQcmdTuples(res), "1") == 0 ? 0 : BERTH_ENOTFOUND;
    PQclear(res);
    return rc;
}

int berth_db_refresh_get(berth_dbconn_t *c, const char *hex, berth_db_user_t *out, berth_err_t *err)
{
    const char *p[] = {hex};
    PGresult *res = run(c, BERTH_SQL_REFRESH_GET, p, err);
    if (res == NULL)
        return fail(err);
    char extra[1024];
    int rc = read_row(res, out, extra, sizeof(extra));
    if (rc == 0) {
        out->robot = PQgetvalue(res, 0, 6)[0] == 't';
        if (out->robot)
            snprintf(out->secret_sha256, sizeof(out->secret_sha256), "%.64s", extra);
        else
            out->ldap = extra[0] != '\0';
    }
    PQclear(res);
    return rc;
}

int berth_db_audit_insert(berth_dbconn_t *c, const berth_db_audit_t *rows, size_t n, berth_err_t *err)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const berth_db_audit_t *r = &rows[i];
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i}", "username", r->username, "remote",
                                             r->remote, "operation", r->operation, "resource_type", r->resource_type, "resource",
                                             r->resource, "project", r->project, "result", r->result, "detail", r->detail, "repo",
                                             r->repo, "digest", r->digest, "count", r->count > 0 ? r->count : 1));
    }
    char *doc = json_dumps(arr, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(arr);
    const char *p[] = {doc};
    /* The log is written from a queue in memory, lost with the process anyway: its commit does not wait for the
       WAL flush, so the pull counts' repository rows it locks are held for the statement, not for an fsync that a
       manifest PUT touching the same row would wait behind (docs/benchmarks.md, GC seventh session). */
    int rc = berth_db_begin(c, err);
    if (rc == 0)
        rc = berth_db_exec(c, "SET LOCAL synchronous_commit = off", err);
    if (rc == 0)
        rc = exec(c, BERTH_SQL_AUDIT_INSERT, p, err);
    if (rc == 0)
        rc = berth_db_commit(c, err);
    if (rc != 0)
        berth_db_rollback(c);
    free(doc);
    return rc;
}

/* {"a","b"} with every element quoted and escaped, for a text[] parameter */
static char *text_array(char *const *items, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += 2 * strlen(items[i]) + 3;
    char *out = malloc(cap), *o = out;
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *o++ = ',';
        *o++ = '"';
        for (const char *p = items[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                *o++ = '\\';
            *o++ = *p;
        }
        *o++ = '"';
    }
    *o++ = '}';
    *o = '\0';
    return out;
}

int berth_db_ldap_onboard(berth_dbconn_t *c, const char *username, const char *dn, const char *email, const char *realname,
                          int admin, char *const *groups, size_t ngroups, int64_t *id_out, berth_err_t *err)
{
    char *arr = text_array(groups, ngroups);
    const char *p[] = {username, dn, email, realname, admin ? "true" : "false", arr};
    PGresult *res = run(c, BERTH_SQL_LDAP_UPSERT, p, err);
    free(arr);
    if (res == NULL)
        return fail(err);
    int rc = PQntuples(res) == 1 ? 0 : BERTH_ECONFLICT; /* a local user of that name exists */
    if (rc == 0)
        *id_out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return rc;
}

int berth_db_user_internal(berth_dbconn_t *c, const char *username, const char *password_hash, berth_err_t *err)
{
    const char *p[] = {username, password_hash};
    return exec(c, BERTH_SQL_INTERNAL_USER, p, err);
}
