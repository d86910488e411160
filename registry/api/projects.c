/* /api/v2.0/projects and everything under a project: members, logs, repositories, artifacts, tags, robots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/events.h"
#include "registry/service/quota.h"
#include "registry/service/sqfs_gateway.h"
#include "sql/registry.h"

/* caller facts as query parameters: $1 id, $2 admin, $3 robot */
typedef struct {
    char id[24];
    const char *admin, *robot;
} caller_t;

static void caller(berth_api_t *a, caller_t *c)
{
    snprintf(c->id, sizeof(c->id), "%lld", a->authed ? (long long)a->who.id : 0LL);
    c->admin = a->authed && a->who.sysadmin ? "true" : "false";
    c->robot = a->authed && a->who.robot ? "true" : "false";
}

static int list_projects(berth_api_t *a)
{
    char limit[24], offset[24], exact[256] = "", fuzzy[256] = "", pub[8] = "", owner[256] = "";
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    caller_t c;
    caller(a, &c);
    const char *v;
    int t = berth_api_qterm(a, "name", exact, sizeof(exact));
    if (t == 2) {
        snprintf(fuzzy, sizeof(fuzzy), "%s", exact);
        exact[0] = '\0';
    }
    if ((v = berth_api_param(a, "name")) != NULL)
        snprintf(fuzzy, sizeof(fuzzy), "%s", v);
    if (berth_api_qterm(a, "public", pub, sizeof(pub)) == 0 && (v = berth_api_param(a, "public")) != NULL)
        snprintf(pub, sizeof(pub), "%s", v);
    if (pub[0] != '\0' && strcmp(pub, "true") != 0 && strcmp(pub, "false") != 0)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "public must be true or false");
    if ((v = berth_api_param(a, "owner")) != NULL)
        snprintf(owner, sizeof(owner), "%s", v);
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("name", "creation_time", "update_time", "repo_count"), sort) != 0)
        return -1;
    const char *p[] = {
        c.id,  c.admin, c.robot, exact[0] ? exact : NULL, fuzzy[0] ? fuzzy : NULL, pub[0] ? pub : NULL, owner[0] ? owner : NULL,
        limit, offset,  sort};
    return berth_api_list(a, BERTH_Q_PROJECTS_LIST, p, limit, offset);
}

/* Harbor's project name rule: lowercase alphanumerics separated by single '.', '_' or '-' */
static int project_name_ok(const char *n)
{
    size_t len = strlen(n);
    return len >= 1 && len <= 255 && strchr(n, '/') == NULL && berth_ref_name_valid(n, len);
}

static int public_flag(json_t *body)
{
    json_t *pub = json_object_get(body, "public");
    json_t *meta = json_object_get(json_object_get(body, "metadata"), "public");
    if (json_is_boolean(pub))
        return json_is_true(pub);
    if (json_is_string(meta))
        return strcmp(json_string_value(meta), "true") == 0;
    if (json_is_boolean(meta))
        return json_is_true(meta);
    return -1;
}

/* metadata.proxy_speed_kb as Harbor sends it (a string, or a number): "" when absent, 0 or -1 when invalid */
static int proxy_speed(json_t *v, char out[24])
{
    long long kb;
    char *end = NULL;
    out[0] = '\0';
    if (v == NULL)
        return 0;
    const char *s = json_string_value(v);
    if (json_is_integer(v))
        kb = json_integer_value(v);
    else if (s != NULL && json_string_length(v) < 20 &&
             strspn(s + (s[0] == '-'), "0123456789") > 0) /* strtoll alone takes " 7", "+7" */
        kb = strtoll(s, &end, 10);
    else
        return -1;
    if ((end != NULL && *end != '\0') || (kb != -1 && (kb < 1 || kb > (1LL << 40))))
        return -1;
    snprintf(out, 24, "%lld", kb);
    return 0;
}

