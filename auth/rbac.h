/*
 * Harbor's role model as data: which actions each project role has on each project resource
 * (read from Harbor's rbac_role.go; docs/design.md), plus what a public project adds.
 * One table, one lookup: every endpoint asks berth_rbac_allows(); nothing hard-codes a role elsewhere.
 */
#ifndef BERTH_AUTH_RBAC_H
#define BERTH_AUTH_RBAC_H

typedef enum {
    BERTH_ROLE_NONE = 0,
    BERTH_ROLE_PROJECT_ADMIN = 1,
    BERTH_ROLE_DEVELOPER = 2,
    BERTH_ROLE_GUEST = 3,
    BERTH_ROLE_MAINTAINER = 4,
    BERTH_ROLE_LIMITED_GUEST = 5,
} berth_role_t;

typedef enum {
    BERTH_RES_PROJECT,
    BERTH_RES_METADATA,
    BERTH_RES_MEMBER,
    BERTH_RES_LOG,
    BERTH_RES_QUOTA,
    BERTH_RES_REPOSITORY,
    BERTH_RES_ARTIFACT,
    BERTH_RES_TAG,
    BERTH_RES_ACCESSORY,
    BERTH_RES_ROBOT,
    BERTH_RES_IMMUTABLE_TAG,
    BERTH_RES_TAG_RETENTION,
    BERTH_RES_NOTIFICATION_POLICY, /* webhook policies */
    BERTH_RES__COUNT
} berth_resource_t;

enum {
    BERTH_ACT_CREATE = 1,
    BERTH_ACT_READ = 2,
    BERTH_ACT_UPDATE = 4,
    BERTH_ACT_DELETE = 8,
    BERTH_ACT_LIST = 16,
    BERTH_ACT_PULL = 32,
    BERTH_ACT_PUSH = 64,
};

typedef struct st_berth_subject_t {
    int authenticated;
    int sysadmin;
    berth_role_t role; /* the highest of the user's direct and group grants in the project */
} berth_subject_t;

/** Actions `who` has on `res` in a project that is public or not. System admins have everything. */
unsigned berth_rbac_actions(const berth_subject_t *who, int project_public, berth_resource_t res);
/** 1 if every bit of `actions` is allowed. */
int berth_rbac_allows(const berth_subject_t *who, int project_public, berth_resource_t res, unsigned actions);
/** Token-scope actions (BERTH_ACTION_PULL/PUSH/DELETE of auth/scope.h) on a repository of such a project. */
unsigned berth_rbac_repository_scope(const berth_subject_t *who, int project_public);
/** Token-scope actions for a set of repository actions (BERTH_ACT_*); push requires pull, as in Harbor. */
unsigned berth_rbac_scope_bits(unsigned repository_actions);

#endif
