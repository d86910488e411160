#include "auth/rbac.h"

#include "auth/scope.h"

#define C BERTH_ACT_CREATE
#define R BERTH_ACT_READ
#define U BERTH_ACT_UPDATE
#define D BERTH_ACT_DELETE
#define L BERTH_ACT_LIST
#define PULL BERTH_ACT_PULL
#define PUSH BERTH_ACT_PUSH

/* Rows: resources. Columns: none, projectAdmin, developer, guest, maintainer, limitedGuest, public. */
static const unsigned matrix[BERTH_RES__COUNT][7] = {
    [BERTH_RES_PROJECT] = {0, R | U | D, R, R, R, R, R},
    [BERTH_RES_METADATA] = {0, C | R | U | D, 0, 0, R, 0, 0},
    [BERTH_RES_MEMBER] = {0, C | R | U | D | L, R | L, R | L, R | L, 0, 0},
    [BERTH_RES_LOG] = {0, L, 0, 0, 0, 0, 0},
    [BERTH_RES_QUOTA] = {0, R, R, R, R, R, 0},
    [BERTH_RES_REPOSITORY] = {0, C | R | U | D | L | PULL | PUSH, C | R | U | L | PULL | PUSH, R | L | PULL,
                              C | R | U | D | L | PULL | PUSH, R | L | PULL, L | PULL},
    [BERTH_RES_ARTIFACT] = {0, C | R | D | L, C | R | L, R | L, C | R | D | L, R | L, R | L},
    [BERTH_RES_TAG] = {0, C | D | L, C | L, L, C | D | L, L, L},
    [BERTH_RES_ACCESSORY] = {0, L, L, L, L, L, L},
    [BERTH_RES_ROBOT] = {0, C | R | U | D | L, R | L, R | L, R | L, 0, 0},
    /* project admins manage immutable tag rules and retention; members read them */
    [BERTH_RES_IMMUTABLE_TAG] = {0, C | R | U | D | L, R | L, R | L, R | L, R | L, 0},
    [BERTH_RES_TAG_RETENTION] = {0, C | R | U | D | L, R | L, R | L, R | L, R | L, 0},
    [BERTH_RES_NOTIFICATION_POLICY] = {0, C | R | U | D | L, 0, 0, R | L, 0, 0},
};
#define PUBLIC_COLUMN 6

unsigned berth_rbac_actions(const berth_subject_t *who, int project_public, berth_resource_t res)
{
    if (res >= BERTH_RES__COUNT)
        return 0; /* deny by default */
    if (who != NULL && who->sysadmin)
        return ~0u;
    unsigned a = 0;
    if (who != NULL && who->authenticated && who->role >= BERTH_ROLE_PROJECT_ADMIN && who->role <= BERTH_ROLE_LIMITED_GUEST)
        a |= matrix[res][who->role];
    if (project_public)
        a |= matrix[res][PUBLIC_COLUMN];
    return a;
}

int berth_rbac_allows(const berth_subject_t *who, int project_public, berth_resource_t res, unsigned actions)
{
    return actions != 0 && (berth_rbac_actions(who, project_public, res) & actions) == actions;
}

unsigned berth_rbac_scope_bits(unsigned a)
{
    unsigned s = 0;
    if (a & PULL)
        s |= BERTH_ACTION_PULL;
    if ((a & PUSH) && (a & PULL)) /* Harbor: push requires pull */
        s |= BERTH_ACTION_PUSH;
    if (a & D)
        s |= BERTH_ACTION_DELETE;
    return s;
}

unsigned berth_rbac_repository_scope(const berth_subject_t *who, int project_public)
{
    return berth_rbac_scope_bits(berth_rbac_actions(who, project_public, BERTH_RES_REPOSITORY));
}