static int create_project(berth_api_t *a)
{
    if (!a->who.sysadmin && (a->who.robot || berth_api_conf->project_creation_admin_only))
        return berth_api_fail(a, BERTH_OCI_DENIED, "only system administrators may create projects");
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *name = json_string_value(json_object_get(body, "project_name"));
    if (name == NULL || !project_name_ok(name)) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                              "project_name must be lowercase letters and digits separated by '.', '_' or '-'");
    }
    int pub = public_flag(body);
    /* Harbor's rule: storage_limit is bytes or -1; absent, 0 or set by a caller who is not a system admin, the
       project gets quota.default_storage_limit */
    json_t *sl = json_object_get(body, "storage_limit");
    if (sl != NULL && !json_is_null(sl) && (!json_is_integer(sl) || !berth_quota_limit_ok(json_integer_value(sl)))) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "storage_limit must be bytes from 0 to %lld, or -1 for unlimited",
                              BERTH_QUOTA_MAX);
    }
    long long limit = json_is_integer(sl) && json_integer_value(sl) != 0 && a->who.sysadmin
                          ? (long long)json_integer_value(sl)
                          : (long long)berth_quota_default_limit();
    char limbuf[24];
    snprintf(limbuf, sizeof(limbuf), "%lld", limit);
    char owner[24], registry[24] = "", speed[24] = "";
    snprintf(owner, sizeof(owner), "%lld", (long long)a->who.id);
    /* a proxy cache (registry_id) pulls with an endpoint's credentials: endpoints are the system admin's */
    json_t *rid = json_object_get(body, "registry_id");
    if (rid != NULL && !json_is_null(rid)) {
        if (!json_is_integer(rid) || json_integer_value(rid) < 1) {
            json_decref(body);
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "registry_id must be the id of a registry endpoint");
        }
        if (!a->who.sysadmin) {
            json_decref(body);
            return berth_api_fail(a, BERTH_OCI_DENIED, "only system administrators may create proxy-cache projects");
        }
        snprintf(registry, sizeof(registry), "%lld", (long long)json_integer_value(rid));
    }
    if (proxy_speed(json_object_get(json_object_get(body, "metadata"), "proxy_speed_kb"), speed) != 0) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.proxy_speed_kb must be -1 or a positive number of KiB/s");
    }
    const char *p[] = {
        name,  pub == 1 ? "true" : "false", a->who.robot ? NULL : owner, registry[0] ? registry : NULL, speed[0] ? speed : NULL,
        limbuf};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_PROJECT_CREATE, p, &r);
    berth_api_audit(a, "create", "project", name, name, rc == 0 && r.json != NULL);
    json_decref(body);
    if (rc != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "registry_id %s is not a registry endpoint", registry);
    return berth_api_created(a, r.json, "project_id", "/api/v2.0/projects");
}

static int head_project(berth_api_t *a)
{
    const char *name = berth_api_param(a, "project_name");
    if (name == NULL)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "project_name is required");
    char n[256];
    snprintf(n, sizeof(n), "%s", name);
    berth_authz_t z;
    berth_err_t err;
    if (berth_authz_project(a->c, &a->who, n, &z, &err) != 0)
        return berth_api_err(a, &err);
    /* a private project the caller cannot read answers as an absent one: existence does not leak */
    return berth_api_empty(a, z.exists && berth_authz_can(&z, BERTH_RES_PROJECT, BERTH_ACT_READ) ? 200 : 404);
}

static int get_project(berth_api_t *a)
{
    caller_t c;
    caller(a, &c);
    const char *p[] = {c.id, c.robot, a->project};
    return berth_api_object(a, BERTH_Q_PROJECT_GET, p, "project");
}

/* the project's id as a query parameter */
static void project_id(berth_api_t *a, char pid[24])
{
    snprintf(pid, 24, "%lld", (long long)a->z.project_id);
}

