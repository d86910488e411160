/*
 * /api/v2.0/projects/{project_name_or_id}/webhook/...: Harbor's notification policies, their executions (one per
 * event a policy delivered), tasks (one per target) and task logs. Project admins manage their project's
 * policies, maintainers read them, system admins everything (auth/rbac.c, resource notification-policy).
 * Beyond Harbor: every policy has a signing secret, answered once at creation and sealed at rest, and an
 * execution can be delivered again (.../executions/{id}/retry) with the same event id.
 */
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "replication/replication.h"
#include "webhook/webhook.h"

#define CA_FILE_SYSADMIN "only system admins set ca_file (a path on the server)"

static void project_id(berth_api_t *a, char pid[24])
{
    snprintf(pid, 24, "%lld", (long long)a->z.project_id);
}

/* The path's ids ({webhook_policy_id}, {execution_id}, {task_id}): anything but a database id is no such object */
static int ids_ok(berth_api_t *a, const char *const *names)
{
    for (; *names != NULL; names++)
        if (!berth_api_id_ok(berth_api_arg(a, *names)))
            return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", *names), 0;
    return 1;
}
#define IDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/*
 * A policy body into the SQL's parameters: the event types and targets as JSON (auth headers sealed), checked.
 * `create` requires every field Harbor requires; an update keeps what is absent. Answers 400 and returns -1.
 */
typedef struct {
    const char *name, *description, *ca_file;
    int enabled;                 /* -1 absent */
    char *event_types, *targets; /* JSON text (malloc'd) or NULL */
} policy_in_t;

static void policy_in_dispose(policy_in_t *in)
{
    free(in->event_types);
    free(in->targets);
}

/* what a header value may hold: no control bytes (CR and LF would split it, others no receiver expects) */
static int header_value_ok(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++)
        if ((*p < ' ' && *p != '\t') || *p == 0x7f)
            return 0;
    return 1;
}

static int policy_in(berth_api_t *a, json_t *b, int create, policy_in_t *in)
{
    memset(in, 0, sizeof(*in));
    in->enabled = -1;
    json_t *v;
    if ((v = json_object_get(b, "name")) != NULL) {
        in->name = json_string_value(v);
        if (in->name == NULL || in->name[0] == '\0' || strlen(in->name) > 256)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "name must be a non-empty string of at most 256 bytes"), -1;
    } else if (create)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "name is required"), -1;
    if ((v = json_object_get(b, "description")) != NULL && !json_is_null(v) &&
        ((in->description = json_string_value(v)) == NULL || strlen(in->description) > 4096))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "description must be a string of at most 4096 bytes"), -1;
    if ((v = json_object_get(b, "ca_file")) != NULL && !json_is_null(v) &&
        ((in->ca_file = json_string_value(v)) == NULL || (in->ca_file[0] != '\0' && in->ca_file[0] != '/')))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "ca_file must be an absolute path of a PEM file on the server"), -1;
    if ((v = json_object_get(b, "enabled")) != NULL && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "enabled must be true or false"), -1;
        in->enabled = json_is_true(v);
    }
    json_t *types = json_object_get(b, "event_types");
    if (types != NULL || create) {
        size_t i;
        json_t *t;
        if (!json_is_array(types) || json_array_size(types) == 0 || json_array_size(types) > 32)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "event_types must list at least one event type"), -1;
        json_array_foreach(types, i, t)
        {
            if (!json_is_string(t) || !berth_webhook_event_type_known(json_string_value(t)))
                return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "unknown event type (GET .../webhook/events lists them)"), -1;
        }
        in->event_types = json_dumps(types, JSON_COMPACT);
    }
    json_t *targets = json_object_get(b, "targets");
    if (targets == NULL && !create)
        return 0;
    if (!json_is_array(targets) || json_array_size(targets) == 0 || json_array_size(targets) > 8)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "targets must list one to eight targets"), -1;
    json_t *out = json_array(), *t;
    size_t i;
    json_array_foreach(targets, i, t)
    {
        const char *type = json_string_value(json_object_get(t, "type"));
        const char *addr = json_string_value(json_object_get(t, "address"));
        const char *fmt = json_string_value(json_object_get(t, "payload_format"));
        const char *auth = json_string_value(json_object_get(t, "auth_header"));
        json_t *skip = json_object_get(t, "skip_cert_verify");
        const char *why = NULL;
        if (type != NULL && strcmp(type, "http") != 0)
            why = "target type must be http";
        else if (addr == NULL)
            why = "target address must be an http:// or https:// URL";
        else if ((why = berth_webhook_address_refused(addr)) != NULL)
            ;
        else if (fmt != NULL && fmt[0] != '\0' && strcmp(fmt, "Default") != 0 && strcmp(fmt, "CloudEvents") != 0)
            why = "payload_format must be Default or CloudEvents";
        else if (skip != NULL && !json_is_null(skip) && !json_is_boolean(skip))
            why = "skip_cert_verify must be true or false";
        else if (auth != NULL && (strlen(auth) > 4096 || !header_value_ok(auth)))
            why = "auth_header must be one line of printable characters";
        if (why != NULL) {
            json_decref(out);
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why), -1;
        }
        json_t *row = json_pack("{s:s, s:s, s:b, s:s}", "type", "http", "address", addr, "skip_cert_verify", json_is_true(skip),
                                "payload_format", fmt != NULL && fmt[0] != '\0' ? fmt : "Default");
        if (auth != NULL && strcmp(auth, "*****") == 0) {
            json_object_set_new(row, "keep_auth", json_true()); /* the masked value we answered: keep the stored one */
        } else if (auth != NULL && auth[0] != '\0') {
            char *sealed = berth_repl_seal(auth);
            if (sealed == NULL) {
                json_decref(row);
                json_decref(out);
                return berth_api_fail(a, BERTH_OCI_INTERNAL, "cannot seal the auth header"), -1;
            }
            json_object_set_new(row, "auth_sealed", json_string(sealed));
            free(sealed);
        }
        json_array_append_new(out, row);
    }
    in->targets = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return 0;
}

