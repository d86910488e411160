/*
 * Every prepared statement of sql/, one id each. A connection prepares a statement on first use under the name
 * s<id> and remembers that in prepared[id] (sql/db.c): two statements sharing an id would silently run one in
 * place of the other, so the ids come from this one list and nowhere else. The SQL text lives in the file that
 * uses it, in that file's table (sql/db_internal.h); berth_db_statements_check() proves every id has exactly one
 * text, at start and in unit_sql.
 */
#ifndef BERTH_SQL_STATEMENTS_H
#define BERTH_SQL_STATEMENTS_H

#include "core/err.h"

/* clang-format off */
#define BERTH_SQL_STATEMENTS(X) \
    /* sql/registry.c: /v2 metadata and upload sessions */ \
    X(BERTH_SQL_REPO_ID) \
    X(BERTH_SQL_PROJECT_ENSURE) \
    X(BERTH_SQL_REPO_ENSURE) \
    X(BERTH_SQL_BLOB_IN_REPO) \
    X(BERTH_SQL_BLOB_INSERT) \
    X(BERTH_SQL_BLOB_LINK) \
    X(BERTH_SQL_BLOB_UNLINK) \
    X(BERTH_SQL_MANIFEST_INSERT) \
    X(BERTH_SQL_MANIFEST_ID) \
    X(BERTH_SQL_REF_INSERT) \
    X(BERTH_SQL_TAG_UPSERT) \
    X(BERTH_SQL_MISSING_BLOB) \
    X(BERTH_SQL_MISSING_MANIFEST) \
    X(BERTH_SQL_MANIFEST_BY_TAG) \
    X(BERTH_SQL_MANIFEST_BY_DIGEST) \
    X(BERTH_SQL_MANIFEST_DELETE) \
    X(BERTH_SQL_TAG_DELETE) \
    X(BERTH_SQL_TAGS_LIST) \
    X(BERTH_SQL_CATALOG) \
    X(BERTH_SQL_REFERRERS) \
    X(BERTH_SQL_UPLOAD_CREATE) \
    X(BERTH_SQL_UPLOAD_GET) \
    X(BERTH_SQL_UPLOAD_DELETE) \
    X(BERTH_SQL_UPLOAD_TOUCH) \
    X(BERTH_SQL_UPLOAD_LOCK) \
    X(BERTH_SQL_UPLOAD_SAVE) \
    X(BERTH_SQL_UPLOAD_STATE) \
    X(BERTH_SQL_PUSH_DONE) \
    X(BERTH_SQL_PROJECT_ID) \
    X(BERTH_SQL_NOTIFY) \
    X(BERTH_SQL_UPLOAD_EXPIRE) \
    X(BERTH_SQL_PROJECT_PUSHABLE) \
    X(BERTH_SQL_REPO_DELETE) \
    /* sql/proxy.c: proxy-cache projects */ \
    X(BERTH_SQL_PROXY_OF) \
    X(BERTH_SQL_PROXY_CHECKED) \
    X(BERTH_SQL_PROXY_TRYLOCK) \
    X(BERTH_SQL_PROXY_UNLOCK) \
    X(BERTH_SQL_BLOB_FILE_LOCK) \
    X(BERTH_SQL_QUOTA_LOCK) \
    X(BERTH_SQL_QUOTA_ENSURE) \
    X(BERTH_SQL_QUOTA_USED) \
    X(BERTH_SQL_QUOTA_LOCK_REPO) \
    /* sql/isa.c: ISA variant rows, view indexes, scan verdicts */ \
    X(BERTH_SQL_ISA_INSERT) \
    X(BERTH_SQL_ISA_POLICY) \
    X(BERTH_SQL_ISA_VARIANTS) \
    X(BERTH_SQL_ISA_VIEW_PUT) \
    X(BERTH_SQL_ISA_VIEW_GET) \
    X(BERTH_SQL_ISA_SCAN_PUT) \
    X(BERTH_SQL_ISA_SCAN_HOOK) \
    X(BERTH_SQL_ISA_UNSCANNED) \
    X(BERTH_SQL_ISA_CLAIM) \
    X(BERTH_SQL_ISA_UNCLAIM) \
    /* sql/gateway.c: HPC squashfs jobs */ \
    X(BERTH_Q_SQFS_MODE) \
    X(BERTH_Q_SQFS_ENSURE) \
    X(BERTH_Q_SQFS_CLAIM) \
    X(BERTH_Q_SQFS_PROGRESS) \
    X(BERTH_Q_SQFS_DONE) \
    X(BERTH_Q_SQFS_FAIL) \
    X(BERTH_Q_SQFS_RESET) \
    X(BERTH_Q_SQFS_GET) \
    X(BERTH_Q_SQFS_FORGET) \
    X(BERTH_Q_SQFS_COUNTS) \
    X(BERTH_Q_SQFS_LEVEL) \
    X(BERTH_Q_SQFS_MISSED) \
    /* sql/users.c: principals, sessions, tokens, audit */ \
    X(BERTH_SQL_USER_GET) \
    X(BERTH_SQL_USER_BOOTSTRAP) \
    X(BERTH_SQL_PROJECT_FACTS) \
    X(BERTH_SQL_USER_ANY) \
    X(BERTH_SQL_ROBOT_GET) \
    X(BERTH_SQL_SESSION_CREATE) \
    X(BERTH_SQL_SESSION_GET) \
    X(BERTH_SQL_SESSION_DELETE) \
    X(BERTH_SQL_REFRESH_CREATE) \
    X(BERTH_SQL_REFRESH_GET) \
    X(BERTH_SQL_AUDIT_INSERT) \
    X(BERTH_SQL_LDAP_UPSERT) \
    X(BERTH_SQL_INTERNAL_USER) \
    X(BERTH_SQL_SESSION_CHECKED) \
    X(BERTH_SQL_SESSIONS_END) \
    /* sql/api.c: the REST API's JSON queries (berth_db_api) */ \
    X(BERTH_Q_PROJECTS_LIST) \
    X(BERTH_Q_PROJECT_GET) \
    X(BERTH_Q_PROJECT_NAME_BY_ID) \
    X(BERTH_Q_PROJECT_CREATE) \
    X(BERTH_Q_PROJECT_UPDATE) \
    X(BERTH_Q_PROJECT_DELETE) \
    X(BERTH_Q_PROJECT_SUMMARY) \
    X(BERTH_Q_QUOTAS_LIST) \
    X(BERTH_Q_QUOTA_GET) \
    X(BERTH_Q_QUOTA_UPDATE) \
    X(BERTH_Q_MEMBERS_LIST) \
    X(BERTH_Q_MEMBER_GET) \
    X(BERTH_Q_MEMBER_ADD) \
    X(BERTH_Q_MEMBER_ADD_GROUP) \
    X(BERTH_Q_MEMBER_UPDATE) \
    X(BERTH_Q_MEMBER_DELETE) \
    X(BERTH_Q_REPOS_LIST) \
    X(BERTH_Q_REPO_GET) \
    X(BERTH_Q_ARTIFACTS_LIST) \
    X(BERTH_Q_ARTIFACT_GET) \
    X(BERTH_Q_TAGS_LIST) \
    X(BERTH_Q_TAG_CREATE) \
    X(BERTH_Q_USERS_LIST) \
    X(BERTH_Q_USERS_SEARCH) \
    X(BERTH_Q_USER_GET) \
    X(BERTH_Q_USER_CREATE) \
    X(BERTH_Q_USER_UPDATE) \
    X(BERTH_Q_USER_PASSWORD) \
    X(BERTH_Q_USER_IS_LDAP) \
    X(BERTH_Q_USER_SYSADMIN) \
    X(BERTH_Q_USER_DELETE) \
    X(BERTH_Q_ROBOTS_LIST) \
    X(BERTH_Q_ROBOT_GET) \
    X(BERTH_Q_ROBOT_CREATE) \
    X(BERTH_Q_ROBOT_PERMS_CLEAR) \
    X(BERTH_Q_ROBOT_PERMS_ADD) \
    X(BERTH_Q_ROBOT_UPDATE) \
    X(BERTH_Q_ROBOT_SECRET) \
    X(BERTH_Q_ROBOT_DELETE) \
    X(BERTH_Q_AUDIT_LIST) \
    X(BERTH_Q_SEARCH) \
    X(BERTH_Q_PING) \
    X(BERTH_Q_USERGROUPS_LIST) \
    X(BERTH_Q_USERGROUP_GET) \
    X(BERTH_Q_USERGROUP_ENSURE) \
    X(BERTH_Q_USERGROUP_UPDATE) \
    X(BERTH_Q_USERGROUP_DELETE) \
    X(BERTH_Q_USER_IMPORTED) \
    X(BERTH_Q_ARTIFACT_MANIFEST) \
    X(BERTH_Q_STATISTICS) \
    X(BERTH_Q_STATS_STORAGE) \
    X(BERTH_Q_STATS_ACTIVITY) \
    X(BERTH_Q_STATS_REPLICATION) \
    X(BERTH_Q_PROJECT_REPO_COUNT) \
    X(BERTH_Q_IMM_LIST) \
    X(BERTH_Q_IMM_CREATE) \
    X(BERTH_Q_IMM_UPDATE) \
    X(BERTH_Q_IMM_DELETE) \
    X(BERTH_Q_RET_CREATE) \
    X(BERTH_Q_RET_GET) \
    X(BERTH_Q_RET_PROJECT) \
    X(BERTH_Q_RET_UPDATE) \
    X(BERTH_Q_RET_DELETE) \
    X(BERTH_Q_RET_EXEC_CREATE) \
    X(BERTH_Q_RET_EXEC_LIST) \
    X(BERTH_Q_RET_EXEC_STOP) \
    X(BERTH_Q_RET_TASK_LIST) \
    X(BERTH_Q_RET_TASK_LOG) \
    /* sql/replication.c: endpoints, policies, executions, tasks (berth_db_api) */ \
    X(BERTH_Q_REG_LIST) \
    X(BERTH_Q_REG_GET) \
    X(BERTH_Q_REG_ENGINE) \
    X(BERTH_Q_REG_CREATE) \
    X(BERTH_Q_REG_UPDATE) \
    X(BERTH_Q_REG_DELETE) \
    X(BERTH_Q_POL_LIST) \
    X(BERTH_Q_POL_GET) \
    X(BERTH_Q_POL_CREATE) \
    X(BERTH_Q_POL_UPDATE) \
    X(BERTH_Q_POL_DELETE) \
    X(BERTH_Q_POL_EVENT) \
    X(BERTH_Q_POL_SCHEDULED) \
    X(BERTH_Q_POL_FIRE) \
    X(BERTH_Q_EXEC_LIST) \
    X(BERTH_Q_EXEC_GET) \
    X(BERTH_Q_EXEC_CREATE) \
    X(BERTH_Q_EXEC_STOP) \
    X(BERTH_Q_EXEC_FINISH) \
    X(BERTH_Q_EXEC_FAIL) \
    X(BERTH_Q_EXEC_RUNNING) \
    X(BERTH_Q_TASK_ADD) \
    X(BERTH_Q_TASK_LIST) \
    X(BERTH_Q_TASK_LOG) \
    X(BERTH_Q_TASK_CLAIM) \
    X(BERTH_Q_TASK_DONE) \
    X(BERTH_Q_TASK_PROGRESS) \
    X(BERTH_Q_TASKS_RESET) \
    X(BERTH_Q_UPLOAD_GET) \
    X(BERTH_Q_UPLOAD_PUT) \
    X(BERTH_Q_UPLOAD_DEL) \
    /* sql/immutable.c: immutable tag rules and the checks inside tag changes */ \
    X(BERTH_SQL_IMM_RULES) \
    X(BERTH_SQL_IMM_TAG_LOCK) \
    X(BERTH_SQL_TAG_INSERT_NEW) \
    X(BERTH_SQL_IMM_TAG_EXISTS) \
    X(BERTH_SQL_IMM_MANIFEST_TAGS) \
    X(BERTH_SQL_IMM_REPO_TAGS) \
    /* sql/gc.c: garbage collection runs, schedule, marks and sweeps (berth_db_api) */ \
    X(BERTH_Q_GC_LIST) \
    X(BERTH_Q_GC_GET) \
    X(BERTH_Q_GC_LOG) \
    X(BERTH_Q_GC_STOP) \
    X(BERTH_Q_GC_CREATE) \
    X(BERTH_Q_GC_SCHEDULE_GET) \
    X(BERTH_Q_GC_SCHEDULE_PUT) \
    X(BERTH_Q_GC_SCHEDULE_FIRE) \
    X(BERTH_Q_GC_CLAIM) \
    X(BERTH_Q_GC_RENEW) \
    X(BERTH_Q_GC_PHASE) \
    X(BERTH_Q_GC_NOTE) \
    X(BERTH_Q_GC_END) \
    X(BERTH_Q_GC_LEAVE) \
    X(BERTH_Q_GC_MARK_MANIFESTS) \
    X(BERTH_Q_GC_MARK_LINKS) \
    X(BERTH_Q_GC_MARK_BLOBS) \
    X(BERTH_Q_GC_MARKED) \
    X(BERTH_Q_GC_SETTLE_QUOTAS) \
    X(BERTH_Q_GC_WINDOWS) \
    X(BERTH_Q_GC_LOCK_MANIFESTS) \
    X(BERTH_Q_GC_LOCK_LINKS) \
    X(BERTH_Q_GC_LOCK_BLOBS) \
    X(BERTH_Q_GC_SWEEP_MANIFESTS) \
    X(BERTH_Q_GC_SWEEP_LINKS) \
    X(BERTH_Q_GC_SWEEP_BLOBS) \
    X(BERTH_Q_GC_PROGRESS) \
    X(BERTH_Q_GC_FILES_LOCK) \
    X(BERTH_Q_GC_FILES_UNOWNED) \
    X(BERTH_Q_GC_FILES_UNLOCK) \
    X(BERTH_Q_GC_ORPHANS) \
    X(BERTH_Q_GC_PRUNE) \
    X(BERTH_Q_GC_QUIET) \
    /* sql/retention.c: retention schedules, claims, candidates, tasks */ \
    X(BERTH_SQL_RET_SCHEDULED) \
    X(BERTH_SQL_RET_FIRE) \
    X(BERTH_SQL_RET_CLAIM) \
    X(BERTH_SQL_RET_TASKS_CLEAR) \
    X(BERTH_SQL_RET_HEARTBEAT) \
    X(BERTH_SQL_RET_FINISH) \
    X(BERTH_SQL_RET_CANDIDATES) \
    X(BERTH_SQL_RET_TASK_ADD) \
    /* sql/webhook.c: the outbox insert, policies, executions, tasks, delivery */ \
    X(BERTH_SQL_WEBHOOK_ENQUEUE) \
    X(BERTH_Q_WH_POL_LIST) \
    X(BERTH_Q_WH_POL_GET) \
    X(BERTH_Q_WH_POL_CREATE) \
    X(BERTH_Q_WH_POL_UPDATE) \
    X(BERTH_Q_WH_POL_DELETE) \
    X(BERTH_Q_WH_EXEC_LIST) \
    X(BERTH_Q_WH_TASK_LIST) \
    X(BERTH_Q_WH_TASK_LOG) \
    X(BERTH_Q_WH_EXEC_RETRY) \
    X(BERTH_Q_WH_DISPATCH) \
    X(BERTH_Q_WH_CLAIM) \
    X(BERTH_Q_WH_DONE)
/* clang-format on */

typedef enum {
#define BERTH_SQL__ID(id) id,
    BERTH_SQL_STATEMENTS(BERTH_SQL__ID)
#undef BERTH_SQL__ID
        BERTH_SQL__COUNT
} berth_sql_id_t;

/** The id's name ("BERTH_SQL_REPO_ID") for logs; "?" outside the list. */
const char *berth_sql_name(int id);
/**
 * Walk every file's statement table: each id has exactly one text, stored under its own id, with as many
 * parameters as the text uses ($1..$n). 0, or BERTH_ERROR with err naming the first fault.
 */
int berth_db_statements_check(berth_err_t *err);

#endif