static int update_project(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    int pub = public_flag(body);
    char isa[16] = "";
    const char *ip = json_string_value(json_object_get(json_object_get(body, "metadata"), "isa_policy"));
    if (ip != NULL)
        snprintf(isa, sizeof(isa), "%s", ip);
    const char *rs = json_string_value(json_object_get(json_object_get(body, "metadata"), "isa_require_scan_pass"));
    int scan = rs == NULL ? -1 : strcmp(rs, "true") == 0 ? 1 : strcmp(rs, "false") == 0 ? 0 : -2;
    char speed[24];
    int speed_bad = proxy_speed(json_object_get(json_object_get(body, "metadata"), "proxy_speed_kb"), speed);
    char sq[8] = "", sqtags[1024] = "";
    int sqtags_set = 0;
    const char *sm = json_string_value(json_object_get(json_object_get(body, "metadata"), "hpc_squashfs"));
    const char *st = json_string_value(json_object_get(json_object_get(body, "metadata"), "hpc_squashfs_tags"));
    if (sm != NULL)
        snprintf(sq, sizeof(sq), "%s", strlen(sm) < sizeof(sq) ? sm : "?");
    if (st != NULL && strlen(st) < sizeof(sqtags)) {
        snprintf(sqtags, sizeof(sqtags), "%s", st);
        sqtags_set = 1;
    } else if (st != NULL)
        sqtags_set = -1;
    json_decref(body);
    if (speed_bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.proxy_speed_kb must be -1 or a positive number of KiB/s");
    if (sq[0] && strcmp(sq, "off") != 0 && strcmp(sq, "push") != 0 && strcmp(sq, "pull") != 0)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.hpc_squashfs must be off, push or pull");
    const char *why = NULL;
    if (sqtags_set < 0 || (sqtags_set && berth_sqfs_gateway_patterns_check(sqtags, &why) != 0))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.hpc_squashfs_tags: %s",
                              sqtags_set < 0 ? "longer than 1023 bytes" : why);
    if (scan == -2)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.isa_require_scan_pass must be \"true\" or \"false\"");
    if (isa[0] && strcmp(isa, "off") != 0 && strcmp(isa, "warn") != 0 && strcmp(isa, "strict") != 0)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.isa_policy must be off, warn or strict");
    char id[24];
    project_id(a, id);
    const char *p[] = {id,
                       pub < 0 ? NULL
                       : pub   ? "true"
                               : "false",
                       isa[0] ? isa : NULL,
                       scan < 0 ? NULL
                       : scan   ? "true"
                                : "false",
                       speed[0] ? speed : NULL,
                       sq[0] ? sq : NULL,
                       sqtags_set ? sqtags : NULL};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_PROJECT_UPDATE, p, &r) != 0)
        return -1;
    free(r.json);
    berth_api_audit(a, "update", "project", a->project, a->project, 1);
    return berth_api_empty(a, 200);
}

static int delete_project(berth_api_t *a)
{
    char id[24];
    project_id(a, id);
    const char *p[] = {id};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_PROJECT_DELETE, p, &r) != 0)
        return -1;
    berth_api_audit(a, "delete", "project", a->project, a->project, r.affected == 1);
    if (r.affected != 1)
        return berth_api_fail(a, BERTH_OCI_PRECONDITION, "the project still has repositories");
    return berth_api_empty(a, 200);
}

static int summary(berth_api_t *a)
{
    char pid[24];
    project_id(a, pid);
    const char *p[] = {pid};
    return berth_api_object(a, BERTH_Q_PROJECT_SUMMARY, p, "project");
}

static int deletable(berth_api_t *a)
{
    char pid[24];
    project_id(a, pid);
    const char *p[] = {pid};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_PROJECT_REPO_COUNT, p, &r) != 0)
        return -1;
    long long n = r.json != NULL ? strtoll(r.json, NULL, 10) : 0;
    free(r.json);
    json_t *v = json_pack("{s:b}", "deletable", n == 0);
    if (n > 0)
        json_object_set_new(v, "message", json_sprintf("the project still has %lld repositories; delete them first", n));
    return berth_api_jsonv(a, 200, v);
}

static int role_ok(json_t *v)
{
    json_int_t r = json_integer_value(v);
    return json_is_integer(v) && r >= 1 && r <= 5;
}

static int list_members(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    project_id(a, pid);
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *v = berth_api_param(a, "entityname");
    char name[256] = "";
    if (v != NULL && berth_api_copy(a, name, sizeof(name), v, "entityname") != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("entity_name", "role_id", "id"), sort) != 0)
        return -1;
    const char *p[] = {pid, name[0] ? name : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_MEMBERS_LIST, p, limit, offset);
}

