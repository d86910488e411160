#include "auth/service.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/audit.h"
#include "auth/authz.h"
#include "auth/backoff.h"
#include "auth/header.h"
#include "auth/ldap.h"
#include "auth/offload.h"
#include "auth/password.h"
#include "core/log.h"
#include "core/query.h"
#include "sql/users.h"

#define MAX_SCOPES 16

/*
 * A fixed valid hash to verify against when the user does not exist, so timing does not reveal that. Made where
 * hashing is allowed (start-up, auth workers): berth_password_hash refuses on the general workers.
 */
static char dummy_hash[BERTH_PASSWORD_HASH_MAX];
static pthread_once_t dummy_once = PTHREAD_ONCE_INIT;
static void make_dummy(void)
{
    berth_password_hash(dummy_hash, "berth-dummy-password-1A");
}

static void unauthorized(berth_resp_t *resp, const char *why)
{
    berth_err_t err;
    berth_err_set(&err, BERTH_OCI_UNAUTHORIZED, "authentication required");
    berth_log_info("token request refused: %s", why);
    berth_resp_error(resp, &err);
}

/* What `user` (NULL: anonymous) may do on one scope: Harbor's matrix or the robot's grants, nothing on error. */
/* Sets *out to the actions `user` may have on `s`. BERTH_EUNAVAIL when the database does not answer: the caller
 * must say so (503), not refuse — docker reports a 403 as "denied" and gives up, an outage is not a verdict. */
static int permitted(berth_dbconn_t *c, const berth_db_user_t *user, const berth_scope_t *s, unsigned *out)
{
    *out = 0;
    if (user != NULL && user->sysadmin) {
        *out = s->actions;
        return 0;
    }
    if (strcmp(s->type, "repository") != 0)
        return 0; /* registry:catalog is for system admins */
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(s->name, strlen(s->name));
    memcpy(project, s->name, plen);
    project[plen] = '\0';
    berth_authz_t z;
    berth_err_t err;
    if (berth_authz_project(c, user, project, &z, &err) != 0)
        return BERTH_EUNAVAIL; /* its only failure is the database's (an unknown project is z.exists == 0) */
    *out = berth_authz_repository_scope(&z);
    return 0;
}

static void bad_request(berth_resp_t *resp, const char *why)
{
    berth_err_t err;
    berth_err_set(&err, BERTH_OCI_UNSUPPORTED, "%s", why);
    berth_resp_error(resp, &err);
    resp->status = 400;
}

/* 32 random bytes as base64url: refresh tokens and session ids; *hex gets the SHA-256 that is stored */
void berth_authsvc_random_secret(char out[48], char hex[65])
{
    unsigned char r[32], md[32];
    RAND_bytes(r, sizeof(r));
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < 30; i += 3) {
        unsigned v = (unsigned)r[i] << 16 | (unsigned)r[i + 1] << 8 | r[i + 2];
        for (int k = 18; k >= 0; k -= 6)
            out[o++] = b64[(v >> k) & 63];
    }
    unsigned v = (unsigned)r[30] << 8 | r[31];
    out[o++] = b64[(v >> 10) & 63];
    out[o++] = b64[(v >> 4) & 63];
    out[o++] = b64[(v << 2) & 63];
    out[o] = '\0';
    berth_authsvc_sha256_hex(out, hex);
    OPENSSL_cleanse(r, sizeof(r));
    (void)md;
}

