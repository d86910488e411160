/*
 * /api/v2.0/registries and /api/v2.0/replication/{policies,executions}: system admins (Harbor), and — beyond
 * Harbor — the project admins of a policy's project_scope, for policies whose filters stay inside that project.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "replication/policy.h"
#include "replication/replication.h"

/* ---- endpoints ---- */

static int list_registries(berth_api_t *a)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "name", "type", "url", "creation_time", "update_time"), sort) != 0)
        return -1;
    const char *p[] = {limit, offset, sort};
    return berth_api_list(a, BERTH_Q_REG_LIST, p, limit, offset);
}

typedef enum { REG_CREATE, REG_PING, REG_UPDATE } reg_write_t;

/* POST /registries, POST /registries/ping and PUT /registries/{id}: one body */
static int registry_write(berth_api_t *a, reg_write_t mode)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *name = json_string_value(json_object_get(body, "name")), *type = json_string_value(json_object_get(body, "type"));
    const char *url = json_string_value(json_object_get(body, "url"));
    json_t *cred = json_object_get(body, "credential");
    const char *key = json_string_value(json_object_get(cred, "access_key")),
               *secret = json_string_value(json_object_get(cred, "access_secret"));
    json_t *ins = json_object_get(body, "insecure");
    const char *ca = json_string_value(json_object_get(body, "ca_file"));
    const char *desc = json_string_value(json_object_get(body, "description"));
    const char *id = berth_api_arg(a, "registry_id");
    int rc;
    if (url != NULL && !berth_repl_http_url(url)) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "url must be http:// or https://");
    }
    if (mode == REG_PING) {
        berth_err_t err;
        rc = url == NULL ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "url is required")
             : berth_repl_ping(type, url, key, secret, json_is_true(ins), ca, &err) != 0 ? berth_api_err(a, &err)
                                                                                         : berth_api_empty(a, 200);
        json_decref(body);
        return rc;
    }
    int create = mode == REG_CREATE;
    if (create &&
        (name == NULL || url == NULL || type == NULL || (strcmp(type, "berth") != 0 && strcmp(type, "docker-registry") != 0))) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "name, type (berth or docker-registry) and an http(s) url are required");
    }
    char *sealed = secret != NULL && secret[0] ? berth_repl_seal(secret) : NULL;
    berth_db_json_t r = {0};
    if (create) {
        const char *p[] = {name, type, url, key, sealed, json_is_boolean(ins) ? (json_is_true(ins) ? "true" : "false") : NULL,
                           ca,   desc};
        rc = berth_api_query(a, BERTH_Q_REG_CREATE, p, &r);
        if (rc == 0)
            berth_api_created(a, r.json, "id", "/api/v2.0/registries");
    } else {
        const char *p[] = {id, name, url, key, sealed, json_is_boolean(ins) ? (json_is_true(ins) ? "true" : "false") : NULL,
                           ca, desc};
        rc = berth_api_query(a, BERTH_Q_REG_UPDATE, p, &r);
        if (rc == 0)
            rc = r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "registry not found");
    }
    berth_api_audit(a, create ? "create" : "update", "registry", name != NULL ? name : id, NULL, rc == 0);
    free(sealed);
    json_decref(body);
    return rc;
}

static int create_registry(berth_api_t *a)
{
    return registry_write(a, REG_CREATE);
}

static int ping_registry(berth_api_t *a)
{
    return registry_write(a, REG_PING);
}

static int update_registry(berth_api_t *a)
{
    return registry_write(a, REG_UPDATE);
}

static int get_registry(berth_api_t *a)
{
    const char *p[] = {berth_api_arg(a, "registry_id")};
    return berth_api_object(a, BERTH_Q_REG_GET, p, "registry");
}

static int delete_registry(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "registry_id");
    const char *p[] = {id};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_REG_DELETE, p, &r);
    if (rc != 0 && a->resp->status == 404)
        return berth_api_fail(a, BERTH_OCI_PRECONDITION, "replication policies or proxy-cache projects still use this registry");
    if (rc != 0)
        return -1;
    int found = r.json != NULL;
    free(r.json);
    berth_api_audit(a, "delete", "registry", id, NULL, found);
    return found ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "registry not found");
}

