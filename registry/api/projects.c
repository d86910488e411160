/* /api/v2.0/projects and everything under a project: members, logs, repositories, artifacts, tags, robots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/cache.h"
#include "replication/replication.h"
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

static int create_project(berth_api_t *a)
{
    if (berth_api_need_login(a) != 0)
        return -1;
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
    char owner[24];
    snprintf(owner, sizeof(owner), "%lld", (long long)a->who.id);
    const char *p[] = {name, pub == 1 ? "true" : "false", a->who.robot ? NULL : owner};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_PROJECT_CREATE, p, &r);
    berth_api_audit(a, "create", "project", name, name, rc == 0);
    json_decref(body);
    if (rc != 0)
        return -1;
    return berth_api_created(a, r.json, "project_id", "/api/v2.0/projects");
}

static int head_project(berth_api_t *a)
{
    if (berth_api_need_login(a) != 0)
        return -1;
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

static int get_project(berth_api_t *a, const char *name)
{
    caller_t c;
    caller(a, &c);
    const char *p[] = {c.id, c.robot, name};
    return berth_api_object(a, BERTH_Q_PROJECT_GET, p, "project");
}

static int update_project(berth_api_t *a, const berth_authz_t *z, const char *name)
{
    if (berth_api_need(a, z, BERTH_RES_PROJECT, BERTH_ACT_UPDATE) != 0)
        return -1;
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
    json_decref(body);
    if (scan == -2)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.isa_require_scan_pass must be \"true\" or \"false\"");
    if (isa[0] && strcmp(isa, "off") != 0 && strcmp(isa, "warn") != 0 && strcmp(isa, "strict") != 0)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "metadata.isa_policy must be off, warn or strict");
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)z->project_id);
    const char *p[] = {id, pub < 0 ? NULL : pub ? "true" : "false", isa[0] ? isa : NULL, scan < 0 ? NULL : scan ? "true" : "false"};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_PROJECT_UPDATE, p, &r) != 0)
        return -1;
    free(r.json);
    berth_api_audit(a, "update", "project", name, name, 1);
    return berth_api_empty(a, 200);
}

static int delete_project(berth_api_t *a, const berth_authz_t *z, const char *name)
{
    if (berth_api_need(a, z, BERTH_RES_PROJECT, BERTH_ACT_DELETE) != 0)
        return -1;
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)z->project_id);
    const char *p[] = {id};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_PROJECT_DELETE, p, &r) != 0)
        return -1;
    berth_api_audit(a, "delete", "project", name, name, r.affected == 1);
    if (r.affected != 1)
        return berth_api_fail(a, BERTH_OCI_PRECONDITION, "the project still has repositories");
    return berth_api_empty(a, 200);
}

static int role_ok(json_t *v)
{
    json_int_t r = json_integer_value(v);
    return json_is_integer(v) && r >= 1 && r <= 5;
}

static int members(berth_api_t *a, const berth_authz_t *z, const char *project)
{
    char pid[24], limit[24], offset[24], role[8];
    snprintf(pid, sizeof(pid), "%lld", (long long)z->project_id);
    if (a->nseg == 3 && berth_api_match(a, "GET", "projects/{}/members")) {
        if (berth_api_need(a, z, BERTH_RES_MEMBER, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0)
            return -1;
        const char *v = berth_api_param(a, "entityname");
        char name[256] = "";
        if (v != NULL)
            snprintf(name, sizeof(name), "%s", v);
        char sort[40];
        if (berth_api_sort(a, BERTH_API_SORTS("entity_name", "role_id", "id"), sort) != 0)
            return -1;
        const char *p[] = {pid, name[0] ? name : NULL, limit, offset, sort};
        return berth_api_list(a, BERTH_Q_MEMBERS_LIST, p, limit, offset);
    }
    if (berth_api_match(a, "POST", "projects/{}/members")) {
        if (berth_api_need(a, z, BERTH_RES_MEMBER, BERTH_ACT_CREATE) != 0)
            return -1;
        json_t *body = berth_api_body(a);
        if (body == NULL)
            return -1;
        const char *user = json_string_value(json_object_get(json_object_get(body, "member_user"), "username"));
        json_t *group = json_object_get(body, "member_group");
        if ((user == NULL && !json_is_object(group)) || !role_ok(json_object_get(body, "role_id"))) {
            json_decref(body);
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                                  "member_user.username or member_group, and role_id (1-5), are required");
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
        berth_api_audit(a, "create", "member", uname, project, rc == 0 && r.json != NULL);
        if (rc != 0)
            return -1;
        if (r.json == NULL)
            return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", uname);
        char prefix[BERTH_NAME_MAX + 40];
        snprintf(prefix, sizeof(prefix), "/api/v2.0/projects/%s/members", project);
        return berth_api_created(a, r.json, "id", prefix);
    }
    if (a->nseg != 4)
        return 1;
    const char *mid = a->seg[3];
    if (!berth_api_id_ok(mid))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "member id must be a number");
    const char *p[] = {pid, mid, role};
    berth_db_json_t r;
    if (berth_api_match(a, "GET", "projects/{}/members/{}")) {
        if (berth_api_need(a, z, BERTH_RES_MEMBER, BERTH_ACT_READ) != 0)
            return -1;
        return berth_api_object(a, BERTH_Q_MEMBER_GET, p, "member");
    }
    if (berth_api_match(a, "PUT", "projects/{}/members/{}")) {
        if (berth_api_need(a, z, BERTH_RES_MEMBER, BERTH_ACT_UPDATE) != 0)
            return -1;
        json_t *body = berth_api_body(a);
        if (body == NULL)
            return -1;
        int ok = role_ok(json_object_get(body, "role_id"));
        snprintf(role, sizeof(role), "%d", (int)json_integer_value(json_object_get(body, "role_id")));
        json_decref(body);
        if (!ok)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "role_id must be 1-5");
        if (berth_api_query(a, BERTH_Q_MEMBER_UPDATE, p, &r) != 0)
            return -1;
        berth_api_audit(a, "update", "member", mid, project, r.affected == 1);
        return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "member not found");
    }
    if (berth_api_match(a, "DELETE", "projects/{}/members/{}")) {
        if (berth_api_need(a, z, BERTH_RES_MEMBER, BERTH_ACT_DELETE) != 0)
            return -1;
        return berth_api_delete(a, BERTH_Q_MEMBER_DELETE, p, "member", mid, project);
    }
    return 1;
}

static int logs(berth_api_t *a, const berth_authz_t *z)
{
    char pid[24], limit[24], offset[24];
    if (berth_api_need(a, z, BERTH_RES_LOG, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0)
        return -1;
    snprintf(pid, sizeof(pid), "%lld", (long long)z->project_id);
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

static int artifacts(berth_api_t *a, const berth_authz_t *z, const char *project, const char *repo)
{
    char limit[24], offset[24], digest[BERTH_DIGEST_MAX];
    if (a->nseg == 5 && berth_api_match(a, "GET", "projects/{}/repositories/{}/artifacts")) {
        if (berth_api_need(a, z, BERTH_RES_ARTIFACT, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0)
            return -1;
        char tag[BERTH_TAG_MAX + 1] = "", type[16] = "", sort[40];
        berth_api_qterm(a, "tags", tag, sizeof(tag));
        berth_api_qterm(a, "type", type, sizeof(type));
        if (berth_api_sort(a, BERTH_API_SORTS("push_time", "pull_time", "size", "digest", "id"), sort) != 0)
            return -1;
        const char *p[] = {repo, tag[0] ? tag : NULL, limit, offset, type[0] ? type : NULL, sort};
        return berth_api_list(a, BERTH_Q_ARTIFACTS_LIST, p, limit, offset);
    }
    if (a->nseg < 6)
        return 1;
    const char *ref = a->seg[5];
    int rc = berth_api_image_artifact(a, z, repo); /* GET …/{ref} with its image config, …/{ref}/additions/{} */
    if (rc <= 0)
        return rc;
    if (a->nseg == 7 && berth_api_match(a, "GET", "projects/{}/repositories/{}/artifacts/{}/manifest")) {
        if (berth_api_need(a, z, BERTH_RES_ARTIFACT, BERTH_ACT_READ) != 0)
            return -1;
        const char *p[] = {repo, ref};
        return berth_api_object(a, BERTH_Q_ARTIFACT_MANIFEST, p, "artifact");
    }
    if (a->nseg == 6 && berth_api_match(a, "DELETE", "projects/{}/repositories/{}/artifacts/{}")) {
        if (berth_api_need(a, z, BERTH_RES_ARTIFACT, BERTH_ACT_DELETE) != 0 || artifact_digest(a, repo, ref, digest) != 0)
            return -1;
        berth_err_t err;
        berth_err_clear(&err);
        int rc = berth_db_manifest_delete(a->c, repo, digest, &err);
        char res[600];
        snprintf(res, sizeof(res), "%s@%s", repo, digest);
        berth_api_audit(a, "delete", "artifact", res, project, rc == 0);
        if (rc != 0)
            return berth_api_err(a, &err);
        berth_cache_invalidate(repo);
        return berth_api_empty(a, 200);
    }
    if (a->nseg == 7 && berth_api_match(a, "GET", "projects/{}/repositories/{}/artifacts/{}/tags")) {
        if (berth_api_need(a, z, BERTH_RES_TAG, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0 ||
            artifact_digest(a, repo, ref, digest) != 0)
            return -1;
        char sort[40];
        if (berth_api_sort(a, BERTH_API_SORTS("name", "push_time"), sort) != 0)
            return -1;
        const char *p[] = {repo, digest, limit, offset, sort};
        return berth_api_list(a, BERTH_Q_TAGS_LIST, p, limit, offset);
    }
    if (a->nseg == 7 && berth_api_match(a, "POST", "projects/{}/repositories/{}/artifacts/{}/tags")) {
        if (berth_api_need(a, z, BERTH_RES_TAG, BERTH_ACT_CREATE) != 0)
            return -1;
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
        if (artifact_digest(a, repo, ref, digest) != 0)
            return -1;
        const char *p[] = {repo, digest, tag};
        berth_db_json_t r;
        int rc = berth_api_query(a, BERTH_Q_TAG_CREATE, p, &r);
        char res[600];
        snprintf(res, sizeof(res), "%s:%s", repo, tag);
        berth_api_audit(a, "create", "tag", res, project, rc == 0);
        if (rc != 0)
            return -1;
        free(r.json);
        berth_cache_invalidate(repo);
        berth_repl_event("push", repo, tag); /* event-based replication, as for a /v2 push */
        return berth_api_empty(a, 201);
    }
    if (a->nseg == 8 && berth_api_match(a, "DELETE", "projects/{}/repositories/{}/artifacts/{}/tags/{}")) {
        if (berth_api_need(a, z, BERTH_RES_TAG, BERTH_ACT_DELETE) != 0)
            return -1;
        berth_err_t err;
        berth_err_clear(&err);
        int rc = berth_db_tag_delete(a->c, repo, a->seg[7], &err);
        char res[600];
        snprintf(res, sizeof(res), "%s:%s", repo, a->seg[7]);
        berth_api_audit(a, "delete", "tag", res, project, rc == 0);
        if (rc != 0)
            return berth_api_err(a, &err);
        berth_cache_invalidate(repo);
        berth_repl_event("delete", repo, a->seg[7]);
        return berth_api_empty(a, 200);
    }
    return 1;
}

