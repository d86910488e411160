/* /api/v2.0/users and /api/v2.0/robots: local users, the caller's own view, robot accounts. */
#include <ctype.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/password.h"
#include "auth/service.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

#define ROBOT_DEFAULT_DAYS 30 /* Harbor's robot_token_duration */

static char *copy_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? strdup(v) : NULL;
}

/* User names: printable, no ':' (Basic auth splits on it), not the robot prefix */
static int username_ok(const char *u)
{
    size_t n = strlen(u);
    if (n == 0 || n > 255 || strncmp(u, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0)
        return 0;
    for (const char *p = u; *p; p++)
        if ((unsigned char)*p < 0x21 || *p == ':' || *p == 0x7f || *p == '"' || *p == '\\')
            return 0;
    return 1;
}

/* On a login route: the user themself or a system admin (robots are never a user) */
static int self_or_admin(berth_api_t *a, const char *id)
{
    if (a->who.sysadmin || (!a->who.robot && a->who.id == strtoll(id, NULL, 10)))
        return 0;
    return berth_api_fail(a, BERTH_OCI_DENIED, "system administrators only");
}

/*
 * berthd's own system user (berth-replication): replication reaches this site through it, with a password berthd
 * sets at every start. Deleting it, demoting it or changing its password breaks replication, so no caller may.
 */
static int refuse_internal(berth_api_t *a, const char *id)
{
    const char *p[] = {id};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_USER_GET, p, &r) != 0)
        return -1;
    json_t *u = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    free(r.json);
    int internal = json_is_true(json_object_get(u, "internal"));
    char name[256];
    snprintf(name, sizeof(name), "%s", internal ? json_string_value(json_object_get(u, "username")) : "");
    json_decref(u);
    if (!internal)
        return 0;
    berth_api_audit(a, a->rq->method[0] == 'D' ? "delete" : "update", "user", name, NULL, 0);
    return berth_api_fail(a, BERTH_OCI_DENIED, "%s is Berth's internal replication user: it cannot be deleted or changed", name);
}

static int create_user(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *user = json_string_value(json_object_get(body, "username"));
    const char *pw = json_string_value(json_object_get(body, "password"));
    const char *why = pw != NULL ? berth_password_policy(pw) : "password is required";
    if (user == NULL || !username_ok(user) || why != NULL) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why != NULL ? why : "invalid username");
    }
    char hash[BERTH_PASSWORD_HASH_MAX];
    if (berth_password_hash(hash, pw) != 0) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_INTERNAL, "cannot hash the password");
    }
    char *name = strdup(user), *email = copy_str(body, "email"), *real = copy_str(body, "realname"),
         *comment = copy_str(body, "comment");
    json_decref(body);
    const char *p[] = {name, hash, email, real, comment};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_USER_CREATE, p, &r);
    berth_api_audit(a, "create", "user", name, NULL, rc == 0);
    if (rc == 0)
        berth_api_created(a, r.json, "user_id", "/api/v2.0/users");
    free(name);
    free(email);
    free(real);
    free(comment);
    return rc;
}

/* GET users/current/permissions?scope=/project/<id or name>: what the caller may do there */
static int permissions(berth_api_t *a)
{
    const char *scope = berth_api_param(a, "scope");
    json_t *arr = json_array();
    if (scope != NULL && strncmp(scope, "/project/", 9) == 0) {
        char name[256];
        snprintf(name, sizeof(name), "%s", scope + 9);
        berth_authz_t z;
        char canonical[256];
        if (berth_api_project(a, name, &z, canonical) != 0) {
            json_decref(arr);
            return -1;
        }
        for (int r = 0; r < BERTH_RES__COUNT; r++)
            for (unsigned bit = 1; bit <= BERTH_ACT_PUSH; bit <<= 1)
                if (z.actions[r] & bit)
                    json_array_append_new(arr, json_pack("{s:s,s:s}", "resource", berth_authz_resource_name((berth_resource_t)r),
                                                         "action", berth_authz_action_name(bit)));
    }
    return berth_api_jsonv(a, 200, arr);
}