static const char *flag(int v)
{
    return v < 0 ? NULL : v ? "true" : "false";
}

static int list_policies(berth_api_t *a)
{
    char pid[24], limit[24], offset[24], sort[40];
    if (berth_api_page(a, limit, offset) != 0 ||
        berth_api_sort(a, BERTH_API_SORTS("id", "name", "creation_time", "update_time"), sort) != 0)
        return -1;
    project_id(a, pid);
    const char *p[] = {pid, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_WH_POL_LIST, p, limit, offset);
}

/* 201 with Location and, once, the signing secret (beyond Harbor, which has none): {"id", "secret"} */
static int create_policy(berth_api_t *a)
{
    json_t *b = berth_api_body(a);
    if (b == NULL)
        return -1;
    policy_in_t in;
    if (policy_in(a, b, 1, &in) != 0) {
        policy_in_dispose(&in);
        json_decref(b);
        return -1;
    }
    unsigned char raw[32];
    char secret[2 * sizeof(raw) + 1];
    RAND_bytes(raw, sizeof(raw));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(secret + 2 * i, 3, "%02x", raw[i]);
    OPENSSL_cleanse(raw, sizeof(raw));
    char *sealed = berth_repl_seal(secret), pid[24];
    project_id(a, pid);
    int rc = -1;
    if (in.ca_file != NULL && in.ca_file[0] != '\0' && !a->who.sysadmin) {
        berth_api_fail(a, BERTH_OCI_DENIED, CA_FILE_SYSADMIN);
    } else if (sealed == NULL) {
        berth_api_fail(a, BERTH_OCI_INTERNAL, "cannot seal the policy secret");
    } else {
        const char *p[] = {pid,
                           in.name,
                           in.description,
                           flag(in.enabled),
                           in.event_types,
                           in.targets,
                           sealed,
                           in.ca_file,
                           a->authed ? a->who.username : ""};
        berth_db_json_t r;
        if (berth_api_query(a, BERTH_Q_WH_POL_CREATE, p, &r) == 0) {
            json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
            long long id = json_integer_value(json_object_get(v, "id"));
            json_decref(v);
            free(r.json);
            berth_resp_header(a->resp, "location", "/api/v2.0/projects/%s/webhook/policies/%lld", pid, id);
            rc = berth_api_jsonv(a, 201, json_pack("{s:I, s:s}", "id", (json_int_t)id, "secret", secret));
        }
    }
    berth_api_audit(a, "create", "webhook_policy", in.name, a->project, rc == 0);
    OPENSSL_cleanse(secret, sizeof(secret));
    free(sealed);
    policy_in_dispose(&in);
    json_decref(b);
    return rc;
}

