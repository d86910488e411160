/*
 * Authorization for every endpoint: what a principal (user, robot or anonymous) may do on a project's
 * resources. Users get Harbor's role matrix (auth/rbac.h) for their member role; robots get exactly their
 * permission list; public projects add the public column; system admins have everything. One query decides.
 */
#ifndef BERTH_AUTH_AUTHZ_H
#define BERTH_AUTH_AUTHZ_H

#include "auth/rbac.h"
#include "sql/users.h"

typedef struct st_berth_authz_t {
    int exists, is_public;
    int64_t project_id;
    int role; /* users: member role, for display */
    unsigned actions[BERTH_RES__COUNT];
} berth_authz_t;

/** Fill `out` for `who` (NULL: anonymous) in `project`. 0, or a negative code with err set (database). */
int berth_authz_project(berth_dbconn_t *c, const berth_db_user_t *who, const char *project, berth_authz_t *out, berth_err_t *err);
/** 1 if every bit of `actions` (BERTH_ACT_*) is granted on `res`. */
int berth_authz_can(const berth_authz_t *z, berth_resource_t res, unsigned actions);
/**
 * 1 if the account `name` (a user or robot, enabled) may push into `project` now, 0 if not, or a negative code
 * with err set (database). Delegated replication policies are confined by it.
 */
int berth_authz_account_may_push(berth_dbconn_t *c, const char *name, const char *project, berth_err_t *err);
/** Token-scope actions (BERTH_ACTION_PULL/PUSH/DELETE) on the project's repositories. */
unsigned berth_authz_repository_scope(const berth_authz_t *z);

/** Parse a Harbor robot permission ("repository", "pull"); returns 0 or -1 for names outside the matrix. */
int berth_authz_parse_permission(const char *resource, const char *action, berth_resource_t *res, unsigned *act);
/** Resource and action names for output (NULL past the end). */
const char *berth_authz_resource_name(berth_resource_t res);
const char *berth_authz_action_name(unsigned act_bit);

#endif
