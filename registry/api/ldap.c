/* The LDAP admin endpoints (ping, user and group search, user import: system admins only) and user groups
 * (/usergroups: reading them is open to any user, project admins need it to add a group as a member). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/ldap.h"
#include "auth/service.h"
#include "core/query.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "sql/users.h"

static berth_ldap_t *client(berth_api_t *a)
{
    berth_ldap_t *l = a->reg->auth->ldap;
    if (l == NULL)
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "LDAP is not configured");
    return l;
}

static int ldap_json(berth_api_t *a, int rc, char *json, const berth_err_t *err)
{
    if (rc != 0)
        return berth_api_err(a, err);
    return berth_api_json(a, 200, json);
}

/* A search parameter into out ("" when absent); a NUL byte or more than outsz-1 bytes: answered 400, -1 */
static int search_param(berth_api_t *a, const char *key, char *out, size_t outsz)
{
    long n = a->rq->query != NULL ? berth_query_get(a->rq->query, a->rq->query_len, key, out, outsz) : -1;
    if (n == -2)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s: malformed, holds a NUL byte or is longer than %zu bytes", key,
                              outsz - 1);
    if (n < 0)
        out[0] = '\0';
    return 0;
}

/* Onboard one LDAP user without a login (Harbor's import); 0, BERTH_ENOTFOUND or another code */
static int import_one(berth_api_t *a, berth_ldap_t *l, const char *uid, berth_err_t *err)
{
    berth_ldap_user_t lu;
    int rc = berth_ldap_lookup(l, uid, &lu, err);
    if (rc != 0)
        return rc;
    int64_t id;
    rc = berth_db_ldap_onboard(a->c, lu.username, lu.dn, lu.email, lu.realname, lu.admin, lu.groups, lu.ngroups, &id, err);
    berth_ldap_user_dispose(&lu);
    if (rc == 0)
        berth_api_audit(a, "create", "user", uid, NULL, 1);
    return rc;
}

static int ping(berth_api_t *a)
{
    berth_ldap_t *l = client(a);
    if (l == NULL)
        return -1;
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_ldap_ping(l, &err) != 0)
        return berth_api_err(a, &err);
    return berth_api_jsonv(a, 200, json_pack("{s:b}", "success", 1));
}

/* an empty or absent term lists the first 100 entries; malformed input is a 400 before LDAP is asked */
static int search_users(berth_api_t *a)
{
    berth_ldap_t *l = client(a);
    char term[257], *json = NULL;
    if (l == NULL || search_param(a, "username", term, sizeof(term)) != 0)
        return -1;
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_ldap_search_users(l, term, 100, &json, &err);
    return ldap_json(a, rc, json, &err);
}

static int search_groups(berth_api_t *a)
{
    berth_ldap_t *l = client(a);
    char name[257], dn[1001], *json = NULL;
    if (l == NULL || search_param(a, "groupname", name, sizeof(name)) != 0 || search_param(a, "groupdn", dn, sizeof(dn)) != 0)
        return -1;
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_ldap_search_groups(l, name, dn, 100, &json, &err);
    return ldap_json(a, rc, json, &err);
}

static int import_users(berth_api_t *a)
{
    berth_ldap_t *l = client(a);
    if (l == NULL)
        return -1;
    berth_err_t err;
    berth_err_clear(&err);
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *uids = json_object_get(body, "ldap_uid_list"), *failed = json_array(), *uid;
    size_t i;
    if (!json_is_array(uids)) {
        json_decref(body);
        json_decref(failed);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "ldap_uid_list must be a list of user ids");
    }
    json_array_foreach(uids, i, uid)
    {
        const char *u = json_string_value(uid);
        int rc = u != NULL ? import_one(a, l, u, &err) : BERTH_ENOTFOUND;
        if (rc == BERTH_EUNAVAIL || (rc != 0 && err.oci == BERTH_OCI_UNAVAILABLE)) {
            json_decref(body);
            json_decref(failed);
            return berth_api_err(a, &err);
        }
        if (rc != 0)
            json_array_append_new(failed, json_pack("{s:s,s:s}", "uid", u != NULL ? u : "", "error",
                                                    rc == BERTH_ECONFLICT ? "a local user has this name" : "not found in LDAP"));
    }
    json_decref(body);
    if (json_array_size(failed) > 0) /* Harbor answers 404 with the ids it could not import */
        return berth_api_jsonv(a, 404, failed);
    json_decref(failed);
    return berth_api_empty(a, 200);
}