static int get_policy(berth_api_t *a)
{
    char pid[24];
    if (!ids_ok(a, IDS("webhook_policy_id")))
        return -1;
    project_id(a, pid);
    const char *p[] = {pid, berth_api_arg(a, "webhook_policy_id")};
    return berth_api_object(a, BERTH_Q_WH_POL_GET, p, "webhook policy");
}

/*
 * What a PUT may not do that a project admin could otherwise do (0, or answered): send the masked auth header
 * ("*****") back for a target whose address changed, which would deliver a header someone else stored to an
 * address of the caller's choosing (the SQL keeps a header only at an unchanged address, this says why), or set
 * ca_file, a path on the server, unless a system admin (the value stored may be sent back unchanged).
 */
static int update_allowed(berth_api_t *a, json_t *b, const policy_in_t *in, const char *pid, const char *id)
{
    const char *p[] = {pid, id};
    json_t *cur = berth_api_fetch(a, BERTH_Q_WH_POL_GET, p, "webhook policy");
    if (cur == NULL)
        return -1;
    int rc = 0;
    const char *ca = json_string_value(json_object_get(cur, "ca_file"));
    if (in->ca_file != NULL && !a->who.sysadmin && strcmp(in->ca_file, ca != NULL ? ca : "") != 0)
        rc = berth_api_fail(a, BERTH_OCI_DENIED, CA_FILE_SYSADMIN);
    json_t *t, *old = json_object_get(cur, "targets");
    size_t i;
    json_array_foreach(json_object_get(b, "targets"), i, t)
    {
        const char *auth = json_string_value(json_object_get(t, "auth_header"));
        const char *was = json_string_value(json_object_get(json_array_get(old, i), "address"));
        if (rc == 0 && auth != NULL && strcmp(auth, "*****") == 0 &&
            (was == NULL || strcmp(was, json_string_value(json_object_get(t, "address"))) != 0))
            rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "auth_header must be given again when a target's address changes");
    }
    json_decref(cur);
    return rc;
}

/* PUT: Harbor sends the whole policy; absent fields are kept here. Enabling and disabling is this with "enabled". */
static int update_policy(berth_api_t *a)
{
    if (!ids_ok(a, IDS("webhook_policy_id")))
        return -1;
    json_t *b = berth_api_body(a);
    if (b == NULL)
        return -1;
    policy_in_t in;
    int rc = -1;
    char pid[24];
    project_id(a, pid);
    const char *id = berth_api_arg(a, "webhook_policy_id");
    if (policy_in(a, b, 0, &in) == 0) {
        const char *p[] = {pid, id, in.name, in.description, flag(in.enabled), in.event_types, in.targets, in.ca_file};
        berth_db_json_t r;
        if (update_allowed(a, b, &in, pid, id) == 0 && berth_api_query(a, BERTH_Q_WH_POL_UPDATE, p, &r) == 0) {
            free(r.json);
            rc = r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "webhook policy not found");
        }
        berth_api_audit(a, "update", "webhook_policy", in.name != NULL ? in.name : id, a->project, rc == 0);
    }
    policy_in_dispose(&in);
    json_decref(b);
    return rc;
}

static int delete_policy(berth_api_t *a)
{
    char pid[24];
    if (!ids_ok(a, IDS("webhook_policy_id")))
        return -1;
    project_id(a, pid);
    const char *id = berth_api_arg(a, "webhook_policy_id");
    const char *p[] = {pid, id};
    return berth_api_delete(a, BERTH_Q_WH_POL_DELETE, p, "webhook policy", id, a->project);
}

/* Harbor's SupportedWebhookEventTypes */
static int list_events(berth_api_t *a)
{
    json_t *types = json_array();
    for (const char *const *t = berth_webhook_event_types; *t != NULL; t++)
        json_array_append_new(types, json_string(*t));
    return berth_api_jsonv(a, 200,
                           json_pack("{s:o, s:[s], s:[{s:s, s:[s, s]}]}", "event_type", types, "notify_type", "http",
                                     "payload_formats", "notify_type", "http", "formats", "Default", "CloudEvents"));
}

