/*
 * The REST API's queries. PostgreSQL shapes Harbor's JSON (json_build_object/json_agg), so one generic call
 * serves every endpoint: a query returns at most one row whose first column is JSON text (or NULL) and whose
 * optional second column is the total for pagination. Parameters are text, NULL for SQL NULL; their meaning
 * is listed next to each query in sql/api.c.
 */
#ifndef BERTH_SQL_API_H
#define BERTH_SQL_API_H

#include "sql/db.h"

typedef enum {
    BERTH_Q_PROJECTS_LIST,
    BERTH_Q_PROJECT_GET,
    BERTH_Q_PROJECT_NAME_BY_ID,
    BERTH_Q_PROJECT_CREATE,
    BERTH_Q_PROJECT_UPDATE,
    BERTH_Q_PROJECT_DELETE,
    BERTH_Q_PROJECT_SUMMARY,
    BERTH_Q_MEMBERS_LIST,
    BERTH_Q_MEMBER_GET,
    BERTH_Q_MEMBER_ADD,
    BERTH_Q_MEMBER_ADD_GROUP,
    BERTH_Q_MEMBER_UPDATE,
    BERTH_Q_MEMBER_DELETE,
    BERTH_Q_REPOS_LIST,
    BERTH_Q_REPO_GET,
    BERTH_Q_REPO_DELETE,
    BERTH_Q_ARTIFACTS_LIST,
    BERTH_Q_ARTIFACT_GET,
    BERTH_Q_TAGS_LIST,
    BERTH_Q_TAG_CREATE,
    BERTH_Q_USERS_LIST,
    BERTH_Q_USERS_SEARCH,
    BERTH_Q_USER_GET,
    BERTH_Q_USER_CREATE,
    BERTH_Q_USER_UPDATE,
    BERTH_Q_USER_PASSWORD,
    BERTH_Q_USER_IS_LDAP,
    BERTH_Q_USER_SYSADMIN,
    BERTH_Q_USER_DELETE,
    BERTH_Q_ROBOTS_LIST,
    BERTH_Q_ROBOT_GET,
    BERTH_Q_ROBOT_CREATE,
    BERTH_Q_ROBOT_PERMS_CLEAR,
    BERTH_Q_ROBOT_PERMS_ADD,
    BERTH_Q_ROBOT_UPDATE,
    BERTH_Q_ROBOT_SECRET,
    BERTH_Q_ROBOT_DELETE,
    BERTH_Q_AUDIT_LIST,
    BERTH_Q_SEARCH,
    BERTH_Q_PING,
    BERTH_Q_USERGROUPS_LIST,
    BERTH_Q_USERGROUP_GET,
    BERTH_Q_USERGROUP_ENSURE,
    BERTH_Q_USERGROUP_UPDATE,
    BERTH_Q_USERGROUP_DELETE,
    BERTH_Q_USER_IMPORTED,
    BERTH_Q_REG_LIST,
    BERTH_Q_REG_GET,
    BERTH_Q_REG_ENGINE,
    BERTH_Q_REG_CREATE,
    BERTH_Q_REG_UPDATE,
    BERTH_Q_REG_DELETE,
    BERTH_Q_POL_LIST,
    BERTH_Q_POL_GET,
    BERTH_Q_POL_CREATE,
    BERTH_Q_POL_UPDATE,
    BERTH_Q_POL_DELETE,
    BERTH_Q_POL_EVENT,
    BERTH_Q_POL_SCHEDULED,
    BERTH_Q_EXEC_LIST,
    BERTH_Q_EXEC_GET,
    BERTH_Q_EXEC_CREATE,
    BERTH_Q_EXEC_STOP,
    BERTH_Q_EXEC_FINISH,
    BERTH_Q_EXEC_FAIL,
    BERTH_Q_EXEC_RUNNING,
    BERTH_Q_TASK_ADD,
    BERTH_Q_TASK_LIST,
    BERTH_Q_TASK_LOG,
    BERTH_Q_TASK_CLAIM,
    BERTH_Q_TASK_DONE,
    BERTH_Q_TASK_PROGRESS,
    BERTH_Q_TASKS_RESET,
    BERTH_Q_UPLOAD_GET,
    BERTH_Q_UPLOAD_PUT,
    BERTH_Q_UPLOAD_DEL,
    /* web UI (issue #11) */
    BERTH_Q_ARTIFACT_MANIFEST,
    BERTH_Q_STATISTICS,
    BERTH_Q_STATS_STORAGE,
    BERTH_Q_STATS_ACTIVITY,
    BERTH_Q_STATS_REPLICATION,
    BERTH_Q_PROJECT_REPO_COUNT,
    BERTH_Q__COUNT
} berth_q_t;

typedef struct st_berth_db_json_t {
    char *json;      /* malloc'd JSON text, NULL when the query returned no row or NULL */
    long long total; /* second column, -1 when absent */
    long affected;   /* rows the statement changed (PQcmdTuples), 0 for queries */
} berth_db_json_t;

/** Run query `q` with its parameters. 0 with *out filled (free out->json), or a negative code with err set. */
int berth_db_api(berth_dbconn_t *c, berth_q_t q, const char *const *params, berth_db_json_t *out, berth_err_t *err);

#endif