static int current(berth_api_t *a)
{
    if (a->who.robot)
        return berth_api_jsonv(a, 200, json_pack("{s:s,s:b}", "username", a->who.username, "robot", 1));
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)a->who.id);
    const char *p[] = {id};
    return berth_api_object(a, BERTH_Q_USER_GET, p, "user");
}

static int change_password(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "user_id");
    if (self_or_admin(a, id) != 0 || refuse_internal(a, id) != 0)
        return -1;
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *oldpw = json_string_value(json_object_get(body, "old_password"));
    const char *newpw = json_string_value(json_object_get(body, "new_password"));
    const char *why = newpw != NULL ? berth_password_policy(newpw) : "new_password is required";
    int self = a->who.id == strtoll(id, NULL, 10);
    const char *ip[] = {id};
    berth_db_json_t u = {0};
    if (why == NULL && berth_api_query(a, BERTH_Q_USER_IS_LDAP, ip, &u) != 0) {
        json_decref(body);
        return -1;
    }
    if (u.json != NULL && strcmp(u.json, "true") == 0) /* the directory is its only source of truth */
        why = "this user's password is managed in LDAP; it cannot have a local password";
    free(u.json);
    char hash[BERTH_PASSWORD_HASH_MAX];
    int rc = 0;
    if (why != NULL) {
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why);
    } else if (self) { /* changing one's own password needs the old one, even for admins */
        berth_db_user_t u;
        berth_err_t err;
        if (oldpw == NULL || berth_db_user_get(a->c, a->who.username, &u, &err) != 0 || u.password_hash[0] == '\0' ||
            !berth_password_verify(u.password_hash, oldpw))
            rc = berth_api_fail(a, BERTH_OCI_DENIED, "old_password is wrong");
        OPENSSL_cleanse(&u, sizeof(u));
    }
    if (rc == 0 && berth_password_hash(hash, newpw) != 0)
        rc = berth_api_fail(a, BERTH_OCI_INTERNAL, "cannot hash the password");
    json_decref(body);
    if (rc != 0)
        return rc;
    const char *p[] = {id, hash};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_USER_PASSWORD, p, &r) != 0)
        return -1;
    berth_api_audit(a, "update", "user", id, NULL, r.affected == 1);
    return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "user not found");
}

static int list_users(berth_api_t *a)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char name[256] = "";
    const char *v = berth_api_param(a, "username");
    if (v != NULL) {
        if (berth_api_copy(a, name, sizeof(name), v, "username") != 0)
            return -1;
    } else {
        berth_api_qterm(a, "username", name, sizeof(name));
    }
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("username", "user_id", "email", "creation_time", "update_time"), sort) != 0)
        return -1;
    const char *p[] = {name[0] ? name : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_USERS_LIST, p, limit, offset);
}

static int search_users(berth_api_t *a)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char name[256] = "";
    const char *v = berth_api_param(a, "username");
    if (v == NULL)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "username is required");
    if (berth_api_copy(a, name, sizeof(name), v, "username") != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("username", "user_id"), sort) != 0)
        return -1;
    const char *p[] = {name, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_USERS_SEARCH, p, limit, offset);
}

static int get_user(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "user_id");
    if (self_or_admin(a, id) != 0)
        return -1;
    const char *p[] = {id};
    return berth_api_object(a, BERTH_Q_USER_GET, p, "user");
}

static int update_user(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "user_id");
    if (self_or_admin(a, id) != 0 || refuse_internal(a, id) != 0)
        return -1;
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    char *email = copy_str(body, "email"), *real = copy_str(body, "realname"), *comment = copy_str(body, "comment");
    json_decref(body);
    const char *p[] = {id, email, real, comment};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_USER_UPDATE, p, &r);
    free(email);
    free(real);
    free(comment);
    if (rc != 0)
        return -1;
    return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "user not found");
}

static int set_sysadmin(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "user_id");
    if (refuse_internal(a, id) != 0)
        return -1;
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *flag = json_object_get(body, "sysadmin_flag");
    int ok = json_is_boolean(flag), on = json_is_true(flag);
    json_decref(body);
    if (!ok)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "sysadmin_flag must be true or false");
    const char *p[] = {id, on ? "true" : "false"};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_USER_SYSADMIN, p, &r) != 0)
        return -1;
    berth_api_audit(a, on ? "grant_admin" : "revoke_admin", "user", id, NULL, r.affected == 1);
    return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "user not found");
}