/* ---- policies and executions ---- */

/* system admin, or project admin of `scope` */
static int may_manage(berth_api_t *a, const char *scope)
{
    if (a->authed && a->who.sysadmin)
        return 1;
    if (scope == NULL || scope[0] == '\0' || !a->authed)
        return 0;
    berth_authz_t z;
    return berth_authz_project(a->c, &a->who, scope, &z, NULL) == 0 && z.exists &&
           berth_authz_can(&z, BERTH_RES_PROJECT, BERTH_ACT_UPDATE) && z.role == 1;
}

static int deny(berth_api_t *a)
{
    if (!a->authed)
        return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "authentication required");
    return berth_api_fail(a, BERTH_OCI_DENIED, "system administrators (or the policy's project admins) only");
}

static int policy_facts(berth_api_t *a, const char *id, char scope[256], char *owner, char *ns);

/* A delegated policy writes only where its owner may push (checked again at every run by the engine) */
static int confined(berth_api_t *a, const char *owner, const char *scope, const char *ns)
{
    char why[400];
    int rc = berth_repl_delegation_check(a->c, owner, scope, ns, why, sizeof(why));
    if (rc == BERTH_EDENIED)
        return berth_api_fail(a, BERTH_OCI_DENIED, "%s", why);
    return rc == 0 ? 0 : berth_api_fail(a, BERTH_OCI_UNAVAILABLE, NULL);
}

static int policy_scope(berth_api_t *a, const char *id, char scope[256])
{
    return policy_facts(a, id, scope, NULL, NULL);
}

/* A policy's project_scope, and optionally its owner and dest_namespace (256 bytes each) */
static int policy_facts(berth_api_t *a, const char *id, char scope[256], char *owner, char *ns)
{
    const char *p[] = {id};
    json_t *v = berth_api_fetch(a, BERTH_Q_POL_GET, p, "policy");
    if (v == NULL)
        return -1;
    snprintf(scope, 256, "%s", json_string_value(json_object_get(v, "project_scope")) ?: "");
    if (owner != NULL)
        snprintf(owner, 256, "%s", json_string_value(json_object_get(v, "creator")) ?: "");
    if (ns != NULL)
        snprintf(ns, 256, "%s", json_string_value(json_object_get(v, "dest_namespace")) ?: "");
    json_decref(v);
    return 0;
}

/* Harbor's triggers: manual, event_based, or scheduled with a cron berthd runs (it never fires an invalid one, so a
 * policy saved with one would silently never run); NULL when `t` is fine or absent */
static const char *trigger_problem(json_t *t)
{
    if (t == NULL || json_is_null(t))
        return NULL;
    const char *type = json_string_value(json_object_get(t, "type"));
    if (type == NULL || (strcmp(type, "manual") != 0 && strcmp(type, "event_based") != 0 && strcmp(type, "scheduled") != 0))
        return "trigger.type must be manual, event_based or scheduled";
    const char *cron = json_string_value(json_object_get(json_object_get(t, "trigger_settings"), "cron"));
    if (strcmp(type, "scheduled") == 0 && (cron == NULL || !berth_repl_cron_valid(cron)))
        return "a scheduled trigger needs trigger_settings.cron: six fields (second minute hour day-of-month month "
               "day-of-week) or five, each *, ?, N or N-M (in range) with an optional /step";
    return NULL;
}