static int add_member(berth_api_t *a)
{
    char pid[24], role[8];
    project_id(a, pid);
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *user = json_string_value(json_object_get(json_object_get(body, "member_user"), "username"));
    json_t *group = json_object_get(body, "member_group");
    if ((user == NULL && !json_is_object(group)) || !role_ok(json_object_get(body, "role_id"))) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "member_user.username or member_group, and role_id (1-5), are required");
    }
    snprintf(role, sizeof(role), "%d", (int)json_integer_value(json_object_get(body, "role_id")));
    char uname[256], gid[24];
    snprintf(uname, sizeof(uname), "%s", user != NULL ? user : "");
    if (user == NULL && berth_api_group_id(a, group, gid) != 0) {
        json_decref(body);
        return -1;
    }
    if (user == NULL)
        snprintf(uname, sizeof(uname), "group %s", gid);
    json_decref(body);
    const char *p[] = {pid, user != NULL ? uname : gid, role};
    berth_db_json_t r;
    int rc = berth_api_query(a, user != NULL ? BERTH_Q_MEMBER_ADD : BERTH_Q_MEMBER_ADD_GROUP, p, &r);
    berth_api_audit(a, "create", "member", uname, a->project, rc == 0 && r.json != NULL);
    if (rc != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", uname);
    char prefix[BERTH_NAME_MAX + 40];
    snprintf(prefix, sizeof(prefix), "/api/v2.0/projects/%s/members", a->project);
    return berth_api_created(a, r.json, "id", prefix);
}

static int get_member(berth_api_t *a)
{
    char pid[24];
    project_id(a, pid);
    const char *p[] = {pid, berth_api_arg(a, "mid")};
    return berth_api_object(a, BERTH_Q_MEMBER_GET, p, "member");
}

static int update_member(berth_api_t *a)
{
    char pid[24], role[8];
    project_id(a, pid);
    const char *mid = berth_api_arg(a, "mid");
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    int ok = role_ok(json_object_get(body, "role_id"));
    snprintf(role, sizeof(role), "%d", (int)json_integer_value(json_object_get(body, "role_id")));
    json_decref(body);
    if (!ok)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "role_id must be 1-5");
    const char *p[] = {pid, mid, role};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_MEMBER_UPDATE, p, &r) != 0)
        return -1;
    berth_api_audit(a, "update", "member", mid, a->project, r.affected == 1);
    return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "member not found");
}

static int delete_member(berth_api_t *a)
{
    char pid[24];
    project_id(a, pid);
    const char *mid = berth_api_arg(a, "mid");
    const char *p[] = {pid, mid};
    return berth_api_delete(a, BERTH_Q_MEMBER_DELETE, p, "member", mid, a->project);
}

static int logs(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    project_id(a, pid);
    char op[32] = "", rtype[32] = "", user[256] = "", res[512] = "";
    berth_api_qterm(a, "operation", op, sizeof(op));
    berth_api_qterm(a, "resource_type", rtype, sizeof(rtype));
    berth_api_qterm(a, "username", user, sizeof(user));
    berth_api_qterm(a, "resource", res, sizeof(res));
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("op_time", "id", "username", "operation", "resource", "resource_type"), sort) != 0)
        return -1;
    const char *p[] = {"0",   "false", pid, op[0] ? op : NULL, rtype[0] ? rtype : NULL, user[0] ? user : NULL, res[0] ? res : NULL,
                       limit, offset,  sort};
    return berth_api_list(a, BERTH_Q_AUDIT_LIST, p, limit, offset);
}

static int project_robots(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    project_id(a, pid);
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "name", "creation_time", "update_time", "expires_at"), sort) != 0)
        return -1;
    const char *p[] = {pid, NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_ROBOTS_LIST, p, limit, offset);
}

/* A change through the API committed: announce it (events.h: cache, audit, replication, ...) */
static void emit(berth_api_t *a, berth_event_kind_t kind, const char *digest, const char *tag)
{
    berth_event_emit(&(berth_event_t){.kind = kind,
                                      .surface = BERTH_EVENT_REST,
                                      .project = a->project,
                                      .repo = a->repo,
                                      .digest = digest,
                                      .tag = tag,
                                      .size = -1,
                                      .principal = a->authed ? a->who.username : "",
                                      .remote = a->rq->remote});
}

/* A change refused or failed: no event, only the audit row saying so */
static void audit_failed(berth_api_t *a, const char *op, const char *rtype, char sep, const char *ref)
{
    char res[600];
    snprintf(res, sizeof(res), "%s%c%s", a->repo, sep, ref);
    berth_api_audit(a, op, rtype, res, a->project, 0);
}

/* Resolve an artifact reference (digest or tag) to its digest; answered 404 when unknown */
static int artifact_digest(berth_api_t *a, const char *repo, const char *ref, char digest[BERTH_DIGEST_MAX])
{
    const char *p[] = {repo, ref};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_ARTIFACT_GET, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    const char *d = json_string_value(json_object_get(v, "digest"));
    if (d != NULL)
        snprintf(digest, BERTH_DIGEST_MAX, "%s", d);
    json_decref(v);
    free(r.json);
    return d != NULL ? 0 : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "artifact %s not found", ref);
}