static int delete_user(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "user_id");
    if (a->who.id == strtoll(id, NULL, 10))
        return berth_api_fail(a, BERTH_OCI_PRECONDITION, "you cannot delete yourself");
    if (refuse_internal(a, id) != 0)
        return -1;
    const char *p[] = {id};
    return berth_api_delete(a, BERTH_Q_USER_DELETE, p, "user", id, NULL);
}

/* ---- robots ---- */

static int robot_name_ok(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 128)
        return 0;
    for (const char *p = n; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/*
 * The caller may manage robots of this level/project: system robots are for system admins; project robots for
 * whoever holds `act` on the project's robots. *z is filled for project robots.
 */
static int robot_rights(berth_api_t *a, const char *level, const char *project, unsigned act, berth_authz_t *z)
{
    if (strcmp(level, "system") == 0)
        return berth_api_need_admin(a);
    char canonical[256];
    if (project == NULL)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "a project robot needs exactly one project");
    if (berth_api_project(a, project, z, canonical) != 0)
        return -1;
    return berth_api_need(a, z, BERTH_RES_ROBOT, act);
}

/*
 * Permissions from the request into [{namespace, resource, action}]. Project robots may hold grants on their
 * own project only; nobody may hand a robot a right they do not hold themselves (Harbor checks less).
 */
static json_t *robot_permissions(berth_api_t *a, json_t *perms, const char *level, const char *project)
{
    if (!json_is_array(perms) || json_array_size(perms) == 0) {
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "permissions must be a non-empty list");
        return NULL;
    }
    json_t *rows = json_array();
    size_t i, j;
    json_t *perm, *acc;
    json_array_foreach(perms, i, perm)
    {
        const char *ns = json_string_value(json_object_get(perm, "namespace"));
        const char *kind = json_string_value(json_object_get(perm, "kind"));
        if (ns == NULL || (kind != NULL && strcmp(kind, "project") != 0) ||
            (strcmp(level, "project") == 0 && (project == NULL || strcmp(ns, project) != 0)) ||
            (strcmp(ns, "*") != 0 && !berth_ref_name_valid(ns, strlen(ns)))) {
            json_decref(rows);
            berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "permission namespace must be %s",
                           strcmp(level, "project") == 0 ? "the robot's project" : "a project or *");
            return NULL;
        }
        berth_authz_t z = {0};
        char canonical[256];
        int all = strcmp(ns, "*") == 0;
        if (!all && berth_api_project(a, ns, &z, canonical) != 0) {
            json_decref(rows);
            return NULL;
        }
        json_array_foreach(json_object_get(perm, "access"), j, acc)
        {
            const char *res = json_string_value(json_object_get(acc, "resource"));
            const char *act = json_string_value(json_object_get(acc, "action"));
            berth_resource_t r;
            unsigned bit;
            if (res == NULL || act == NULL || berth_authz_parse_permission(res, act, &r, &bit) != 0) {
                json_decref(rows);
                berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "unknown permission %s:%s", res != NULL ? res : "?",
                               act != NULL ? act : "?");
                return NULL;
            }
            if (!a->who.sysadmin && (all || !berth_authz_can(&z, r, bit))) {
                json_decref(rows);
                berth_api_fail(a, BERTH_OCI_DENIED, "you cannot grant %s:%s you do not hold", res, act);
                return NULL;
            }
            json_array_append_new(rows, json_pack("{s:s,s:s,s:s}", "namespace", ns, "resource", res, "action", act));
        }
    }
    if (json_array_size(rows) == 0) {
        json_decref(rows);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "permissions grant nothing");
        return NULL;
    }
    return rows;
}

static int duration_ok(json_t *d, int *days)
{
    if (d == NULL || json_is_null(d)) {
        *days = ROBOT_DEFAULT_DAYS;
        return 1;
    }
    json_int_t v = json_integer_value(d);
    *days = (int)v;
    return json_is_integer(d) && (v == -1 || (v >= 1 && v <= 36500));
}

