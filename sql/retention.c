#include "sql/retention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/db_internal.h"
#include "sql/webhook.h"

/* Candidates: what Harbor lists as artifacts (not a referrer, not only an index's child), by repository */
#define RET_TOP_LEVEL                                                                                                              \
    "m.subject_digest IS NULL AND (EXISTS (SELECT 1 FROM tags t WHERE t.manifest_id = m.id) OR NOT EXISTS "                        \
    "(SELECT 1 FROM manifest_refs mr JOIN manifests pm ON pm.id = mr.manifest_id WHERE pm.repository_id = "                        \
    "m.repository_id AND mr.digest = m.digest AND mr.kind = 1))"

#define LEASE "interval '120 seconds'"

const berth_db__stmt_t berth_db__retention_stmts[BERTH_SQL__COUNT] = {
    BERTH_DB__STMT(BERTH_SQL_RET_SCHEDULED, "SELECT id, cron FROM retention_policies WHERE coalesce(cron, '') <> ''", 0),
    /* $1 policy, $2 the minute (epoch): the first berthd to mark the minute starts the run; a berthd that read its
     * clock before a stall and comes late with an earlier minute finds a later one marked and starts nothing (with
     * "differs from" it fired that minute again and moved the mark back, so the next minute fired twice) */
    BERTH_DB__STMT(BERTH_SQL_RET_FIRE,
                   "WITH f AS (UPDATE retention_policies SET last_fired = to_timestamp($2::bigint) WHERE id = $1::bigint AND "
                   "(last_fired IS NULL OR last_fired < to_timestamp($2::bigint)) RETURNING id) INSERT INTO retention_executions "
                   "(policy_id, trigger) SELECT id, 'SCHEDULE' FROM f",
                   2),
    BERTH_DB__STMT(BERTH_SQL_RET_CLAIM,
                   "UPDATE retention_executions e SET status = 'Running', claimed_by = $1, lease_until = now() + " LEASE ", "
                   "start_time = CASE WHEN e.status = 'Pending' THEN now() ELSE e.start_time END WHERE e.id = (SELECT id FROM "
                   "retention_executions WHERE status = 'Pending' OR (status = 'Running' AND lease_until < now()) ORDER BY id "
                   "LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING e.id, e.policy_id, e.dry_run, (SELECT rp.policy::text FROM "
                   "retention_policies rp WHERE rp.id = e.policy_id), (SELECT p.name FROM retention_policies rp JOIN projects p "
                   "ON p.id = rp.project_id WHERE rp.id = e.policy_id)",
                   1),
    BERTH_DB__STMT(BERTH_SQL_RET_TASKS_CLEAR, "DELETE FROM retention_tasks WHERE execution_id = $1::bigint", 1),
    BERTH_DB__STMT(BERTH_SQL_RET_HEARTBEAT,
                   "UPDATE retention_executions SET lease_until = now() + " LEASE " WHERE id = $1::bigint AND claimed_by = $2 "
                   "AND status = 'Running' RETURNING stop_requested",
                   2),
    BERTH_DB__STMT(BERTH_SQL_RET_FINISH,
                   "UPDATE retention_executions SET status = $3, end_time = now(), lease_until = NULL WHERE id = $1::bigint "
                   "AND claimed_by = $2 AND status = 'Running'",
                   3),
    /* $1 project name: repository, digest, push and pull times, tags; and the database's clock */
    BERTH_DB__STMT(BERTH_SQL_RET_CANDIDATES,
                   "SELECT r.name, m.digest, extract(epoch FROM m.created_at)::float8, coalesce(extract(epoch FROM "
                   "m.pull_time)::float8, -1), coalesce((SELECT string_agg(t.name, ' ' ORDER BY t.name) FROM tags t WHERE "
                   "t.manifest_id = m.id), ''), extract(epoch FROM now())::float8 FROM projects p JOIN repositories r ON "
                   "r.project_id = p.id JOIN manifests m ON m.repository_id = r.id WHERE p.name = $1 AND " RET_TOP_LEVEL
                   " ORDER BY r.name, m.created_at DESC, m.id DESC",
                   1),
    BERTH_DB__STMT(BERTH_SQL_RET_TASK_ADD,
                   "INSERT INTO retention_tasks (execution_id, repository, status, total, retained, deleted, log, start_time, "
                   "end_time) VALUES ($1::bigint, $2, $3, $4::int, $5::int, $6::jsonb, $7, to_timestamp($8::float8), now())",
                   8),
};

static int failed(berth_err_t *err)
{
    return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
}

