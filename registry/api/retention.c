/*
 * Harbor's tag retention API, /api/v2.0/retentions: one policy per project (the project's metadata retention_id),
 * its executions (manual runs, dry or real; scheduled ones start by themselves), their per-repository tasks and
 * logs, and /retentions/metadatas (the templates and selectors a client may offer). Paths name a policy, not a
 * project, so each handler finds the policy's project and checks the caller's tag-retention rights there:
 * project admins manage and run, members read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/retention.h"
#include "registry/service/retention_plan.h"
#include "replication/policy.h"

/* The caller's right `act` in the project of policy {id} (name into project): 0, or answered (-1). Callers who
 * may not see the project get 404 for the policy, as for one that does not exist. */
static int policy_access(berth_api_t *a, unsigned act, char project[256])
{
    const char *id = berth_api_arg(a, "id");
    const char *p[] = {id};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_RET_PROJECT, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    free(r.json);
    char name[256];
    snprintf(name, sizeof(name), "%s", json_is_string(v) ? json_string_value(v) : "");
    json_decref(v);
    if (name[0] == '\0')
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "retention policy not found");
    berth_authz_t z;
    if (berth_api_project(a, name, &z, project) != 0)
        return -1;
    if (!berth_authz_can(&z, BERTH_RES_TAG_RETENTION, BERTH_ACT_READ))
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "retention policy not found");
    return berth_api_need(a, &z, BERTH_RES_TAG_RETENTION, act);
}

/*
 * The policy of a POST or PUT body as it is stored ({algorithm, rules, trigger}; each rule numbered) and its cron
 * ("" when not scheduled); *project_id gets scope.ref (0 when absent). 0, or answered 400 (-1).
 */
static int read_policy(berth_api_t *a, char **stored, char cron[128], long long *project_id)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    char why[300] = "";
    const json_t *scope = json_object_get(body, "scope"), *trigger = json_object_get(body, "trigger");
    const char *algo = json_string_value(json_object_get(body, "algorithm"));
    const char *level = json_string_value(json_object_get(scope, "level"));
    const json_t *ref = json_object_get(scope, "ref");
    const char *kind = json_string_value(json_object_get(trigger, "kind"));
    const char *c = json_string_value(json_object_get(json_object_get(trigger, "settings"), "cron"));
    berth_ret_policy_t pol;
    *project_id = json_is_integer(ref) ? (long long)json_integer_value(ref) : 0;
    cron[0] = '\0';
    if (algo != NULL && strcmp(algo, "or") != 0)
        snprintf(why, sizeof(why), "algorithm must be or");
    else if (scope != NULL &&
             (!json_is_object(scope) || (level != NULL && strcmp(level, "project") != 0) || (ref != NULL && !json_is_integer(ref))))
        snprintf(why, sizeof(why), "scope must be {level: project, ref: <project id>}");
    else if (trigger != NULL && !json_is_null(trigger) &&
             (!json_is_object(trigger) || (kind != NULL && strcmp(kind, "Schedule") != 0)))
        snprintf(why, sizeof(why), "trigger must be {kind: Schedule, settings: {cron}}");
    else if (c != NULL && c[0] != '\0' && (strlen(c) >= 128 || !berth_repl_cron_valid(c)))
        snprintf(why, sizeof(why), "trigger.settings.cron is not a cron expression (six fields, seconds first, or five)");
    else if (berth_ret_policy_parse(&pol, json_object_get(body, "rules"), why, sizeof(why)) == 0)
        why[0] = '\0';
    berth_ret_policy_dispose(&pol);
    if (why[0] != '\0') {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why);
    }
    if (c != NULL)
        snprintf(cron, 128, "%s", c);
    json_t *rules = json_deep_copy(json_object_get(body, "rules"));
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        json_object_set_new(r, "id", json_integer((json_int_t)i + 1));
        if (json_object_get(r, "action") == NULL)
            json_object_set_new(r, "action", json_string("retain"));
        if (!json_is_boolean(json_object_get(r, "disabled")))
            json_object_set_new(r, "disabled", json_false());
        if (!json_is_integer(json_object_get(r, "priority")))
            json_object_set_new(r, "priority", json_integer(0));
    }
    json_t *out = json_pack("{s:s,s:o,s:{s:s,s:{s:s},s:{}}}", "algorithm", "or", "rules", rules, "trigger", "kind", "Schedule",
                            "settings", "cron", cron, "references");
    *stored = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    json_decref(body);
    return 0;
}

