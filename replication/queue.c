#include "replication/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "sql/api.h"

static berth_db_t *db;

void berth_repl_queue_init(berth_db_t *d)
{
    db = d;
}

/* One statement on a pooled connection. 0 with *json (malloc'd, NULL when no row; json may be NULL to drop it) */
static int run(berth_q_t id, const char *const *p, char **json, long *affected)
{
    berth_err_t err;
    berth_err_clear(&err);
    if (json != NULL)
        *json = NULL;
    berth_dbconn_t *c = berth_db_acquire(db, &err);
    if (c == NULL) /* not logged: the workers ask every second, and the pool reports the outage */
        return err.code != 0 ? err.code : BERTH_EUNAVAIL;
    berth_db_json_t r;
    int rc = berth_db_api(c, id, p, &r, &err);
    berth_db_release(db, c);
    if (rc != 0) {
        berth_log_warn("replication: query %d failed: %s", (int)id, err.msg);
        return rc;
    }
    if (affected != NULL)
        *affected = r.affected;
    if (json != NULL)
        *json = r.json;
    else
        free(r.json);
    return 0;
}

/* A statement whose answer is one JSON value: 0 with *out (caller decrefs), BERTH_ENOTFOUND when no row */
static int run_json(berth_q_t id, const char *const *p, json_t **out)
{
    char *s;
    int rc = run(id, p, &s, NULL);
    *out = NULL;
    if (rc != 0)
        return rc;
    *out = s != NULL ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
    free(s);
    return *out != NULL ? 0 : BERTH_ENOTFOUND;
}

#define ID(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

/* ---- policies ----------------------------------------------------------------------------------------------- */

int berth_repl_queue_policy_get(long long id, berth_repl_policy_t *out)
{
    char ids[24];
    ID(ids, id);
    const char *p[] = {ids};
    json_t *o;
    int rc = run_json(BERTH_Q_POL_GET, p, &o);
    if (rc == 0)
        rc = berth_repl_policy_parse(out, o);
    json_decref(o);
    if (rc != 0 || out->src_registry_id == 0)
        return rc;
    /* the source endpoint with its sealed secret (the API's view of a policy hides it) */
    char rid[24];
    ID(rid, out->src_registry_id);
    const char *rp[] = {rid};
    json_t *reg;
    if ((rc = run_json(BERTH_Q_REG_ENGINE, rp, &reg)) == 0 && (out->src_registry = berth_repl_endpoint_new(reg)) == NULL)
        rc = BERTH_ENOTFOUND;
    json_decref(reg);
    if (rc != 0)
        berth_repl_policy_dispose(out);
    return rc;
}

static int policies(berth_q_t id, berth_repl_policy_t **out, size_t *n)
{
    json_t *a;
    int rc = run_json(id, NULL, &a);
    *out = NULL;
    *n = 0;
    if (rc != 0)
        return rc;
    *out = calloc(json_array_size(a) + 1, sizeof(**out));
    size_t i;
    json_t *o;
    json_array_foreach(a, i, o)
    {
        if (berth_repl_policy_parse(&(*out)[*n], o) == 0)
            (*n)++;
    }
    json_decref(a);
    return 0;
}

int berth_repl_queue_event_policies(berth_repl_policy_t **out, size_t *n)
{
    return policies(BERTH_Q_POL_EVENT, out, n);
}

int berth_repl_queue_scheduled_policies(berth_repl_policy_t **out, size_t *n)
{
    return policies(BERTH_Q_POL_SCHEDULED, out, n);
}

int berth_repl_queue_fire(long long id, long long minute_epoch)
{
    char ids[24], ms[24];
    ID(ids, id);
    ID(ms, minute_epoch);
    const char *p[] = {ids, ms};
    char *won = NULL;
    int rc = run(BERTH_Q_POL_FIRE, p, &won, NULL);
    int ok = rc == 0 && won != NULL; /* a row: the minute moved here */
    free(won);
    return ok;
}

void berth_repl_queue_policies_free(berth_repl_policy_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        berth_repl_policy_dispose(&v[i]);
    free(v);
}

/* ---- executions --------------------------------------------------------------------------------------------- */

int berth_repl_queue_exec_create(long long policy_id, const char *trigger, int skip_while_active, long long *execution_id)
{
    char ids[24];
    ID(ids, policy_id);
    const char *p[] = {ids, trigger, skip_while_active ? "false" : "true"};
    json_t *made;
    int rc = run_json(BERTH_Q_EXEC_CREATE, p, &made);
    *execution_id = (long long)json_integer_value(json_object_get(made, "id"));
    json_decref(made);
    if (rc == BERTH_ENOTFOUND)
        return BERTH_EEXISTS; /* no row: the previous execution is still active */
    return rc != 0 ? rc : *execution_id > 0 ? 0 : BERTH_ERROR;
}

