/* The user group a request names (by id, or by LDAP DN with an optional name: created if new). Project members and
 * /usergroups both take one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/ldap.h"
#include "registry/api/internal.h"

int berth_api_group_id(berth_api_t *a, json_t *g, char id[24])
{
    json_t *idv = json_object_get(g, "id");
    if (json_is_integer(idv) && json_integer_value(idv) > 0) {
        snprintf(id, 24, "%lld", (long long)json_integer_value(idv));
        return 0;
    }
    const char *dn = json_string_value(json_object_get(g, "ldap_group_dn"));
    const char *name = json_string_value(json_object_get(g, "group_name"));
    if (dn == NULL || dn[0] == '\0' || strlen(dn) > 1000)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "a group needs an id or an ldap_group_dn");
    char norm[1024];
    berth_ldap_dn_normalize(dn, norm, sizeof(norm));
    const char *p[] = {name != NULL && name[0] ? name : norm, norm};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_USERGROUP_ENSURE, p, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    snprintf(id, 24, "%lld", (long long)json_integer_value(json_object_get(v, "id")));
    json_decref(v);
    free(r.json);
    return 0;
}