/* Store permissions for robot `id` (inside the caller's transaction) */
static int store_permissions(berth_api_t *a, const char *id, json_t *rows)
{
    char *doc = json_dumps(rows, JSON_COMPACT);
    const char *p[] = {id, doc};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_ROBOT_PERMS_ADD, p, &r);
    free(doc);
    return rc;
}

static int create_robot(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *level = json_string_value(json_object_get(body, "level"));
    json_t *perms = json_object_get(body, "permissions");
    int days, rc = -1;
    char project[256] = "", full[300], idbuf[24], secret[48], hex[65];
    json_t *rows = NULL;
    if (name == NULL || !robot_name_ok(name) || level == NULL || (strcmp(level, "system") != 0 && strcmp(level, "project") != 0) ||
        !duration_ok(json_object_get(body, "duration"), &days)) {
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                            "name ([a-z0-9._-]), level (system or project) and duration (-1 or days) are required");
        goto Exit;
    }
    if (strcmp(level, "project") == 0 && json_array_size(perms) == 1)
        snprintf(project, sizeof(project), "%s", json_string_value(json_object_get(json_array_get(perms, 0), "namespace")) ?: "");
    berth_authz_t z = {0}; /* a system robot's rights leave it unset: project_id formats as 0, unused */
    if (robot_rights(a, level, project[0] ? project : NULL, BERTH_ACT_CREATE, &z) != 0)
        goto Exit;
    if ((rows = robot_permissions(a, perms, level, project)) == NULL)
        goto Exit;
    if (strcmp(level, "project") == 0)
        snprintf(full, sizeof(full), "%s%s+%s", BERTH_ROBOT_PREFIX, project, name);
    else
        snprintf(full, sizeof(full), "%s%s", BERTH_ROBOT_PREFIX, name);
    berth_authsvc_random_secret(secret, hex);
    char pid[24], dur[16];
    snprintf(pid, sizeof(pid), "%lld", (long long)z.project_id);
    snprintf(dur, sizeof(dur), "%d", days);
    const char *desc = json_string_value(json_object_get(body, "description"));
    const char *p[] = {full, desc, level, strcmp(level, "project") == 0 ? pid : NULL, hex, dur, a->who.username};
    berth_err_t err;
    berth_db_json_t r;
    if (berth_db_begin(a->c, &err) != 0) {
        rc = berth_api_err(a, &err);
        goto Exit;
    }
    if (berth_api_query(a, BERTH_Q_ROBOT_CREATE, p, &r) != 0)
        goto Exit;
    json_t *made = json_loads(r.json, 0, NULL);
    free(r.json);
    snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(json_object_get(made, "id")));
    if (store_permissions(a, idbuf, rows) != 0 || berth_db_commit(a->c, &err) != 0) {
        json_decref(made);
        if (a->resp->status == 200)
            berth_api_err(a, &err);
        goto Exit;
    }
    json_object_set_new(made, "secret", json_string(secret)); /* shown once; only its hash is kept */
    berth_resp_header(a->resp, "location", "/api/v2.0/robots/%s", idbuf);
    berth_api_jsonv(a, 201, made);
    berth_api_audit(a, "create", "robot", full, project[0] ? project : NULL, 1);
    rc = 0;
Exit:
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc != 0 && a->c != NULL)
        berth_db_rollback(a->c);
    json_decref(rows);
    json_decref(body);
    return rc;
}

/* Load robot `id` and check the caller's right `act` on it; *robot is the JSON (caller decrefs) */
static int robot_load(berth_api_t *a, const char *id, unsigned act, json_t **robot)
{
    const char *p[] = {id};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_ROBOT_GET, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    free(r.json);
    if (v == NULL) {
        if (!a->authed)
            return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "authentication required");
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "robot not found");
    }
    berth_authz_t z;
    if (robot_rights(a, json_string_value(json_object_get(v, "level")), json_string_value(json_object_get(v, "project_name")), act,
                     &z) != 0) {
        json_decref(v);
        return -1;
    }
    *robot = v;
    return 0;
}