/* GET /usergroups?group_name= and Harbor's GET /usergroups/search?groupname= (required there): one list, by name */
static int list_groups(berth_api_t *a, int search)
{
    char limit[24], offset[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    char name[256] = "";
    const char *v = berth_api_param(a, search ? "groupname" : "group_name");
    if (search && (v == NULL || v[0] == '\0'))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "groupname is required");
    if (v != NULL && berth_api_copy(a, name, sizeof(name), v, search ? "groupname" : "group_name") != 0)
        return -1;
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("group_name", "id"), sort) != 0)
        return -1;
    const char *p[] = {name[0] ? name : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_USERGROUPS_LIST, p, limit, offset);
}

static int list_usergroups(berth_api_t *a)
{
    return list_groups(a, 0);
}

static int search_usergroups(berth_api_t *a)
{
    return list_groups(a, 1);
}

static int create_usergroup(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *type = json_object_get(body, "group_type");
    char id[24];
    int rc = type != NULL && json_integer_value(type) != 1
                 ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "only LDAP groups (group_type 1)")
                 : berth_api_group_id(a, body, id);
    const char *dn = json_string_value(json_object_get(body, "ldap_group_dn"));
    if (rc == 0)
        berth_api_audit(a, "create", "usergroup", dn, NULL, 1);
    json_decref(body);
    if (rc != 0)
        return -1;
    berth_resp_header(a->resp, "location", "/api/v2.0/usergroups/%s", id);
    return berth_api_empty(a, 201);
}

static int get_usergroup(berth_api_t *a)
{
    const char *p[] = {berth_api_arg(a, "group_id")};
    return berth_api_object(a, BERTH_Q_USERGROUP_GET, p, "user group");
}

static int update_usergroup(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    char name[256] = "";
    const char *n = json_string_value(json_object_get(body, "group_name"));
    if (n != NULL && berth_api_copy(a, name, sizeof(name), n, "group_name") != 0) {
        json_decref(body);
        return -1;
    }
    json_decref(body);
    if (name[0] == '\0')
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "group_name is required");
    const char *p[] = {berth_api_arg(a, "group_id"), name};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_USERGROUP_UPDATE, p, &r) != 0)
        return -1;
    return r.affected == 1 ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "user group not found");
}

static int delete_usergroup(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "group_id");
    const char *p[] = {id, NULL};
    return berth_api_delete(a, BERTH_Q_USERGROUP_DELETE, p, "usergroup", id, NULL);
}

const berth_api_route_t berth_api_ldap_routes[] = {
    BERTH_API_ROUTE("POST", "/ldap/ping", BERTH_API_P_ADMIN, ping, "pingLdap"),
    BERTH_API_ROUTE("GET", "/ldap/users/search", BERTH_API_P_ADMIN, search_users, "searchLdapUser"),
    BERTH_API_ROUTE("GET", "/ldap/groups/search", BERTH_API_P_ADMIN, search_groups, "searchLdapGroup"),
    BERTH_API_ROUTE("POST", "/ldap/users/import", BERTH_API_P_ADMIN, import_users, "importLdapUser"),
    BERTH_API_ROUTE("GET", "/usergroups", BERTH_API_P_LOGIN, list_usergroups, "listUserGroups"),
    BERTH_API_ROUTE("POST", "/usergroups", BERTH_API_P_ADMIN, create_usergroup, "createUserGroup"),
    BERTH_API_ROUTE("GET", "/usergroups/search", BERTH_API_P_LOGIN, search_usergroups, "searchUserGroups"),
    BERTH_API_ROUTE("GET", "/usergroups/{group_id}", BERTH_API_P_LOGIN, get_usergroup, "getUserGroup"),
    BERTH_API_ROUTE("PUT", "/usergroups/{group_id}", BERTH_API_P_ADMIN, update_usergroup, "updateUserGroup"),
    BERTH_API_ROUTE("DELETE", "/usergroups/{group_id}", BERTH_API_P_ADMIN, delete_usergroup, "deleteUserGroup"),
    BERTH_API_ROUTES_END,
};