static int list_executions(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    if (!ids_ok(a, IDS("webhook_policy_id")) || berth_api_page(a, limit, offset) != 0)
        return -1;
    project_id(a, pid);
    const char *p[] = {pid, berth_api_arg(a, "webhook_policy_id"), limit, offset};
    return berth_api_list(a, BERTH_Q_WH_EXEC_LIST, p, limit, offset);
}

static int list_tasks(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    if (!ids_ok(a, IDS("webhook_policy_id", "execution_id")) || berth_api_page(a, limit, offset) != 0)
        return -1;
    project_id(a, pid);
    const char *p[] = {pid, berth_api_arg(a, "webhook_policy_id"), berth_api_arg(a, "execution_id"), limit, offset};
    return berth_api_list(a, BERTH_Q_WH_TASK_LIST, p, limit, offset);
}

/* text/plain, as Harbor answers a task log */
static int task_log(berth_api_t *a)
{
    char pid[24];
    if (!ids_ok(a, IDS("webhook_policy_id", "execution_id", "task_id")))
        return -1;
    project_id(a, pid);
    const char *p[] = {pid, berth_api_arg(a, "webhook_policy_id"), berth_api_arg(a, "execution_id"), berth_api_arg(a, "task_id")};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_WH_TASK_LOG, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    free(r.json);
    if (!json_is_string(v)) {
        json_decref(v);
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "task not found");
    }
    size_t len = json_string_length(v);
    char *text = malloc(len + 1);
    memcpy(text, json_string_value(v), len + 1);
    json_decref(v);
    berth_resp_body(a->resp, 200, text, len, "text/plain; charset=utf-8");
    return 0;
}

/* Beyond Harbor: deliver a finished execution again (the receiver sees the same event id) */
static int retry_execution(berth_api_t *a)
{
    char pid[24];
    if (!ids_ok(a, IDS("webhook_policy_id", "execution_id")))
        return -1;
    project_id(a, pid);
    const char *eid = berth_api_arg(a, "execution_id");
    const char *p[] = {pid, berth_api_arg(a, "webhook_policy_id"), eid, a->authed ? a->who.username : ""};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_WH_EXEC_RETRY, p, &r) != 0)
        return -1;
    free(r.json);
    berth_api_audit(a, "update", "webhook_execution", eid, a->project, r.affected > 0);
    if (r.affected == 0)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "no finished execution %s of this policy", eid);
    berth_webhook_wake();
    return berth_api_empty(a, 200);
}

#define W "/projects/{project_name_or_id}/webhook"
#define WP W "/policies/{webhook_policy_id}"

const berth_api_route_t berth_api_webhook_routes[] = {
    BERTH_API_ROUTE("GET", W "/policies", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, LIST), list_policies,
                    "ListWebhookPoliciesOfProject"),
    BERTH_API_ROUTE("POST", W "/policies", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, CREATE), create_policy,
                    "CreateWebhookPolicyOfProject"),
    BERTH_API_ROUTE("GET", WP, BERTH_API_P_PROJECT(NOTIFICATION_POLICY, READ), get_policy, "GetWebhookPolicyOfProject"),
    BERTH_API_ROUTE("PUT", WP, BERTH_API_P_PROJECT(NOTIFICATION_POLICY, UPDATE), update_policy, "UpdateWebhookPolicyOfProject"),
    BERTH_API_ROUTE("DELETE", WP, BERTH_API_P_PROJECT(NOTIFICATION_POLICY, DELETE), delete_policy, "DeleteWebhookPolicyOfProject"),
    BERTH_API_ROUTE("GET", WP "/executions", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, LIST), list_executions,
                    "ListExecutionsOfWebhookPolicy"),
    BERTH_API_ROUTE("POST", WP "/executions/{execution_id}/retry", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, UPDATE),
                    retry_execution, "RetryExecutionOfWebhookPolicy"),
    BERTH_API_ROUTE("GET", WP "/executions/{execution_id}/tasks", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, LIST), list_tasks,
                    "ListTasksOfWebhookExecution"),
    BERTH_API_ROUTE("GET", WP "/executions/{execution_id}/tasks/{task_id}/log", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, READ),
                    task_log, "GetLogsOfWebhookTask"),
    BERTH_API_ROUTE("GET", W "/events", BERTH_API_P_PROJECT(NOTIFICATION_POLICY, READ), list_events, "GetSupportedEventTypes"),
    BERTH_API_ROUTES_END,
};

#undef W
#undef WP