static int update_robot(berth_api_t *a, const char *id, json_t *robot)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    int rc = -1, days = 0;
    json_t *rows = NULL, *d = json_object_get(body, "duration"), *dis = json_object_get(body, "disable");
    const char *level = json_string_value(json_object_get(robot, "level"));
    const char *project = json_string_value(json_object_get(robot, "project_name"));
    char dur[16];
    berth_err_t err;
    berth_db_json_t r;
    if (d != NULL && !duration_ok(d, &days)) {
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "duration must be -1 or a number of days");
        goto Exit;
    }
    snprintf(dur, sizeof(dur), "%d", days);
    if (json_object_get(body, "permissions") != NULL &&
        (rows = robot_permissions(a, json_object_get(body, "permissions"), level, project)) == NULL)
        goto Exit;
    const char *p[] = {id, json_string_value(json_object_get(body, "description")),
                       json_is_boolean(dis) ? (json_is_true(dis) ? "true" : "false") : NULL, d != NULL ? dur : NULL};
    const char *cp[] = {id};
    if (berth_db_begin(a->c, &err) != 0) {
        rc = berth_api_err(a, &err);
        goto Exit;
    }
    if (berth_api_query(a, BERTH_Q_ROBOT_UPDATE, p, &r) != 0)
        goto Exit;
    if (rows != NULL && (berth_api_query(a, BERTH_Q_ROBOT_PERMS_CLEAR, cp, &r) != 0 || store_permissions(a, id, rows) != 0))
        goto Exit;
    if (berth_db_commit(a->c, &err) != 0) {
        rc = berth_api_err(a, &err);
        goto Exit;
    }
    berth_api_audit(a, "update", "robot", json_string_value(json_object_get(robot, "name")), project, 1);
    rc = berth_api_empty(a, 200);
Exit:
    if (rc != 0)
        berth_db_rollback(a->c);
    json_decref(rows);
    json_decref(body);
    return rc;
}

static int refresh_secret(berth_api_t *a, const char *id, json_t *robot)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *given = json_string_value(json_object_get(body, "secret"));
    char secret[256], hex[65];
    if (given != NULL && given[0] != '\0') {
        const char *why = berth_password_policy(given);
        if (why != NULL) {
            json_decref(body);
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s", why);
        }
        snprintf(secret, sizeof(secret), "%s", given);
        berth_authsvc_sha256_hex(secret, hex);
    } else {
        char gen[48];
        berth_authsvc_random_secret(gen, hex);
        snprintf(secret, sizeof(secret), "%s", gen);
        OPENSSL_cleanse(gen, sizeof(gen));
    }
    json_decref(body);
    const char *p[] = {id, hex};
    berth_db_json_t r;
    int rc = berth_api_query(a, BERTH_Q_ROBOT_SECRET, p, &r);
    berth_api_audit(a, "refresh_secret", "robot", json_string_value(json_object_get(robot, "name")),
                    json_string_value(json_object_get(robot, "project_name")), rc == 0);
    if (rc == 0)
        berth_api_jsonv(a, 200, json_pack("{s:s}", "secret", secret));
    OPENSSL_cleanse(secret, sizeof(secret));
    return rc;
}

static int list_robots(berth_api_t *a)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char level[16] = "", pid[24] = "";
    berth_api_qterm(a, "Level", level, sizeof(level));
    berth_api_qterm(a, "ProjectID", pid, sizeof(pid));
    if (pid[0] != '\0') { /* a project's robots: whoever may list them there */
        berth_authz_t z;
        char canonical[256];
        if (berth_api_project(a, pid, &z, canonical) != 0 || berth_api_need(a, &z, BERTH_RES_ROBOT, BERTH_ACT_LIST) != 0)
            return -1;
        snprintf(pid, sizeof(pid), "%lld", (long long)z.project_id);
    } else if (berth_api_need_admin(a) != 0) {
        return -1;
    }
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("id", "name", "creation_time", "update_time", "expires_at"), sort) != 0)
        return -1;
    const char *p[] = {pid[0] ? pid : NULL, level[0] ? level : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_ROBOTS_LIST, p, limit, offset);
}

