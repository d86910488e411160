/* The token service (GET /service/token): who are you, what may you do, here is a token for exactly that. */
#ifndef BERTH_AUTH_SERVICE_H
#define BERTH_AUTH_SERVICE_H

#include <stddef.h>

#include "auth/token.h"
#include "core/resp.h"
#include "sql/db.h"
#include "sql/users.h"

struct st_berth_ldap_t;

typedef struct st_berth_authsvc_t {
    berth_db_t *db;
    struct st_berth_ldap_t *ldap; /* NULL: local users only */
    berth_token_keys_t *keys;
    const char *realm;   /* external URL; the token endpoint is <realm>/service/token */
    const char *issuer;  /* iss */
    const char *service; /* aud, and the service= clients must name */
    int ttl_seconds;
    /* how long a gate decision is remembered, and so how long a deleted or disabled account, a removed membership
     * or a changed password can still work (tokens included: they are re-checked against the account after it) */
    int decision_ttl_seconds;
    int ldap_recheck_seconds; /* browser sessions of LDAP users are re-checked against the directory this often */
} berth_authsvc_t;

typedef struct st_berth_token_req_t {
    const char *query; /* without '?' */
    size_t query_len;
    const char *authorization; /* header value or NULL */
    size_t authorization_len;
    const char *method; /* "GET" or "POST" (OAuth2 form in body) */
    const char *body;
    size_t body_len;
    const char *remote; /* client address, for the audit log */
} berth_token_req_t;

#define BERTH_ROBOT_PREFIX "robot$"

/**
 * Answer a token request (GET with Basic or anonymous; POST with an OAuth2 password or refresh_token grant;
 * offline_token=true / access_type=offline add a refresh_token). Blocking (password hashing, SQL): call on a worker. Grants
 * requested ∩ permitted, permitted being Harbor's role matrix (auth/rbac.h) for the user's project role, plus pull on public
 * projects. Bad credentials get 401 and nothing else; unknown users cost the same time as known ones.
 */
void berth_authsvc_token(berth_authsvc_t *a, const berth_token_req_t *rq, berth_resp_t *resp);
/**
 * Check a local user's password or a robot's secret (constant time, same cost for unknown users), or, for names
 * that are not local, an LDAP login (onboarding the user under the directory's spelling of the name and
 * refreshing its groups); every failure costs one argon2 verification. 0 with *out, BERTH_EUNAUTH,
 * BERTH_EUNAVAIL (database or LDAP unreachable, or — on a worker that may not hash, see auth/offload.h — moving
 * to the auth workers), or BERTH_ERETRY while (name, remote) is throttled after repeated failures (answer with
 * berth_authsvc_too_many).
 */
int berth_authsvc_login(berth_authsvc_t *a, const char *username, const char *password, const char *remote, berth_db_user_t *out);
/** Load a user or robot by name for a session or refresh token; BERTH_EUNAUTH when disabled or expired. */
int berth_authsvc_principal(berth_authsvc_t *a, const char *name, berth_db_user_t *out);
/** A 32-byte random secret as base64url (43 chars) and the hex SHA-256 that is stored in its place. */
void berth_authsvc_random_secret(char out[48], char hex[65]);
void berth_authsvc_sha256_hex(const char *s, char hex[65]);
/**
 * An LDAP-backed account checked against the directory again (refresh grants, browser sessions): 0 with *u
 * re-read (groups and admin flag as the directory has them now); BERTH_EUNAUTH when the entry is gone or LDAP
 * is no longer configured; BERTH_EUNAVAIL when the directory does not answer. Local users and robots: 0.
 */
int berth_authsvc_recheck(berth_authsvc_t *a, berth_db_user_t *u);
/** A 429 TOOMANYREQUESTS answer with Retry-After for a throttled name. */
void berth_authsvc_too_many(berth_resp_t *resp, const char *username, const char *remote);
/** Seconds a throttled (name, remote) must still wait (0: none). */
long berth_authsvc_retry_after(const char *username, const char *remote);
/** Sets *out to the token-scope actions `user` (NULL: anonymous) may have on `scope` (Harbor's matrix). Returns 0, or
 *  BERTH_EUNAVAIL when the database needed to decide does not answer (*out is then 0: answer 503, never 403). */
int berth_authsvc_permitted(berth_authsvc_t *a, const berth_db_user_t *user, const berth_scope_t *scope, unsigned *out);
/** Create the first admin from `password` (or a generated one, printed once to stderr) when no user exists. */
int berth_authsvc_bootstrap(berth_authsvc_t *a, const char *password, berth_err_t *err);

#endif