static int create_policy(berth_api_t *a)
{
    char *stored, cron[128], pidbuf[24], project[256];
    long long pid;
    if (read_policy(a, &stored, cron, &pid) != 0)
        return -1;
    berth_authz_t z = {0};
    snprintf(pidbuf, sizeof(pidbuf), "%lld", pid);
    int rc = pid <= 0 ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "scope.ref must name the project (its id)")
                      : berth_api_project(a, pidbuf, &z, project);
    if (rc == 0 && (rc = berth_api_need(a, &z, BERTH_RES_TAG_RETENTION, BERTH_ACT_CREATE)) == 0) {
        snprintf(pidbuf, sizeof(pidbuf), "%lld", (long long)z.project_id); /* a name of digits is a name (berth_api_project) */
        const char *p[] = {pidbuf, stored, cron};
        berth_db_json_t r;
        if ((rc = berth_api_query(a, BERTH_Q_RET_CREATE, p, &r)) == 0) {
            berth_api_audit(a, "create", "retention_policy", project, project, 1);
            rc = berth_api_created(a, r.json, "id", "/api/v2.0/retentions");
        } else {
            berth_api_audit(a, "create", "retention_policy", project, project, 0);
        }
    }
    free(stored);
    return rc;
}

static int get_policy(berth_api_t *a)
{
    char project[256];
    if (policy_access(a, BERTH_ACT_READ, project) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id")};
    return berth_api_object(a, BERTH_Q_RET_GET, p, "retention policy");
}

static int update_policy(berth_api_t *a)
{
    char project[256], *stored, cron[128];
    long long pid;
    if (policy_access(a, BERTH_ACT_UPDATE, project) != 0 || read_policy(a, &stored, cron, &pid) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id"), stored, cron};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_RET_UPDATE, p, &r);
    free(stored);
    if (rc != 0)
        return -1;
    free(r.json);
    berth_api_audit(a, "update", "retention_policy", project, project, 1);
    return berth_api_empty(a, 200);
}

static int delete_policy(berth_api_t *a)
{
    char project[256];
    if (policy_access(a, BERTH_ACT_DELETE, project) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id")};
    return berth_api_delete(a, BERTH_Q_RET_DELETE, p, "retention_policy", project, project);
}

/* The runs' changes: the caller's right to update the policy, then the body; NULL when answered */
static json_t *operate(berth_api_t *a, char project[256])
{
    return policy_access(a, BERTH_ACT_UPDATE, project) == 0 ? berth_api_body(a) : NULL;
}

static int run_policy(berth_api_t *a)
{
    char project[256];
    json_t *body = operate(a, project);
    if (body == NULL)
        return -1;
    const json_t *dry = json_object_get(body, "dry_run");
    int bad = dry != NULL && !json_is_boolean(dry), is_dry = json_is_true(dry);
    json_decref(body);
    if (bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "dry_run must be true or false");
    const char *id = berth_api_arg(a, "id");
    const char *p[] = {id, is_dry ? "true" : "false"};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_RET_EXEC_CREATE, p, &r) != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "retention policy not found");
    berth_api_audit(a, is_dry ? "dry_run" : "run", "retention_policy", project, project, 1);
    berth_retention_wake();
    char prefix[80];
    snprintf(prefix, sizeof(prefix), "/api/v2.0/retentions/%s/executions", id);
    return berth_api_created(a, r.json, "id", prefix);
}

static int list_executions(berth_api_t *a)
{
    char project[256], limit[24], offset[24];
    if (policy_access(a, BERTH_ACT_LIST, project) != 0 || berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id"), limit, offset};
    return berth_api_list(a, BERTH_Q_RET_EXEC_LIST, p, limit, offset);
}

static int stop_execution(berth_api_t *a)
{
    char project[256];
    json_t *body = operate(a, project);
    if (body == NULL)
        return -1;
    const char *action = json_string_value(json_object_get(body, "action"));
    int stop = action != NULL && strcmp(action, "stop") == 0;
    json_decref(body);
    if (!stop)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "action must be stop");
    const char *p[] = {berth_api_arg(a, "id"), berth_api_arg(a, "eid")};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_RET_EXEC_STOP, p, &r) != 0)
        return -1;
    int found = r.json != NULL;
    free(r.json);
    berth_api_audit(a, "stop", "retention_execution", project, project, found);
    return found ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "execution not found");
}