/* A policy body into the JSON the SQL takes; checks a delegated policy stays inside its project */
static json_t *policy_doc(berth_api_t *a, json_t *b, int create)
{
    json_t *d = json_object();
    static const char *const copy_keys[] = {"name",     "description", "dest_namespace",     "filters", "trigger",
                                            "override", "enabled",     "replicate_deletion", "speed",   "project_scope"};
    for (size_t i = 0; i < sizeof(copy_keys) / sizeof(copy_keys[0]); i++) {
        json_t *v = json_object_get(b, copy_keys[i]);
        if (v != NULL && !json_is_null(v))
            json_object_set(d, copy_keys[i], v);
    }
    const char *why = trigger_problem(json_object_get(d, "trigger"));
    if (why != NULL) {
        json_decref(d);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why);
        return NULL;
    }
    json_t *rc = json_object_get(b, "dest_namespace_replace_count");
    if (json_is_integer(rc))
        json_object_set(d, "replace_count", rc);
    else if (create && json_string_value(json_object_get(b, "dest_namespace")) != NULL)
        json_object_set_new(d, "replace_count", json_integer(1)); /* Harbor's default: the project is replaced */
    json_t *src = json_object_get(json_object_get(b, "src_registry"), "id"),
           *dst = json_object_get(json_object_get(b, "dest_registry"), "id");
    if (json_is_integer(src) && json_integer_value(src) > 0)
        json_object_set(d, "src", src);
    if (json_is_integer(dst) && json_integer_value(dst) > 0)
        json_object_set(d, "dst", dst);
    json_object_set_new(d, "creator", json_string(a->who.username));
    const char *name = json_string_value(json_object_get(d, "name"));
    if (create && (name == NULL || name[0] == '\0' || (json_object_get(d, "src") == NULL) == (json_object_get(d, "dst") == NULL))) {
        json_decref(d);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "a name and exactly one of src_registry and dest_registry are required");
        return NULL;
    }
    json_t *f = json_object_get(d, "filters"), *e;
    size_t i;
    const char *scope = json_string_value(json_object_get(d, "project_scope"));
    int confined = 0;
    json_array_foreach(f, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type")), *v = json_string_value(json_object_get(e, "value"));
        if (type == NULL ||
            (strcmp(type, "name") != 0 && strcmp(type, "tag") != 0 && strcmp(type, "label") != 0 &&
             strcmp(type, "resource") != 0) ||
            v == NULL) {
            json_decref(d);
            berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "filters are {type: name|tag|label|resource, value, decoration}");
            return NULL;
        }
        size_t sl = scope != NULL ? strlen(scope) : 0;
        if (scope != NULL && strcmp(type, "name") == 0 && strncmp(v, scope, sl) == 0 && v[sl] == '/' &&
            strpbrk(scope, "*?{") == NULL && json_string_value(json_object_get(e, "decoration")) == NULL)
            confined = 1;
    }
    if (scope != NULL && !confined) {
        json_decref(d);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "a policy delegated to project %s needs a name filter \"%s/…\"", scope, scope);
        return NULL;
    }
    return d;
}

static int list_policies(berth_api_t *a)
{
    char limit[24], offset[24], scope[256] = "";
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *ps = berth_api_param(a, "project_scope");
    if (ps != NULL)
        snprintf(scope, sizeof(scope), "%s", ps);
    if (!may_manage(a, scope))
        return deny(a);
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "name", "creation_time", "update_time"), sort) != 0)
        return -1;
    const char *p[] = {scope[0] ? scope : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_POL_LIST, p, limit, offset);
}

static int create_policy(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *sc = json_string_value(json_object_get(body, "project_scope"));
    if (!may_manage(a, sc)) {
        json_decref(body);
        return deny(a);
    }
    json_t *d = policy_doc(a, body, 1);
    json_decref(body);
    if (d == NULL)
        return -1;
    if (confined(a, a->who.username, sc, json_string_value(json_object_get(d, "dest_namespace"))) != 0) {
        json_decref(d);
        return -1;
    }
    char *doc = json_dumps(d, JSON_COMPACT);
    const char *p[] = {doc};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_POL_CREATE, p, &r);
    berth_api_audit(a, "create", "replication_policy", json_string_value(json_object_get(d, "name")), sc, rc == 0);
    if (rc == 0)
        berth_api_created(a, r.json, "id", "/api/v2.0/replication/policies");
    free(doc);
    json_decref(d);
    return rc;
}

/* The policy of the route: its scope into scope[256] if the caller may manage it; else answered, -1 */
static int policy_access(berth_api_t *a, char scope[256])
{
    if (policy_scope(a, berth_api_arg(a, "policy_id"), scope) != 0)
        return -1;
    return may_manage(a, scope) ? 0 : deny(a);
}

static int get_policy(berth_api_t *a)
{
    char scope[256] = "";
    if (policy_access(a, scope) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "policy_id")};
    return berth_api_object(a, BERTH_Q_POL_GET, p, "policy");
}