static int get_robot(berth_api_t *a)
{
    json_t *robot = NULL;
    int rc = robot_load(a, berth_api_arg(a, "robot_id"), BERTH_ACT_READ, &robot);
    if (rc == 0)
        rc = berth_api_jsonv(a, 200, robot);
    return rc;
}

/* Load the robot the path names, checked for `act`, and hand it to `fn` (which does not take it) */
static int with_robot(berth_api_t *a, unsigned act, int (*fn)(berth_api_t *, const char *, json_t *))
{
    const char *id = berth_api_arg(a, "robot_id");
    json_t *robot = NULL;
    int rc = robot_load(a, id, act, &robot);
    if (rc == 0)
        rc = fn(a, id, robot);
    json_decref(robot);
    return rc;
}

static int put_robot(berth_api_t *a)
{
    return with_robot(a, BERTH_ACT_UPDATE, update_robot);
}

static int patch_robot(berth_api_t *a)
{
    return with_robot(a, BERTH_ACT_UPDATE, refresh_secret);
}

static int delete_loaded(berth_api_t *a, const char *id, json_t *robot)
{
    const char *p[] = {id};
    return berth_api_delete(a, BERTH_Q_ROBOT_DELETE, p, "robot", id, json_string_value(json_object_get(robot, "project_name")));
}

static int delete_robot(berth_api_t *a)
{
    return with_robot(a, BERTH_ACT_DELETE, delete_loaded);
}

/* "login" rows marked (+) narrow it in the handler: the user themself or a system admin; for robots, a system
 * admin (system robots) or whoever holds the robot right in the robot's project */
const berth_api_route_t berth_api_accounts_routes[] = {
    BERTH_API_ROUTE("GET", "/users", BERTH_API_P_ADMIN, list_users, "listUsers"),
    BERTH_API_ROUTE("POST", "/users", BERTH_API_P_ADMIN, create_user, "createUser"),
    BERTH_API_ROUTE("GET", "/users/current", BERTH_API_P_LOGIN, current, "getCurrentUserInfo"),
    BERTH_API_ROUTE("GET", "/users/current/permissions", BERTH_API_P_LOGIN, permissions, "getCurrentUserPermissions"),
    BERTH_API_ROUTE("GET", "/users/search", BERTH_API_P_LOGIN, search_users, "searchUsers"),
    BERTH_API_ROUTE("GET", "/users/{user_id}", BERTH_API_P_LOGIN, get_user, "getUser"),              /* (+) */
    BERTH_API_ROUTE("PUT", "/users/{user_id}", BERTH_API_P_LOGIN, update_user, "updateUserProfile"), /* (+) */
    BERTH_API_ROUTE("DELETE", "/users/{user_id}", BERTH_API_P_ADMIN, delete_user, "deleteUser"),
    BERTH_API_ROUTE("PUT", "/users/{user_id}/password", BERTH_API_P_LOGIN, change_password, "updateUserPassword"), /* (+) */
    BERTH_API_ROUTE("PUT", "/users/{user_id}/sysadmin", BERTH_API_P_ADMIN, set_sysadmin, "setUserSysAdmin"),
    BERTH_API_ROUTE("GET", "/robots", BERTH_API_P_LOGIN, list_robots, "listRobot"),                  /* (+) */
    BERTH_API_ROUTE("POST", "/robots", BERTH_API_P_LOGIN, create_robot, "createRobot"),              /* (+) */
    BERTH_API_ROUTE("GET", "/robots/{robot_id}", BERTH_API_P_LOGIN, get_robot, "getRobotByID"),      /* (+) */
    BERTH_API_ROUTE("PUT", "/robots/{robot_id}", BERTH_API_P_LOGIN, put_robot, "updateRobot"),       /* (+) */
    BERTH_API_ROUTE("PATCH", "/robots/{robot_id}", BERTH_API_P_LOGIN, patch_robot, "refreshSec"),    /* (+) */
    BERTH_API_ROUTE("DELETE", "/robots/{robot_id}", BERTH_API_P_LOGIN, delete_robot, "deleteRobot"), /* (+) */
    BERTH_API_ROUTES_END,
};