void berth_authsvc_sha256_hex(const char *s, char hex[65])
{
    unsigned char md[32];
    SHA256((const unsigned char *)s, strlen(s), md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

int berth_authsvc_principal(berth_authsvc_t *a, const char *name, berth_db_user_t *out)
{
    berth_dbconn_t *c = berth_db_acquire(a->db, NULL);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    berth_err_t err;
    berth_err_clear(&err);
    int rc = strncmp(name, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0 ? berth_db_robot_get(c, name, out, &err)
                                                                                : berth_db_user_get(c, name, out, &err);
    berth_db_release(a->db, c);
    /* a database lost mid-query is an outage (503), not an account that is gone (401) */
    if (rc != 0 && err.oci == BERTH_OCI_UNAVAILABLE)
        return BERTH_EUNAVAIL;
    return rc != 0 ? rc : out->disabled ? BERTH_EUNAUTH : 0;
}

#define REFRESH_TTL (30 * 24 * 3600)

/* An LDAP user as the directory has it now: the user row and its groups replaced, *out re-read by name */
static int ldap_sync(berth_authsvc_t *a, const berth_ldap_user_t *lu, berth_db_user_t *out)
{
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(a->db, &err);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    int64_t id = 0;
    int rc = berth_db_ldap_onboard(c, lu->username, lu->dn, lu->email, lu->realname, lu->admin, lu->groups, lu->ngroups, &id, &err);
    if (rc == 0)
        rc = berth_db_user_get(c, lu->username, out, &err);
    berth_db_release(a->db, c);
    return rc == 0 ? 0 : rc == BERTH_ECONFLICT ? BERTH_EUNAUTH : BERTH_EUNAVAIL;
}

int berth_authsvc_recheck(berth_authsvc_t *a, berth_db_user_t *u)
{
    if (u->robot || !u->ldap)
        return 0;
    if (a->ldap == NULL)
        return BERTH_EUNAUTH; /* LDAP switched off: nothing vouches for this account any more */
    berth_ldap_user_t lu;
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_ldap_lookup(a->ldap, u->username, &lu, &err);
    if (rc == BERTH_ENOTFOUND) {
        berth_log_info("ldap: %s is gone from the directory", u->username);
        return BERTH_EUNAUTH;
    }
    if (rc != 0)
        return BERTH_EUNAVAIL;
    int64_t id = u->id;
    /* the directory spells the name differently than this row: another spelling's row, not this account */
    rc = strcmp(lu.username, u->username) != 0 ? BERTH_EUNAUTH : ldap_sync(a, &lu, u);
    berth_ldap_user_dispose(&lu);
    return rc == 0 && u->id != id ? BERTH_EUNAUTH : rc;
}

/* The account a refresh token still speaks for, re-checked against the directory when LDAP backs it */
static int refresh_principal(berth_authsvc_t *a, const char *hex, berth_db_user_t *out)
{
    berth_err_t err;
    memset(out, 0, sizeof(*out));
    berth_dbconn_t *c = berth_db_acquire(a->db, &err);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    int rc = berth_db_refresh_get(c, hex, out, &err);
    berth_db_release(a->db, c);
    if (rc == BERTH_ENOTFOUND)
        return BERTH_EUNAUTH;
    return rc != 0 ? BERTH_EUNAVAIL : berth_authsvc_recheck(a, out); /* LDAP: moves to an auth worker first */
}

void berth_authsvc_token(berth_authsvc_t *a, const berth_token_req_t *rq, berth_resp_t *resp)
{
    berth_resp_init(resp);
    int post = rq->method != NULL && strcmp(rq->method, "POST") == 0;
    /* GET: parameters in the query, credentials in Basic. POST (OAuth2): an x-www-form-urlencoded body. */
    const char *params = post ? (rq->body != NULL ? rq->body : "") : rq->query;
    size_t plen = post ? rq->body_len : rq->query_len;
    berth_auth_header_t h;
    int hrc = berth_auth_header_parse(&h, rq->authorization, rq->authorization_len);
    if (hrc == -2) {
        berth_auth_header_dispose(&h);
        return bad_request(resp, "control characters in the user name or password");
    }
    if (hrc != 0 || h.kind == BERTH_AUTH_BEARER) {
        berth_auth_header_dispose(&h);
        return unauthorized(resp, "malformed Authorization header");
    }
    char service[256], grant[32] = "", flag[16] = "";
    if (berth_query_check(params, plen, SIZE_MAX) != 0) { /* the edge: every later lookup sees valid text */
        berth_auth_header_dispose(&h);
        return bad_request(resp, "malformed parameter (bad escape, NUL byte or not UTF-8)");
    }
    if (berth_query_get(params, plen, "service", service, sizeof(service)) >= 0 && strcmp(service, a->service) != 0) {
        berth_auth_header_dispose(&h);
        return bad_request(resp, "unknown service");
    }
    berth_err_t err;
    berth_err_clear(&err);
    berth_db_user_t user, *who = NULL;
    int offline = 0;
    if (post) {
        berth_auth_header_dispose(&h);
        berth_query_get(params, plen, "grant_type", grant, sizeof(grant));
        if (strcmp(grant, "password") == 0) {
            long ul = berth_query_get(params, plen, "username", h.user, sizeof(h.user));
            long pl = berth_query_get(params, plen, "password", h.secret, sizeof(h.secret));
            if (ul == -2 || pl == -2 || !berth_auth_credential_ok(h.user, strlen(h.user)) ||
                !berth_auth_credential_ok(h.secret, strlen(h.secret))) {
                berth_auth_header_dispose(&h); /* a NUL or control byte: refused whole, never cut short */
                return bad_request(resp, "malformed or control characters in the user name or password");
            }
            h.kind = BERTH_AUTH_BASIC;
            berth_query_get(params, plen, "access_type", flag, sizeof(flag));
            offline = strcmp(flag, "offline") == 0;
        } else if (strcmp(grant, "refresh_token") == 0) {
            char rt[256], hex[65];
            if (berth_query_get(params, plen, "refresh_token", rt, sizeof(rt)) < 0)
                return bad_request(resp, "refresh_token missing");
            berth_authsvc_sha256_hex(rt, hex);
            OPENSSL_cleanse(rt, sizeof(rt));
            int rc = refresh_principal(a, hex, &user);
            if (rc == BERTH_EUNAVAIL) {
                berth_err_set(&err, BERTH_OCI_UNAVAILABLE, "authentication backend unavailable");
                return berth_resp_error(resp, &err);
            }
            if (rc != 0) {
                berth_audit(user.username, rq->remote, "login", "token", "refresh_token", NULL, 0, "refresh token refused");
                return unauthorized(resp, "refresh token unknown or expired, or its account or credential changed");
            }
            who = &user;
        } else {
            return bad_request(resp, "unsupported grant_type");
        }
    } else {
        berth_query_get(params, plen, "offline_token", flag, sizeof(flag));
        offline = strcmp(flag, "true") == 0;
    }
    if (h.kind == BERTH_AUTH_BASIC) {
        int rc = berth_authsvc_login(a, h.user, h.secret, rq->remote, &user);
        if (rc == BERTH_ERETRY) {
            berth_authsvc_too_many(resp, h.user, rq->remote);
            berth_auth_header_dispose(&h);
            return;
        }
        berth_auth_header_dispose(&h);
        if (rc == BERTH_EUNAVAIL) {
            berth_err_set(&err, BERTH_OCI_AUTH_UNAVAILABLE, NULL);
            return berth_resp_error(resp, &err);
        }
        if (rc != 0)
            return unauthorized(resp, "bad credentials");
        who = &user;
        berth_audit(user.username, rq->remote, "login", "token", a->service, NULL, 1, post ? "oauth2 password grant" : "");
    }
    berth_auth_header_dispose(&h);

    berth_dbconn_t *c = berth_db_acquire(a->db, &err);
    if (c == NULL)
        return berth_resp_error(resp, &err);
    berth_scope_t granted[MAX_SCOPES];
    size_t n = 0;
    char param[1024];
    for (int i = 0; n < MAX_SCOPES && berth_query_get_nth(params, plen, "scope", i, param, sizeof(param)) >= 0; i++) {
        /* one parameter may carry several space-separated scopes */
        for (char *save = NULL, *tok = strtok_r(param, " ", &save); tok != NULL && n < MAX_SCOPES;
             tok = strtok_r(NULL, " ", &save)) {
            berth_scope_t s;
            if (berth_scope_parse(&s, tok, strlen(tok), NULL) != 0)
                continue; /* never grant what we cannot read */
            unsigned may;
            if (permitted(c, who, &s, &may) != 0) {
                berth_db_release(a->db, c);
                berth_err_set(&err, BERTH_OCI_AUTH_UNAVAILABLE, NULL);
                return berth_resp_error(resp, &err);
            }
            s.actions &= may;
            if (s.actions != 0)
                granted[n++] = s;
        }
    }
    char refresh[48] = "", rhex[65];
    if (offline && who != NULL && grant[0] != 'r') {
        berth_authsvc_random_secret(refresh, rhex);
        int rc = berth_db_refresh_create(c, rhex, who, REFRESH_TTL, &err);
        if (rc != 0) {
            berth_db_release(a->db, c);
            if (rc == BERTH_ENOTFOUND) /* the credential changed since the login verified it */
                return unauthorized(resp, "credential changed during the login");
            return berth_resp_error(resp, &err);
        }
    }
    berth_db_release(a->db, c);
    time_t now = time(NULL);
    char *tok = berth_token_issue(a->keys, a->issuer, a->service, who != NULL ? who->username : "", who != NULL ? who->id : 0,
                                  granted, n, now, a->ttl_seconds);
    if (tok == NULL) {
        berth_err_set(&err, BERTH_OCI_INTERNAL, "token signing failed");
        return berth_resp_error(resp, &err);
    }
    char issued[32], scopes[MAX_SCOPES * 300] = "";
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(issued, sizeof(issued), "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (size_t i = 0, o = 0; i < n; i++) {
        int w = berth_scope_format(&granted[i], scopes + o + (i > 0), sizeof(scopes) - o - 1);
        if (w < 0)
            break;
        if (i > 0)
            scopes[o] = ' ';
        o += (size_t)w + (i > 0);
    }
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:s}", "token", tok, "access_token", tok, "expires_in", a->ttl_seconds, "issued_at",
                          issued, "scope", scopes);
    if (refresh[0] != '\0')
        json_object_set_new(o, "refresh_token", json_string(refresh));
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    OPENSSL_cleanse(refresh, sizeof(refresh));
    free(tok);
    berth_resp_body(resp, 200, body, strlen(body), "application/json");
    berth_resp_header(resp, "cache-control", "no-store");
    berth_log_info("token issued to %s (%zu scope(s))", who != NULL ? who->username : "anonymous", n);
}

long berth_authsvc_retry_after(const char *username, const char *remote)
{
    return berth_backoff_wait(username, remote);
}

/* robots: SHA-256 of the presented secret against the stored one, compared in constant time */
static int robot_secret_ok(const berth_db_user_t *r, const char *secret)
{
    char hex[65];
    berth_authsvc_sha256_hex(secret, hex);
    return strlen(r->secret_sha256) == 64 && CRYPTO_memcmp(hex, r->secret_sha256, 64) == 0;
}

/* A name that is not a local user (or an LDAP user seen before): ask LDAP, then record the user and its groups */
static int ldap_login(berth_authsvc_t *a, const char *username, const char *password, berth_db_user_t *out)
{
    berth_ldap_user_t lu;
    berth_err_t err;
    berth_err_clear(&err);
    int rc = berth_ldap_login(a->ldap, username, password, &lu, &err);
    if (rc != 0)
        return rc == BERTH_EUNAUTH ? BERTH_EUNAUTH : BERTH_EUNAVAIL;
    rc = ldap_sync(a, &lu, out); /* the account is the directory's spelling of the name, whatever was typed */
    berth_ldap_user_dispose(&lu);
    return rc;
}

int berth_authsvc_login(berth_authsvc_t *a, const char *username, const char *password, const char *remote, berth_db_user_t *out)
{
    int robot = strncmp(username, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0;
    /* robots cost one SHA-256; users cost argon2 or an LDAP exchange, which belong on the auth workers */
    if (!robot && !berth_offload_here())
        return BERTH_EUNAVAIL;
    pthread_once(&dummy_once, make_dummy);
    if (berth_backoff_wait(username, remote) > 0)
        return BERTH_ERETRY;
    berth_dbconn_t *c = berth_db_acquire(a->db, NULL);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    int rc = robot ? berth_db_robot_get(c, username, out, NULL) : berth_db_user_get(c, username, out, NULL);
    berth_db_release(a->db, c);
    if (rc != 0 && rc != BERTH_ENOTFOUND)
        return BERTH_EUNAVAIL;
    int ok;
    if (robot) {
        ok = rc == 0 && robot_secret_ok(out, password);
    } else if (a->ldap != NULL && (rc == BERTH_ENOTFOUND || out->ldap)) {
        /* local users (the admin among them) never depend on LDAP; LDAP users never have a local password */
        int lr = ldap_login(a, username, password, out);
        if (lr == BERTH_EUNAVAIL) {
            berth_audit(username, remote, "login", "user", username, NULL, 0, "LDAP unavailable");
            return BERTH_EUNAVAIL; /* not the caller's fault: no back-off */
        }
        ok = lr == 0;
        rc = lr == 0 ? 0 : BERTH_ENOTFOUND;
        if (!ok) /* a failure costs what a local one costs, so timing does not tell local names from others */
            berth_password_verify(dummy_hash, password);
    } else {
        /* a disabled account costs argon2 against the dummy whatever the password: a pair remembered while it was
         * enabled must not answer faster, which would confirm its password */
        int usable = rc == 0 && out->password_hash[0] && !out->disabled;
        ok = berth_password_verify(usable ? out->password_hash : dummy_hash, password);
        if (ok && usable)
            berth_password_remember(out->password_hash, password);
    }
    ok = rc == 0 && ok && !out->disabled;
    berth_backoff_record(username, remote, ok);
    if (!ok) {
        berth_log_info("login failed for %s", username);
        berth_audit(username, remote, "login", robot ? "robot" : "user", username, NULL, 0, "bad credentials");
    }
    return ok ? 0 : BERTH_EUNAUTH;
}

/*
 * Whether a throttled login of `username` is logged now: once per user every THROTTLE_LOG_S, with the count of
 * those not logged since, so a caller who only knows a name cannot flood the log with one line per request.
 */
#define THROTTLE_LOG_S 10
#define THROTTLE_LOG_SLOTS 256
static int throttle_log_due(const char *username, long *unlogged)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        uint64_t name; /* FNV-1a of the name: a collision only merges two names' log lines */
        time_t at;
        long unlogged;
    } seen[THROTTLE_LOG_SLOTS];
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = username; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    time_t now = time(NULL);
    int due = 1;
    pthread_mutex_lock(&mu);
    size_t i = h % THROTTLE_LOG_SLOTS;
    if (seen[i].name == h && now - seen[i].at < THROTTLE_LOG_S) {
        seen[i].unlogged++;
        due = 0;
    } else {
        *unlogged = seen[i].name == h ? seen[i].unlogged : 0;
        seen[i].name = h;
        seen[i].at = now;
        seen[i].unlogged = 0;
    }
    pthread_mutex_unlock(&mu);
    return due;
}