static int repositories(berth_api_t *a, const berth_authz_t *z, const char *project)
{
    char pid[24], limit[24], offset[24];
    snprintf(pid, sizeof(pid), "%lld", (long long)z->project_id);
    if (a->nseg == 3 && berth_api_match(a, "GET", "projects/{}/repositories")) {
        if (berth_api_need(a, z, BERTH_RES_REPOSITORY, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0)
            return -1;
        char name[256] = "", sort[40];
        if (berth_api_sort(a, BERTH_API_SORTS("name", "update_time", "creation_time", "pull_count", "artifact_count"), sort) != 0)
            return -1;
        berth_api_qterm(a, "name", name, sizeof(name));
        const char *p[] = {pid, name[0] ? name : NULL, limit, offset, sort};
        return berth_api_list(a, BERTH_Q_REPOS_LIST, p, limit, offset);
    }
    if (a->nseg < 4)
        return 1;
    char repo[BERTH_NAME_MAX + 2];
    int n = snprintf(repo, sizeof(repo), "%s/%s", project, a->seg[3]);
    if (n < 0 || (size_t)n > BERTH_NAME_MAX || !berth_ref_name_valid(repo, (size_t)n))
        return berth_api_fail(a, BERTH_OCI_NAME_INVALID, "invalid repository name");
    if (a->nseg == 4 && berth_api_match(a, "GET", "projects/{}/repositories/{}")) {
        if (berth_api_need(a, z, BERTH_RES_REPOSITORY, BERTH_ACT_READ) != 0)
            return -1;
        const char *p[] = {repo};
        return berth_api_object(a, BERTH_Q_REPO_GET, p, "repository");
    }
    if (a->nseg == 4 && berth_api_match(a, "DELETE", "projects/{}/repositories/{}")) {
        if (berth_api_need(a, z, BERTH_RES_REPOSITORY, BERTH_ACT_DELETE) != 0)
            return -1;
        const char *p[] = {repo};
        berth_db_json_t r;
        if (berth_api_query(a, BERTH_Q_REPO_DELETE, p, &r) != 0)
            return -1;
        int found = r.json != NULL && strcmp(r.json, "1") == 0;
        free(r.json);
        berth_api_audit(a, "delete", "repository", repo, project, found);
        if (!found)
            return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "repository not found");
        berth_cache_invalidate(repo);
        return berth_api_empty(a, 200);
    }
    if ((a->nseg >= 7 && strcmp(a->seg[4], "artifacts") == 0 && strcmp(a->seg[6], "isa") == 0) ||
        (a->nseg == 6 && strcmp(a->seg[4], "isa") == 0))
        return berth_api_isa_artifact(a, z, project, repo);
    if (a->nseg >= 5 && strcmp(a->seg[4], "artifacts") == 0)
        return artifacts(a, z, project, repo);
    return 1;
}

