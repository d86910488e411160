/*
 * Principals (local users and robot accounts), what they hold in a project, browser sessions and refresh
 * tokens: the facts the token service, the gatekeeper and the REST API decide on.
 */
#ifndef BERTH_SQL_USERS_H
#define BERTH_SQL_USERS_H

#include <stdint.h>

#include "sql/db.h"

/** A user or a robot account. Robots carry no password hash: `secret_sha256` (hex) verifies them. */
typedef struct st_berth_db_user_t {
    int64_t id;
    char username[256];
    char password_hash[160]; /* users: argon2id PHC string; empty for users without a local password */
    char secret_sha256[65];  /* robots */
    int sysadmin, disabled, robot;
    int ldap; /* onboarded from LDAP: its password is checked there */
} berth_db_user_t;

/** BERTH_ENOTFOUND when there is no such user. */
int berth_db_user_get(berth_dbconn_t *c, const char *username, berth_db_user_t *out, berth_err_t *err);
/** A robot by full name ("robot$p+n"); expired robots come back disabled. BERTH_ENOTFOUND when absent. */
int berth_db_robot_get(berth_dbconn_t *c, const char *name, berth_db_user_t *out, berth_err_t *err);
/** Create `username` as system admin if the users table is empty; *created says whether it did. */
int berth_db_user_bootstrap_admin(berth_dbconn_t *c, const char *username, const char *password_hash, int *created,
                                  berth_err_t *err);
/** Create or reset berthd's internal system user with this password hash. */
int berth_db_user_internal(berth_dbconn_t *c, const char *username, const char *password_hash, berth_err_t *err);
/** 1 if any user exists, 0 if none, <0 on error. */
int berth_db_user_any(berth_dbconn_t *c, berth_err_t *err);

/** What a principal holds in one project. */
typedef struct st_berth_db_project_facts_t {
    int exists, is_public;
    int64_t id;
    int role;          /* users: member role (0: none) */
    char *robot_perms; /* robots: "resource:action ..." granted on this project (malloc'd, may be NULL) */
} berth_db_project_facts_t;
/** Facts for `who` (NULL: anonymous) in `project`. exists = 0 when there is no such project. */
int berth_db_project_facts(berth_dbconn_t *c, const char *project, const berth_db_user_t *who, berth_db_project_facts_t *out,
                           berth_err_t *err);
void berth_db_project_facts_dispose(berth_db_project_facts_t *f);

/** Browser sessions, keyed by the hex SHA-256 of the cookie value. */
int berth_db_session_create(berth_dbconn_t *c, const char *id_sha256_hex, int64_t user_id, const char *csrf, int ttl_seconds,
                            berth_err_t *err);
/**
 * The live session's user and CSRF token (csrf: 65 bytes). *recheck_due says whether the user is LDAP-backed and
 * the session was last checked against the directory more than `recheck_seconds` ago. BERTH_ENOTFOUND when
 * absent, expired or the user is disabled.
 */
int berth_db_session_get(berth_dbconn_t *c, const char *id_sha256_hex, int recheck_seconds, berth_db_user_t *out, char csrf[65],
                         int *recheck_due, berth_err_t *err);
/** Record that the session's user was just found in the directory. */
int berth_db_session_checked(berth_dbconn_t *c, const char *id_sha256_hex, berth_err_t *err);
/** End every browser session of a user. */
int berth_db_sessions_end(berth_dbconn_t *c, int64_t user_id, berth_err_t *err);
int berth_db_session_delete(berth_dbconn_t *c, const char *id_sha256_hex, berth_err_t *err);

/**
 * OAuth2 refresh tokens, keyed by hex SHA-256, bound to `who`'s account id and to the credential its login
 * verified (who->password_hash, or who->secret_sha256 for robots). BERTH_ENOTFOUND when that account or its
 * credential changed meanwhile (disabled, deleted, new password or secret): answer as for bad credentials.
 */
int berth_db_refresh_create(berth_dbconn_t *c, const char *sha256_hex, const berth_db_user_t *who, int ttl_seconds,
                            berth_err_t *err);
/**
 * The account a live refresh token still speaks for, read by id: BERTH_ENOTFOUND when the token is unknown or
 * expired, or its account is deleted, disabled or holds another credential than the one the token came from.
 */
int berth_db_refresh_get(berth_dbconn_t *c, const char *sha256_hex, berth_db_user_t *out, berth_err_t *err);

/**
 * Record an LDAP login: create or refresh `username` (the directory's spelling; email, name, admin flag from the
 * group admin DN) and replace its group list, in one statement. BERTH_ECONFLICT when a local user has that name,
 * compared case-insensitively.
 */
int berth_db_ldap_onboard(berth_dbconn_t *c, const char *username, const char *dn, const char *email, const char *realname,
                          int admin, char *const *groups, size_t ngroups, int64_t *id_out, berth_err_t *err);

/** One audit record; the project is named, its id is looked up when the batch is written. */
typedef struct st_berth_db_audit_t {
    char username[256], remote[64], operation[16], resource_type[16], resource[512], project[256], result[8], detail[128];
    char repo[256], digest[136]; /* pulls: which repository's count and which manifest's pull time to bump */
    int count;                   /* identical events this row stands for (>= 1) */
} berth_db_audit_t;
/** Insert a batch in one statement; pulls also bump their repository's pull count and manifest pull time. */
int berth_db_audit_insert(berth_dbconn_t *c, const berth_db_audit_t *rows, size_t n, berth_err_t *err);

#endif