void berth_authsvc_too_many(berth_resp_t *resp, const char *username, const char *remote)
{
    berth_err_t err;
    berth_resp_init(resp);
    berth_resp_header(resp, "retry-after", "%ld", berth_authsvc_retry_after(username, remote) + 1);
    berth_err_set(&err, BERTH_OCI_TOOMANYREQUESTS, "too many failed logins; retry later");
    berth_resp_error(resp, &err);
    long unlogged = 0;
    if (throttle_log_due(username, &unlogged))
        berth_log_warn("login throttled for user %s (%ld more throttled since the last such line, which logs at most once "
                       "in %d s)",
                       username, unlogged, THROTTLE_LOG_S);
}

int berth_authsvc_permitted(berth_authsvc_t *a, const berth_db_user_t *user, const berth_scope_t *scope, unsigned *out)
{
    *out = 0;
    if (user != NULL && user->sysadmin) /* no database needed: an admin keeps working through an outage */
        return permitted(NULL, user, scope, out);
    berth_dbconn_t *c = berth_db_acquire(a->db, NULL);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    int rc = permitted(c, user, scope, out);
    berth_db_release(a->db, c);
    return rc;
}

int berth_authsvc_bootstrap(berth_authsvc_t *a, const char *password, berth_err_t *err)
{
    pthread_once(&dummy_once, make_dummy);
    char generated[40] = "", hash[BERTH_PASSWORD_HASH_MAX];
    berth_dbconn_t *c0 = berth_db_acquire(a->db, err);
    if (c0 == NULL)
        return err != NULL ? err->code : BERTH_EUNAVAIL;
    int any = berth_db_user_any(c0, err);
    berth_db_release(a->db, c0);
    if (any != 0) /* users exist (or an error): nothing to create, and no hashing at every start */
        return any < 0 ? any : 0;
    if (password == NULL || password[0] == '\0') {
        unsigned char r[12];
        RAND_bytes(r, sizeof(r));
        /* upper, lower and digit guaranteed so the policy holds */
        snprintf(generated, sizeof(generated), "Bx7");
        for (int i = 0; i < 12; i++)
            snprintf(generated + 3 + 2 * i, 3, "%02x", r[i]);
        password = generated;
    }
    if (berth_password_hash(hash, password) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot hash the admin password");
    berth_dbconn_t *c = berth_db_acquire(a->db, err);
    if (c == NULL)
        return err != NULL ? err->code : BERTH_EUNAVAIL;
    int created = 0;
    int rc = berth_db_user_bootstrap_admin(c, "admin", hash, &created, err);
    berth_db_release(a->db, c);
    if (rc == 0 && created && generated[0] != '\0')
        fprintf(stderr, "berthd: created user admin with generated password %s (shown once)\n", generated);
    else if (rc == 0 && created)
        berth_log_info("created user admin from BERTH_ADMIN_PASSWORD");
    return rc;
}