static int list_artifacts(berth_api_t *a)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char tag[BERTH_TAG_MAX + 1] = "", type[16] = "", sort[40];
    berth_api_qterm(a, "tags", tag, sizeof(tag));
    berth_api_qterm(a, "type", type, sizeof(type));
    if (berth_api_sort(a, BERTH_API_SORTS("push_time", "pull_time", "size", "digest", "id"), sort) != 0)
        return -1;
    const char *p[] = {a->repo, tag[0] ? tag : NULL, limit, offset, type[0] ? type : NULL, sort};
    return berth_api_list(a, BERTH_Q_ARTIFACTS_LIST, p, limit, offset);
}

static int artifact_manifest(berth_api_t *a)
{
    const char *p[] = {a->repo, berth_api_arg(a, "reference")};
    return berth_api_object(a, BERTH_Q_ARTIFACT_MANIFEST, p, "artifact");
}

static int delete_artifact(berth_api_t *a)
{
    char digest[BERTH_DIGEST_MAX];
    if (artifact_digest(a, a->repo, berth_api_arg(a, "reference"), digest) != 0)
        return -1;
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_manifest_delete(a->c, a->repo, digest, &err) != 0) {
        audit_failed(a, "delete", "artifact", '@', digest);
        return berth_api_err(a, &err);
    }
    emit(a, BERTH_EVENT_MANIFEST_DELETE, digest, NULL);
    return berth_api_empty(a, 200);
}

static int list_tags(berth_api_t *a)
{
    char limit[24], offset[24], digest[BERTH_DIGEST_MAX];
    if (berth_api_page(a, limit, offset) != 0 || artifact_digest(a, a->repo, berth_api_arg(a, "reference"), digest) != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("name", "push_time"), sort) != 0)
        return -1;
    const char *p[] = {a->repo, digest, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_TAGS_LIST, p, limit, offset);
}

static int create_tag(berth_api_t *a)
{
    char digest[BERTH_DIGEST_MAX];
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    char tag[BERTH_TAG_MAX + 1] = "";
    const char *t = json_string_value(json_object_get(body, "name"));
    int valid = t != NULL && berth_ref_tag_valid(t, strlen(t));
    if (valid)
        snprintf(tag, sizeof(tag), "%s", t);
    json_decref(body);
    if (!valid)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "name must be a valid tag");
    if (artifact_digest(a, a->repo, berth_api_arg(a, "reference"), digest) != 0)
        return -1;
    const char *p[] = {a->repo, digest, tag};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_TAG_CREATE, p, &r) != 0) {
        audit_failed(a, "create", "tag", ':', tag);
        return -1;
    }
    free(r.json);
    emit(a, BERTH_EVENT_TAG_PUSH, digest, tag);
    return berth_api_empty(a, 201);
}

static int delete_tag(berth_api_t *a)
{
    const char *tag = berth_api_arg(a, "tag_name");
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_tag_delete(a->c, a->repo, tag, &err) != 0) {
        audit_failed(a, "delete", "tag", ':', tag);
        return berth_api_err(a, &err);
    }
    emit(a, BERTH_EVENT_TAG_DELETE, NULL, tag);
    return berth_api_empty(a, 200);
}

static int list_repositories(berth_api_t *a)
{
    char pid[24], limit[24], offset[24];
    project_id(a, pid);
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char name[256] = "", sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("name", "update_time", "creation_time", "pull_count", "artifact_count"), sort) != 0)
        return -1;
    berth_api_qterm(a, "name", name, sizeof(name));
    const char *p[] = {pid, name[0] ? name : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_REPOS_LIST, p, limit, offset);
}

static int get_repository(berth_api_t *a)
{
    const char *p[] = {a->repo};
    return berth_api_object(a, BERTH_Q_REPO_GET, p, "repository");
}

static int delete_repository(berth_api_t *a)
{
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_repo_delete(a->c, a->repo, &err) != 0) {
        berth_api_audit(a, "delete", "repository", a->repo, a->project, 0);
        return berth_api_err(a, &err);
    }
    emit(a, BERTH_EVENT_REPOSITORY_DELETE, NULL, NULL);
    return berth_api_empty(a, 200);
}