static int delete_policy(berth_api_t *a)
{
    char scope[256] = "";
    if (policy_access(a, scope) != 0)
        return -1;
    const char *id = berth_api_arg(a, "policy_id");
    const char *p[] = {id, NULL};
    return berth_api_delete(a, BERTH_Q_POL_DELETE, p, "replication_policy", id, NULL);
}

static int update_policy(berth_api_t *a)
{
    char scope[256] = "";
    if (policy_access(a, scope) != 0)
        return -1;
    const char *id = berth_api_arg(a, "policy_id");
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    if (scope[0]) /* a delegated policy stays in its project */
        json_object_set_new(body, "project_scope", json_string(scope));
    json_t *d = policy_doc(a, body, 0);
    json_decref(body);
    if (d == NULL)
        return -1;
    char owner[256], ns[256];
    if (policy_facts(a, id, scope, owner, ns) != 0 ||
        confined(a, owner, scope, json_string_value(json_object_get(d, "dest_namespace")) ?: ns) != 0) {
        json_decref(d);
        return -1;
    }
    char *doc = json_dumps(d, JSON_COMPACT);
    const char *p[] = {id, doc};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_POL_UPDATE, p, &r);
    free(doc);
    json_decref(d);
    if (rc != 0)
        return -1;
    return berth_api_empty(a, 200);
}

static int start_execution(berth_api_t *a)
{
    char scope[256] = "";
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    long long pid = (long long)json_integer_value(json_object_get(body, "policy_id"));
    json_decref(body);
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", pid);
    if (pid <= 0 || policy_scope(a, ids, scope) != 0)
        return pid <= 0 ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "policy_id is required") : -1;
    if (!may_manage(a, scope))
        return deny(a);
    long long eid;
    berth_err_t err;
    if (berth_repl_trigger(pid, "manual", &eid, &err) != 0)
        return berth_api_err(a, &err);
    berth_api_audit(a, "create", "replication_execution", ids, scope[0] ? scope : NULL, 1);
    if (eid == 0)
        return berth_api_fail(a, BERTH_OCI_CONFLICT, "the policy's previous execution is still running");
    berth_resp_header(a->resp, "location", "/api/v2.0/replication/executions/%lld", eid);
    return berth_api_empty(a, 201);
}

static int list_executions(berth_api_t *a)
{
    char limit[24], offset[24], scope[256] = "";
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char pid[24] = "";
    const char *v = berth_api_param(a, "policy_id");
    if (v != NULL && berth_api_id_ok(v))
        snprintf(pid, sizeof(pid), "%s", v);
    if (pid[0] && policy_scope(a, pid, scope) != 0)
        return -1;
    if (!may_manage(a, scope))
        return deny(a);
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "start_time", "end_time", "status"), sort) != 0)
        return -1;
    const char *p[] = {pid[0] ? pid : NULL, scope[0] && !a->who.sysadmin ? scope : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_EXEC_LIST, p, limit, offset);
}

/* The execution of the route, if the caller may manage its policy: 0 with its JSON in *json (caller frees) or
 * NULL when json is NULL; else answered, -1 */
static int execution_access(berth_api_t *a, char **json)
{
    const char *p[] = {berth_api_arg(a, "execution_id")};
    berth_db_json_t r;
    char scope[256] = "";
    if (berth_api_query(a, BERTH_Q_EXEC_GET, p, &r) != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "execution not found");
    json_t *ex = json_loads(r.json, 0, NULL);
    char pid[24];
    snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(json_object_get(ex, "policy_id")));
    json_decref(ex);
    if (policy_scope(a, pid, scope) != 0 || !may_manage(a, scope)) {
        free(r.json);
        return a->resp->status == 200 ? deny(a) : -1;
    }
    if (json != NULL)
        *json = r.json;
    else
        free(r.json);
    return 0;
}

static int get_execution(berth_api_t *a)
{
    char *json = NULL;
    if (execution_access(a, &json) != 0)
        return -1;
    return berth_api_json(a, 200, json);
}

