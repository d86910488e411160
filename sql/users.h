/* Users and project access facts for the token service and (later) the gatekeeper. */
#ifndef BERTH_SQL_USERS_H
#define BERTH_SQL_USERS_H

#include <stdint.h>

#include "sql/db.h"

typedef struct st_berth_db_user_t {
    int64_t id;
    char username[256];
    char password_hash[160]; /* empty for users without a local password */
    int sysadmin, disabled;
} berth_db_user_t;

/** BERTH_ENOTFOUND when there is no such user. */
int berth_db_user_get(berth_dbconn_t *c, const char *username, berth_db_user_t *out, berth_err_t *err);
/** Create `username` as system admin if the users table is empty; *created says whether it did. */
int berth_db_user_bootstrap_admin(berth_dbconn_t *c, const char *username, const char *password_hash, int *created,
                                  berth_err_t *err);
/** 1 if any user exists, 0 if none, <0 on error. */
int berth_db_user_any(berth_dbconn_t *c, berth_err_t *err);
/** What a user (id 0: anonymous) has in a project: whether it is public and the user's member role (0: none). */
int berth_db_project_access(berth_dbconn_t *c, const char *project, int64_t user_id, int *is_public, int *role,
                            berth_err_t *err);

#endif
