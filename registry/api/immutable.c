/*
 * Harbor's immutable tag rules, /api/v2.0/projects/{project_name_or_id}/immutabletagrules: up to 15 per project,
 * each a repository selector and a tag selector (core/selector.h). Project admins manage them, members read them.
 * What they protect is enforced where tags change (sql/immutable.c), not here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/selector.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

static void project_id(berth_api_t *a, char pid[24])
{
    snprintf(pid, 24, "%lld", (long long)a->z.project_id);
}

static int list_rules(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    project_id(a, pid);
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *p[] = {pid, limit, offset};
    return berth_api_list(a, BERTH_Q_IMM_LIST, p, limit, offset);
}

typedef struct {
    char priority[24];
    const char *disabled;
    char *scope, *tags; /* JSON text, malloc'd */
} rule_body_t;

static void body_dispose(rule_body_t *b)
{
    free(b->scope);
    free(b->tags);
}

/* The rule of a POST or PUT body, checked as Harbor checks it; 0, or answered 400 (-1). */
static int read_rule(berth_api_t *a, rule_body_t *out)
{
    memset(out, 0, sizeof(*out));
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const json_t *prio = json_object_get(body, "priority"), *dis = json_object_get(body, "disabled");
    const char *action = json_string_value(json_object_get(body, "action"));
    const char *tmpl = json_string_value(json_object_get(body, "template"));
    const json_t *scope = json_object_get(body, "scope_selectors"), *tags = json_object_get(body, "tag_selectors");
    char why[200] = "";
    berth_rule_sel_t sel = {0};
    if (prio != NULL && !json_is_null(prio) &&
        (!json_is_integer(prio) || json_integer_value(prio) < -1000000 || json_integer_value(prio) > 1000000))
        snprintf(why, sizeof(why), "priority must be an integer");
    else if (dis != NULL && !json_is_null(dis) && !json_is_boolean(dis))
        snprintf(why, sizeof(why), "disabled must be true or false");
    else if (action != NULL && strcmp(action, "immutable") != 0)
        snprintf(why, sizeof(why), "action must be immutable");
    else if (tmpl != NULL && strcmp(tmpl, "immutable_template") != 0)
        snprintf(why, sizeof(why), "template must be immutable_template");
    else if (berth_rule_sel_parse(&sel, scope, tags, why, sizeof(why)) == 0)
        why[0] = '\0';
    berth_rule_sel_dispose(&sel);
    if (why[0] == '\0') {
        snprintf(out->priority, sizeof(out->priority), "%lld", json_is_integer(prio) ? (long long)json_integer_value(prio) : 0LL);
        out->disabled = json_is_true(dis) ? "true" : "false";
        out->scope = json_dumps(scope, JSON_COMPACT);
        out->tags = json_dumps(tags, JSON_COMPACT);
    }
    json_decref(body);
    return why[0] == '\0' ? 0 : berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why);
}

/* POST (id NULL) and PUT /{immutable_rule_id}: one body, one answer each */
static int write_rule(berth_api_t *a, const char *id)
{
    rule_body_t b;
    if (read_rule(a, &b) != 0)
        return -1;
    char pid[24];
    project_id(a, pid);
    const char *cp[] = {pid, b.priority, b.disabled, b.scope, b.tags}, *up[] = {pid, id, b.priority, b.disabled, b.scope, b.tags};
    berth_db_json_t r;
    int rc = berth_api_query(a, id == NULL ? BERTH_Q_IMM_CREATE : BERTH_Q_IMM_UPDATE, id == NULL ? cp : up, &r);
    body_dispose(&b);
    if (rc != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    char rid[24];
    snprintf(rid, sizeof(rid), "%lld",
             id != NULL ? strtoll(id, NULL, 10) : (long long)json_integer_value(json_object_get(v, "id")));
    json_decref(v);
    berth_api_audit(a, id == NULL ? "create" : "update", "immutable_rule", r.json != NULL ? rid : a->project, a->project,
                    r.json != NULL);
    if (r.json == NULL)
        return id == NULL ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "a project has at most 15 immutable tag rules")
                          : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "immutable tag rule not found");
    if (id != NULL) {
        free(r.json);
        return berth_api_empty(a, 200);
    }
    char prefix[400];
    snprintf(prefix, sizeof(prefix), "/api/v2.0/projects/%s/immutabletagrules", a->project);
    return berth_api_created(a, r.json, "id", prefix);
}

static int create_rule(berth_api_t *a)
{
    return write_rule(a, NULL);
}

static int update_rule(berth_api_t *a)
{
    return write_rule(a, berth_api_arg(a, "immutable_rule_id"));
}

static int delete_rule(berth_api_t *a)
{
    char pid[24];
    project_id(a, pid);
    const char *id = berth_api_arg(a, "immutable_rule_id");
    const char *p[] = {pid, id};
    return berth_api_delete(a, BERTH_Q_IMM_DELETE, p, "immutable_rule", id, a->project);
}

#define P "/projects/{project_name_or_id}/immutabletagrules"

const berth_api_route_t berth_api_immutable_routes[] = {
    BERTH_API_ROUTE("GET", P, BERTH_API_P_PROJECT(IMMUTABLE_TAG, LIST), list_rules, "ListImmuRules"),
    BERTH_API_ROUTE("POST", P, BERTH_API_P_PROJECT(IMMUTABLE_TAG, CREATE), create_rule, "CreateImmuRule"),
    BERTH_API_ROUTE("PUT", P "/{immutable_rule_id}", BERTH_API_P_PROJECT(IMMUTABLE_TAG, UPDATE), update_rule, "UpdateImmuRule"),
    BERTH_API_ROUTE("DELETE", P "/{immutable_rule_id}", BERTH_API_P_PROJECT(IMMUTABLE_TAG, DELETE), delete_rule, "DeleteImmuRule"),
    BERTH_API_ROUTES_END,
};

#undef P