static int list_tasks(berth_api_t *a)
{
    char project[256], limit[24], offset[24];
    if (policy_access(a, BERTH_ACT_LIST, project) != 0 || berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id"), berth_api_arg(a, "eid"), limit, offset};
    return berth_api_list(a, BERTH_Q_RET_TASK_LIST, p, limit, offset);
}

static int task_log(berth_api_t *a)
{
    char project[256];
    if (policy_access(a, BERTH_ACT_READ, project) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "id"), berth_api_arg(a, "eid"), berth_api_arg(a, "tid")};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_RET_TASK_LOG, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    free(r.json);
    if (!json_is_string(v)) {
        json_decref(v);
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "task not found");
    }
    berth_resp_body(a->resp, 200, strdup(json_string_value(v)), json_string_length(v), "text/plain; charset=utf-8");
    json_decref(v);
    return 0;
}

/* What a client may offer (Harbor's RetentionMetadata) */
static int metadatas(berth_api_t *a)
{
    json_t *templates = json_array();
    static const struct {
        berth_ret_template_t t;
        const char *text, *unit;
    } tm[] = {{BERTH_RET_LATEST_PUSHED, "retain the most recently pushed # artifacts", "count"},
              {BERTH_RET_LATEST_PULLED, "retain the most recently pulled # artifacts", "count"},
              {BERTH_RET_DAYS_PUSH, "retain the artifacts pushed within the last # days", "days"},
              {BERTH_RET_DAYS_PULL, "retain the artifacts pulled within the last # days", "days"},
              {BERTH_RET_ALWAYS, "retain always", NULL}};
    for (size_t i = 0; i < sizeof(tm) / sizeof(tm[0]); i++) {
        json_t *params = json_array();
        if (tm[i].unit != NULL)
            json_array_append_new(params, json_pack("{s:s,s:s,s:b}", "type", "int", "unit", tm[i].unit, "required", 1));
        json_array_append_new(templates, json_pack("{s:s,s:s,s:s,s:o}", "rule_template", berth_ret_template_name(tm[i].t),
                                                   "display_text", tm[i].text, "action", "retain", "params", params));
    }
    json_t *out = json_pack("{s:o,s:[{s:s,s:s,s:[s,s]}],s:[{s:s,s:s,s:[s,s]}]}", "templates", templates, "scope_selectors",
                            "display_text", "Repositories", "kind", "doublestar", "decorations", "repoMatches", "repoExcludes",
                            "tag_selectors", "display_text", "Tags", "kind", "doublestar", "decorations", "matches", "excludes");
    return berth_api_jsonv(a, 200, out);
}

#define P "/retentions/{id}"

const berth_api_route_t berth_api_retention_routes[] = {
    BERTH_API_ROUTE("GET", "/retentions/metadatas", BERTH_API_P_LOGIN, metadatas, "getRentenitionMetadata"),
    BERTH_API_ROUTE("POST", "/retentions", BERTH_API_P_LOGIN, create_policy, "createRetention"),
    BERTH_API_ROUTE("GET", P, BERTH_API_P_LOGIN, get_policy, "getRetention"),
    BERTH_API_ROUTE("PUT", P, BERTH_API_P_LOGIN, update_policy, "updateRetention"),
    BERTH_API_ROUTE("DELETE", P, BERTH_API_P_LOGIN, delete_policy, "deleteRetention"),
    BERTH_API_ROUTE("GET", P "/executions", BERTH_API_P_LOGIN, list_executions, "listRetentionExecutions"),
    BERTH_API_ROUTE("POST", P "/executions", BERTH_API_P_LOGIN, run_policy, "triggerRetentionExecution"),
    BERTH_API_ROUTE("PATCH", P "/executions/{eid}", BERTH_API_P_LOGIN, stop_execution, "operateRetentionExecution"),
    BERTH_API_ROUTE("GET", P "/executions/{eid}/tasks", BERTH_API_P_LOGIN, list_tasks, "listRetentionTasks"),
    BERTH_API_ROUTE("GET", P "/executions/{eid}/tasks/{tid}", BERTH_API_P_LOGIN, task_log, "getRetentionTaskLog"),
    BERTH_API_ROUTES_END,
};

#undef P