int berth_api_projects_route(berth_api_t *a)
{
    if (a->nseg == 1 && berth_api_match(a, "POST", "projects"))
        return create_project(a);
    if (a->nseg == 1 && strcmp(a->rq->method, "HEAD") == 0)
        return head_project(a);
    if (a->nseg == 1 && berth_api_match(a, "GET", "projects"))
        return list_projects(a);
    if (a->nseg < 2)
        return 1;
    berth_authz_t z;
    char name[256];
    if (berth_api_project(a, a->seg[1], &z, name) != 0)
        return -1;
    if (a->nseg == 2) {
        if (berth_api_match(a, "GET", "projects/{}"))
            return get_project(a, name);
        if (berth_api_match(a, "PUT", "projects/{}"))
            return update_project(a, &z, name);
        if (berth_api_match(a, "DELETE", "projects/{}"))
            return delete_project(a, &z, name);
        return 1;
    }
    const char *sub = a->seg[2];
    if (strcmp(sub, "summary") == 0 && berth_api_match(a, "GET", "projects/{}/summary")) {
        char pid[24];
        snprintf(pid, sizeof(pid), "%lld", (long long)z.project_id);
        const char *p[] = {pid};
        return berth_api_object(a, BERTH_Q_PROJECT_SUMMARY, p, "project");
    }
    if (strcmp(sub, "_deletable") == 0 && berth_api_match(a, "GET", "projects/{}/_deletable")) {
        if (berth_api_need(a, &z, BERTH_RES_PROJECT, BERTH_ACT_DELETE) != 0)
            return -1;
        char pid[24];
        snprintf(pid, sizeof(pid), "%lld", (long long)z.project_id);
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
    if (strcmp(sub, "members") == 0)
        return members(a, &z, name);
    if (strcmp(sub, "logs") == 0 && berth_api_match(a, "GET", "projects/{}/logs"))
        return logs(a, &z);
    if (strcmp(sub, "repositories") == 0)
        return repositories(a, &z, name);
    if (strcmp(sub, "robots") == 0 && berth_api_match(a, "GET", "projects/{}/robots")) {
        char pid[24], limit[24], offset[24];
        if (berth_api_need(a, &z, BERTH_RES_ROBOT, BERTH_ACT_LIST) != 0 || berth_api_page(a, limit, offset) != 0)
            return -1;
        snprintf(pid, sizeof(pid), "%lld", (long long)z.project_id);
        char sort[40];
        if (berth_api_sort(a, BERTH_API_SORTS("id", "name", "creation_time", "update_time", "expires_at"), sort) != 0)
            return -1;
        const char *p[] = {pid, NULL, limit, offset, sort};
        return berth_api_list(a, BERTH_Q_ROBOTS_LIST, p, limit, offset);
    }
    return 1;
}