static int stop_execution(berth_api_t *a)
{
    if (execution_access(a, NULL) != 0)
        return -1;
    const char *p[] = {berth_api_arg(a, "execution_id")};
    berth_db_json_t s;
    if (berth_api_query(a, BERTH_Q_EXEC_STOP, p, &s) != 0)
        return -1;
    free(s.json); /* the new status; none when it had already ended */
    return berth_api_empty(a, 200);
}

static int list_tasks(berth_api_t *a)
{
    char limit[24], offset[24];
    if (execution_access(a, NULL) != 0 || berth_api_page(a, limit, offset) != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "start_time", "end_time", "status", "resource"), sort) != 0)
        return -1;
    const char *tp[] = {berth_api_arg(a, "execution_id"), limit, offset, sort};
    return berth_api_list(a, BERTH_Q_TASK_LIST, tp, limit, offset);
}

static int task_log(berth_api_t *a)
{
    if (execution_access(a, NULL) != 0)
        return -1;
    const char *lp[] = {berth_api_arg(a, "execution_id"), berth_api_arg(a, "task_id")};
    berth_db_json_t l;
    if (berth_api_query(a, BERTH_Q_TASK_LOG, lp, &l) != 0)
        return -1;
    return berth_api_text(a, l.json, "task not found");
}

#define E "/replication/executions/{execution_id}"

/* Policies and executions are "login" rows the handlers narrow (+): a system admin, or a project admin of the
 * policy's project_scope (may_manage). */
const berth_api_route_t berth_api_replication_routes[] = {
    BERTH_API_ROUTE("GET", "/registries", BERTH_API_P_ADMIN, list_registries, "listRegistries"),
    BERTH_API_ROUTE("POST", "/registries", BERTH_API_P_ADMIN, create_registry, "createRegistry"),
    BERTH_API_ROUTE("POST", "/registries/ping", BERTH_API_P_ADMIN, ping_registry, "pingRegistry"),
    BERTH_API_ROUTE("GET", "/registries/{registry_id}", BERTH_API_P_ADMIN, get_registry, "getRegistry"),
    BERTH_API_ROUTE("PUT", "/registries/{registry_id}", BERTH_API_P_ADMIN, update_registry, "updateRegistry"),
    BERTH_API_ROUTE("DELETE", "/registries/{registry_id}", BERTH_API_P_ADMIN, delete_registry, "deleteRegistry"),
    BERTH_API_ROUTE("GET", "/replication/policies", BERTH_API_P_LOGIN, list_policies, "listReplicationPolicies"),       /* (+) */
    BERTH_API_ROUTE("POST", "/replication/policies", BERTH_API_P_LOGIN, create_policy, "createReplicationPolicy"),      /* (+) */
    BERTH_API_ROUTE("GET", "/replication/policies/{policy_id}", BERTH_API_P_LOGIN, get_policy, "getReplicationPolicy"), /* (+) */
    BERTH_API_ROUTE("PUT", "/replication/policies/{policy_id}", BERTH_API_P_LOGIN, update_policy,
                    "updateReplicationPolicy"), /* (+) */
    BERTH_API_ROUTE("DELETE", "/replication/policies/{policy_id}", BERTH_API_P_LOGIN, delete_policy,
                    "deleteReplicationPolicy"),                                                                         /* (+) */
    BERTH_API_ROUTE("GET", "/replication/executions", BERTH_API_P_LOGIN, list_executions, "listReplicationExecutions"), /* (+) */
    BERTH_API_ROUTE("POST", "/replication/executions", BERTH_API_P_LOGIN, start_execution, "startReplication"),         /* (+) */
    BERTH_API_ROUTE("GET", E, BERTH_API_P_LOGIN, get_execution, "getReplicationExecution"),                             /* (+) */
    BERTH_API_ROUTE("PUT", E, BERTH_API_P_LOGIN, stop_execution, "stopReplication"),                                    /* (+) */
    BERTH_API_ROUTE("GET", E "/tasks", BERTH_API_P_LOGIN, list_tasks, "listReplicationTasks"),                          /* (+) */
    BERTH_API_ROUTE("GET", E "/tasks/{task_id}/log", BERTH_API_P_LOGIN, task_log, "getReplicationLog"),                 /* (+) */
    BERTH_API_ROUTES_END,
};

#undef E
