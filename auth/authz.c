#include "auth/authz.h"

#include <stdlib.h>
#include <string.h>

#include "auth/service.h"

static const char *const resource_names[BERTH_RES__COUNT] = {
    [BERTH_RES_PROJECT] = "project",
    [BERTH_RES_METADATA] = "metadata",
    [BERTH_RES_MEMBER] = "member",
    [BERTH_RES_LOG] = "log",
    [BERTH_RES_QUOTA] = "quota",
    [BERTH_RES_REPOSITORY] = "repository",
    [BERTH_RES_ARTIFACT] = "artifact",
    [BERTH_RES_TAG] = "tag",
    [BERTH_RES_ACCESSORY] = "accessory",
    [BERTH_RES_ROBOT] = "robot",
    [BERTH_RES_IMMUTABLE_TAG] = "immutable-tag",
    [BERTH_RES_TAG_RETENTION] = "tag-retention",
    [BERTH_RES_NOTIFICATION_POLICY] = "notification-policy",
};
static const char *const action_names[] = {"create", "read", "update", "delete", "list", "pull", "push"};
#define NACTIONS (sizeof(action_names) / sizeof(action_names[0]))

const char *berth_authz_resource_name(berth_resource_t res)
{
    return (unsigned)res < BERTH_RES__COUNT ? resource_names[res] : NULL;
}

const char *berth_authz_action_name(unsigned bit)
{
    for (unsigned i = 0; i < NACTIONS; i++)
        if (bit == 1u << i)
            return action_names[i];
    return NULL;
}

int berth_authz_parse_permission(const char *resource, const char *action, berth_resource_t *res, unsigned *act)
{
    int r = -1, a = -1;
    for (int i = 0; i < BERTH_RES__COUNT; i++)
        if (strcmp(resource, resource_names[i]) == 0)
            r = i;
    for (unsigned i = 0; i < NACTIONS; i++)
        if (strcmp(action, action_names[i]) == 0)
            a = (int)i;
    if (r < 0 || a < 0)
        return -1;
    *res = (berth_resource_t)r;
    *act = 1u << a;
    return 0;
}

int berth_authz_project(berth_dbconn_t *c, const berth_db_user_t *who, const char *project, berth_authz_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    berth_db_project_facts_t f;
    int rc = berth_db_project_facts(c, project, who, &f, err);
    if (rc != 0)
        return rc;
    out->exists = f.exists;
    out->is_public = f.is_public;
    out->project_id = f.id;
    out->role = f.role;
    if (f.exists) {
        berth_subject_t s = {.authenticated = who != NULL,
                             .sysadmin = who != NULL && who->sysadmin,
                             .role = who != NULL && !who->robot ? (berth_role_t)f.role : BERTH_ROLE_NONE};
        for (int r = 0; r < BERTH_RES__COUNT; r++)
            out->actions[r] = berth_rbac_actions(&s, f.is_public, (berth_resource_t)r);
        /* a robot holds its listed grants and nothing it was not given (plus what the public has) */
        for (char *save = NULL, *tok = f.robot_perms != NULL ? strtok_r(f.robot_perms, " ", &save) : NULL; tok != NULL;
             tok = strtok_r(NULL, " ", &save)) {
            char *colon = strchr(tok, ':');
            berth_resource_t res;
            unsigned act;
            if (colon == NULL)
                continue;
            *colon = '\0';
            if (berth_authz_parse_permission(tok, colon + 1, &res, &act) == 0)
                out->actions[res] |= act;
            out->actions[BERTH_RES_PROJECT] |= BERTH_ACT_READ; /* a robot granted anything here may see the project */
        }
    } else if (who != NULL && who->sysadmin) {
        for (int r = 0; r < BERTH_RES__COUNT; r++)
            out->actions[r] = ~0u; /* system admins may create a project by pushing to it */
    }
    berth_db_project_facts_dispose(&f);
    return 0;
}

int berth_authz_account_may_push(berth_dbconn_t *c, const char *name, const char *project, berth_err_t *err)
{
    berth_db_user_t who;
    int rc = strncmp(name, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0 ? berth_db_robot_get(c, name, &who, err)
                                                                                : berth_db_user_get(c, name, &who, err);
    if (rc == BERTH_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    if (who.disabled)
        return 0;
    if (who.sysadmin)
        return 1;
    berth_authz_t z;
    if ((rc = berth_authz_project(c, &who, project, &z, err)) != 0)
        return rc;
    return z.exists && berth_authz_can(&z, BERTH_RES_REPOSITORY, BERTH_ACT_PUSH);
}

int berth_authz_can(const berth_authz_t *z, berth_resource_t res, unsigned actions)
{
    return (unsigned)res < BERTH_RES__COUNT && actions != 0 && (z->actions[res] & actions) == actions;
}

unsigned berth_authz_repository_scope(const berth_authz_t *z)
{
    return berth_rbac_scope_bits(z->actions[BERTH_RES_REPOSITORY]);
}