#define P "/projects/{project_name_or_id}"
#define R "/projects/{project_name}/repositories/{repository_name}"

/* Rows in a project check their right there; the project itself must be visible to the caller, or it answers
 * as absent (401 anonymous, 404 otherwise). HEAD /projects comes before GET /projects, which would answer it. */
const berth_api_route_t berth_api_projects_routes[] = {
    BERTH_API_ROUTE("HEAD", "/projects", BERTH_API_P_LOGIN, head_project, "headProject"),
    BERTH_API_ROUTE("GET", "/projects", BERTH_API_P_ANYONE, list_projects, "listProjects"),
    BERTH_API_ROUTE("POST", "/projects", BERTH_API_P_LOGIN, create_project, "createProject"), /* + the creation setting */
    BERTH_API_ROUTE("GET", P, BERTH_API_P_PROJECT(PROJECT, READ), get_project, "getProject"),
    BERTH_API_ROUTE("PUT", P, BERTH_API_P_PROJECT(PROJECT, UPDATE), update_project, "updateProject"),
    BERTH_API_ROUTE("DELETE", P, BERTH_API_P_PROJECT(PROJECT, DELETE), delete_project, "deleteProject"),
    BERTH_API_ROUTE("GET", P "/summary", BERTH_API_P_PROJECT(PROJECT, READ), summary, "getProjectSummary"),
    BERTH_API_ROUTE("GET", P "/_deletable", BERTH_API_P_PROJECT(PROJECT, DELETE), deletable, "getProjectDeletable"),
    BERTH_API_ROUTE("GET", P "/logs", BERTH_API_P_PROJECT(LOG, LIST), logs, "getLogs"),
    BERTH_API_ROUTE("GET", P "/members", BERTH_API_P_PROJECT(MEMBER, LIST), list_members, "listProjectMembers"),
    BERTH_API_ROUTE("POST", P "/members", BERTH_API_P_PROJECT(MEMBER, CREATE), add_member, "createProjectMember"),
    BERTH_API_ROUTE("GET", P "/members/{mid}", BERTH_API_P_PROJECT(MEMBER, READ), get_member, "getProjectMember"),
    BERTH_API_ROUTE("PUT", P "/members/{mid}", BERTH_API_P_PROJECT(MEMBER, UPDATE), update_member, "updateProjectMember"),
    BERTH_API_ROUTE("DELETE", P "/members/{mid}", BERTH_API_P_PROJECT(MEMBER, DELETE), delete_member, "deleteProjectMember"),
    BERTH_API_ROUTE("GET", P "/robots", BERTH_API_P_PROJECT(ROBOT, LIST), project_robots, "listProjectRobots"),
    BERTH_API_ROUTE("GET", "/projects/{project_name}/repositories", BERTH_API_P_PROJECT(REPOSITORY, LIST), list_repositories,
                    "listRepositories"),
    BERTH_API_ROUTE("GET", R, BERTH_API_P_PROJECT(REPOSITORY, READ), get_repository, "getRepository"),
    BERTH_API_ROUTE("DELETE", R, BERTH_API_P_PROJECT(REPOSITORY, DELETE), delete_repository, "deleteRepository"),
    BERTH_API_ROUTE("GET", R "/artifacts", BERTH_API_P_PROJECT(ARTIFACT, LIST), list_artifacts, "listArtifacts"),
    BERTH_API_ROUTE("DELETE", R "/artifacts/{reference}", BERTH_API_P_PROJECT(ARTIFACT, DELETE), delete_artifact, "deleteArtifact"),
    BERTH_API_ROUTE("GET", R "/artifacts/{reference}/manifest", BERTH_API_P_PROJECT(ARTIFACT, READ), artifact_manifest,
                    "getArtifactManifest"),
    BERTH_API_ROUTE("GET", R "/artifacts/{reference}/tags", BERTH_API_P_PROJECT(TAG, LIST), list_tags, "listTags"),
    BERTH_API_ROUTE("POST", R "/artifacts/{reference}/tags", BERTH_API_P_PROJECT(TAG, CREATE), create_tag, "createTag"),
    BERTH_API_ROUTE("DELETE", R "/artifacts/{reference}/tags/{tag_name}", BERTH_API_P_PROJECT(TAG, DELETE), delete_tag,
                    "deleteTag"),
    BERTH_API_ROUTES_END,
};

#undef P
#undef R