/* a statement about one execution; `text` is its second parameter where it has one (EXEC_STOP reads only $1) */
static void exec_run(berth_q_t id, long long execution_id, const char *text)
{
    char es[24];
    ID(es, execution_id);
    const char *p[] = {es, text};
    run(id, p, NULL, NULL);
}

void berth_repl_queue_exec_fail(long long execution_id, const char *why)
{
    exec_run(BERTH_Q_EXEC_FAIL, execution_id, why);
}

void berth_repl_queue_exec_stop(long long execution_id)
{
    exec_run(BERTH_Q_EXEC_STOP, execution_id, NULL);
}

void berth_repl_queue_exec_finish(long long execution_id, const char *text)
{
    exec_run(BERTH_Q_EXEC_FINISH, execution_id, text);
}

int berth_repl_queue_exec_running(long long execution_id)
{
    char es[24];
    ID(es, execution_id);
    const char *p[] = {es};
    char *s;
    int yes = run(BERTH_Q_EXEC_RUNNING, p, &s, NULL) == 0 && s != NULL && strcmp(s, "true") == 0;
    free(s);
    return yes;
}

/* ---- tasks -------------------------------------------------------------------------------------------------- */

int berth_repl_queue_task_add(long long execution_id, const berth_repl_policy_t *pol, const char *repo, const char *ref,
                              berth_repl_op_t op)
{
    char es[24], src[512], dst[512], drepo[300];
    ID(es, execution_id);
    berth_repl_dest_name(pol->dest_namespace, pol->replace_count, repo, drepo, sizeof(drepo));
    berth_repl_ref_join(repo, ref, src, sizeof(src));
    berth_repl_ref_join(drepo, ref, dst, sizeof(dst));
    const char *p[] = {es, src, dst, op == BERTH_REPL_OP_DELETION ? "deletion" : "copy"};
    long n = 0;
    int rc = run(BERTH_Q_TASK_ADD, p, NULL, &n);
    return rc != 0 ? rc : n == 1 ? 0 : BERTH_ERROR;
}

int berth_repl_queue_claim(const char *instance, berth_repl_task_t *out)
{
    const char *p[] = {instance};
    char *s;
    int rc = run(BERTH_Q_TASK_CLAIM, p, &s, NULL);
    memset(out, 0, sizeof(*out));
    if (rc == 0 && s == NULL)
        rc = BERTH_ENOTFOUND;
    if (rc == 0 && berth_repl_task_parse(out, s) != 0) {
        berth_log_warn("replication: a claimed task does not parse: %.200s", s);
        rc = BERTH_ERROR;
    }
    free(s);
    return rc;
}

void berth_repl_queue_task_done(long long task_id, const char *status, const char *line, long long total, int delay_s)
{
    char ts[24], tot[24], delay[16];
    ID(ts, task_id);
    ID(tot, total);
    ID(delay, delay_s);
    const char *p[] = {ts, status, line, tot, delay};
    run(BERTH_Q_TASK_DONE, p, NULL, NULL);
}

void berth_repl_queue_task_progress(long long task_id, long long sent)
{
    char ts[24], s[24];
    ID(ts, task_id);
    ID(s, sent);
    const char *p[] = {ts, s};
    run(BERTH_Q_TASK_PROGRESS, p, NULL, NULL);
}

void berth_repl_queue_reset(const char *instance)
{
    const char *p[] = {instance};
    run(BERTH_Q_TASKS_RESET, p, NULL, NULL);
}

/* ---- upload sessions at the destination ---------------------------------------------------------------------- */

int berth_repl_queue_upload_get(long long task_id, const char *digest, char *location, size_t locsz)
{
    char ts[24];
    ID(ts, task_id);
    const char *p[] = {ts, digest};
    json_t *v;
    int rc = run_json(BERTH_Q_UPLOAD_GET, p, &v);
    if (rc == 0 && !json_is_string(v))
        rc = BERTH_ENOTFOUND;
    if (rc == 0)
        snprintf(location, locsz, "%s", json_string_value(v));
    json_decref(v);
    return rc;
}

void berth_repl_queue_upload_put(long long task_id, const char *digest, const char *location)
{
    char ts[24];
    ID(ts, task_id);
    const char *p[] = {ts, digest, location};
    run(BERTH_Q_UPLOAD_PUT, p, NULL, NULL);
}

void berth_repl_queue_upload_del(long long task_id, const char *digest)
{
    char ts[24];
    ID(ts, task_id);
    const char *p[] = {ts, digest};
    run(BERTH_Q_UPLOAD_DEL, p, NULL, NULL);
}