static int exec_count(berth_dbconn_t *c, berth_sql_id_t id, const char *const *p, berth_err_t *err)
{
    PGresult *res = berth_db__run(c, id, p, NULL, NULL, 0, err);
    if (res == NULL)
        return failed(err);
    int n = (int)strtol(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return n;
}

int berth_db_ret_scheduled(berth_dbconn_t *c, long long **ids, char ***crons, size_t *n, berth_err_t *err)
{
    PGresult *res = berth_db__run(c, BERTH_SQL_RET_SCHEDULED, NULL, NULL, NULL, 0, err);
    if (res == NULL)
        return failed(err);
    int rows = PQntuples(res);
    *ids = calloc((size_t)rows + 1, sizeof(**ids));
    *crons = calloc((size_t)rows + 1, sizeof(**crons));
    for (int i = 0; i < rows; i++) {
        (*ids)[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        (*crons)[i] = strdup(PQgetvalue(res, i, 1));
    }
    *n = (size_t)rows;
    PQclear(res);
    return 0;
}

int berth_db_ret_schedule_fire(berth_dbconn_t *c, long long policy_id, long long minute, berth_err_t *err)
{
    char pid[24], m[24];
    snprintf(pid, sizeof(pid), "%lld", policy_id);
    snprintf(m, sizeof(m), "%lld", minute);
    const char *p[] = {pid, m};
    int n = exec_count(c, BERTH_SQL_RET_FIRE, p, err);
    return n < 0 ? n : 0;
}

int berth_db_ret_claim(berth_dbconn_t *c, const char *instance, berth_db_ret_exec_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    const char *p[] = {instance};
    PGresult *res = berth_db__run(c, BERTH_SQL_RET_CLAIM, p, NULL, NULL, 0, err);
    if (res == NULL)
        return failed(err);
    if (PQntuples(res) == 0) {
        PQclear(res);
        return BERTH_ENOTFOUND;
    }
    out->id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    out->policy_id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    out->dry_run = PQgetvalue(res, 0, 2)[0] == 't';
    out->policy = strdup(PQgetvalue(res, 0, 3));
    out->project = strdup(PQgetvalue(res, 0, 4));
    PQclear(res);
    char eid[24];
    snprintf(eid, sizeof(eid), "%lld", out->id);
    const char *tp[] = {eid};
    int n = exec_count(c, BERTH_SQL_RET_TASKS_CLEAR, tp, err);
    return n < 0 ? n : 0;
}

void berth_db_ret_exec_dispose(berth_db_ret_exec_t *e)
{
    free(e->policy);
    free(e->project);
    memset(e, 0, sizeof(*e));
}

int berth_db_ret_heartbeat(berth_dbconn_t *c, long long eid, const char *instance, berth_err_t *err)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", eid);
    const char *p[] = {id, instance};
    PGresult *res = berth_db__run(c, BERTH_SQL_RET_HEARTBEAT, p, NULL, NULL, 0, err);
    if (res == NULL)
        return failed(err);
    int rc = PQntuples(res) == 0 ? BERTH_ENOTFOUND : PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return rc;
}

int berth_db_ret_finish(berth_dbconn_t *c, long long eid, const char *instance, const char *status, const char *project,
                        const char *detail, berth_err_t *err)
{
    char id[24], *extra = NULL;
    snprintf(id, sizeof(id), "%lld", eid);
    const char *p[] = {id, instance, status};
    int rc = berth_db_begin(c, err);
    if (rc != 0)
        return rc;
    int n = exec_count(c, BERTH_SQL_RET_FINISH, p, err);
    if (n > 0 && detail != NULL) { /* {"retention": detail}: Harbor's event_data key for TAG_RETENTION */
        size_t len = strlen(detail) + 16;
        extra = malloc(len);
        snprintf(extra, len, "{\"retention\":%s}", detail);
    }
    if (n < 0 || (n > 0 && (rc = berth_db_webhook_enqueue(c, project, "TAG_RETENTION", NULL, NULL, NULL, extra, err)) != 0)) {
        free(extra);
        berth_db_rollback(c);
        return n < 0 ? n : rc;
    }
    free(extra);
    return berth_db_commit(c, err);
}

int berth_db_ret_candidates(berth_dbconn_t *c, const char *project, berth_db_ret_candidates_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    const char *p[] = {project};
    PGresult *res = berth_db__run(c, BERTH_SQL_RET_CANDIDATES, p, NULL, NULL, 0, err);
    if (res == NULL)
        return failed(err);
    int rows = PQntuples(res);
    out->v = calloc((size_t)rows + 1, sizeof(*out->v));
    for (int i = 0; i < rows; i++) {
        out->v[i] = (berth_db_ret_candidate_t){.repo = PQgetvalue(res, i, 0),
                                               .digest = PQgetvalue(res, i, 1),
                                               .pushed = strtod(PQgetvalue(res, i, 2), NULL),
                                               .pulled = strtod(PQgetvalue(res, i, 3), NULL),
                                               .tags = strdup(PQgetvalue(res, i, 4))};
        out->now = strtod(PQgetvalue(res, i, 5), NULL);
    }
    out->n = (size_t)rows;
    out->res = res;
    return 0;
}

void berth_db_ret_candidates_dispose(berth_db_ret_candidates_t *l)
{
    if (l->res != NULL)
        PQclear(l->res);
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].tags);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

int berth_db_ret_task_add(berth_dbconn_t *c, long long eid, const char *repo, const char *status, int total, int retained,
                          const char *deleted_json, const char *log, double start, berth_err_t *err)
{
    char id[24], t[24], r[24], s[40];
    snprintf(id, sizeof(id), "%lld", eid);
    snprintf(t, sizeof(t), "%d", total);
    snprintf(r, sizeof(r), "%d", retained);
    snprintf(s, sizeof(s), "%.6f", start);
    const char *p[] = {id, repo, status, t, r, deleted_json, log, s};
    int n = exec_count(c, BERTH_SQL_RET_TASK_ADD, p, err);
    return n < 0 ? n : 0;
}
