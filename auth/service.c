#include "auth/service.h"

#include <jansson.h>
#include <pthread.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/header.h"
#include "auth/ldap.h"
#include "auth/password.h"
#include "auth/audit.h"
#include "auth/authz.h"
#include "registry/core/log.h"
#include "registry/core/query.h"
#include "sql/users.h"

#define MAX_SCOPES 16

/* A fixed valid hash to verify against when the user does not exist, so timing does not reveal that. */
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
static unsigned permitted(berth_dbconn_t *c, const berth_db_user_t *user, const berth_scope_t *s)
{
    if (user != NULL && user->sysadmin)
        return s->actions;
    if (strcmp(s->type, "repository") != 0)
        return 0; /* registry:catalog is for system admins */
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(s->name, strlen(s->name));
    memcpy(project, s->name, plen);
    project[plen] = '\0';
    berth_authz_t z;
    if (berth_authz_project(c, user, project, &z, NULL) != 0)
        return 0;
    return berth_authz_repository_scope(&z);
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
    int rc = strncmp(name, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0 ? berth_db_robot_get(c, name, out, NULL)
                                                                                : berth_db_user_get(c, name, out, NULL);
    berth_db_release(a->db, c);
    return rc != 0 ? rc : out->disabled ? BERTH_EUNAUTH : 0;
}

#define REFRESH_TTL (30 * 24 * 3600)

void berth_authsvc_token(berth_authsvc_t *a, const berth_token_req_t *rq, berth_resp_t *resp)
{
    berth_resp_init(resp);
    pthread_once(&dummy_once, make_dummy);
    int post = rq->method != NULL && strcmp(rq->method, "POST") == 0;
    /* GET: parameters in the query, credentials in Basic. POST (OAuth2): an x-www-form-urlencoded body. */
    const char *params = post ? (rq->body != NULL ? rq->body : "") : rq->query;
    size_t plen = post ? rq->body_len : rq->query_len;
    berth_auth_header_t h;
    if (berth_auth_header_parse(&h, rq->authorization, rq->authorization_len) != 0 || h.kind == BERTH_AUTH_BEARER) {
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
            berth_query_get(params, plen, "username", h.user, sizeof(h.user));
            berth_query_get(params, plen, "password", h.secret, sizeof(h.secret));
            h.kind = BERTH_AUTH_BASIC;
            berth_query_get(params, plen, "access_type", flag, sizeof(flag));
            offline = strcmp(flag, "offline") == 0;
        } else if (strcmp(grant, "refresh_token") == 0) {
            char rt[256], hex[65], name[256];
            if (berth_query_get(params, plen, "refresh_token", rt, sizeof(rt)) < 0)
                return bad_request(resp, "refresh_token missing");
            berth_authsvc_sha256_hex(rt, hex);
            OPENSSL_cleanse(rt, sizeof(rt));
            berth_dbconn_t *c = berth_db_acquire(a->db, &err);
            if (c == NULL)
                return berth_resp_error(resp, &err);
            int rc = berth_db_refresh_get(c, hex, name, &err);
            berth_db_release(a->db, c);
            if (rc != 0 || berth_authsvc_principal(a, name, &user) != 0) {
                berth_audit(rc == 0 ? name : "", rq->remote, "login", "token", "refresh_token", NULL, 0, "refresh token refused");
                return unauthorized(resp, "refresh token unknown, expired or its principal disabled");
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
            berth_authsvc_too_many(resp, h.user);
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
        for (char *save = NULL, *tok = strtok_r(param, " ", &save); tok != NULL && n < MAX_SCOPES; tok = strtok_r(NULL, " ", &save)) {
            berth_scope_t s;
            if (berth_scope_parse(&s, tok, strlen(tok), NULL) != 0)
                continue; /* never grant what we cannot read */
            s.actions &= permitted(c, who, &s);
            if (s.actions != 0)
                granted[n++] = s;
        }
    }
    char refresh[48] = "", rhex[65];
    if (offline && who != NULL && grant[0] != 'r') {
        berth_authsvc_random_secret(refresh, rhex);
        if (berth_db_refresh_create(c, rhex, who->username, REFRESH_TTL, &err) != 0) {
            berth_db_release(a->db, c);
            return berth_resp_error(resp, &err);
        }
    }
    berth_db_release(a->db, c);
    time_t now = time(NULL);
    char *tok = berth_token_issue(a->keys, a->issuer, a->service, who != NULL ? who->username : "", granted, n, now, a->ttl_seconds);
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

/*
 * Online password guessing: after FREE_FAILURES wrong passwords for one user name, further attempts are refused
 * unverified for 1, 2, 4 ... MAX_BACKOFF seconds. Keyed by name, not address: a botnet gains nothing by rotating
 * addresses; the price is that anyone can slow down a name's logins, never lock it for long.
 */
#define FREE_FAILURES 5
#define MAX_BACKOFF 300
#define LIMIT_SLOTS 1024
static struct {
    char name[64];
    int failures;
    time_t until;
} limits[LIMIT_SLOTS];
static pthread_mutex_t limits_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned limit_slot(const char *name)
{
    unsigned h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % LIMIT_SLOTS;
}

/* seconds the caller must still wait, 0 if it may try */
static long throttled(const char *name)
{
    unsigned i = limit_slot(name);
    time_t now = time(NULL);
    pthread_mutex_lock(&limits_mu);
    long wait = strncmp(limits[i].name, name, sizeof(limits[i].name) - 1) == 0 && limits[i].until > now ? (long)(limits[i].until - now) : 0;
    pthread_mutex_unlock(&limits_mu);
    return wait;
}

static void record(const char *name, int ok)
{
    unsigned i = limit_slot(name);
    pthread_mutex_lock(&limits_mu);
    if (strncmp(limits[i].name, name, sizeof(limits[i].name) - 1) != 0) {
        snprintf(limits[i].name, sizeof(limits[i].name), "%s", name);
        limits[i].failures = 0;
        limits[i].until = 0;
    }
    if (ok) {
        limits[i].failures = 0;
        limits[i].until = 0;
    } else if (++limits[i].failures >= FREE_FAILURES) {
        int shift = limits[i].failures - FREE_FAILURES;
        long backoff = shift >= 9 ? MAX_BACKOFF : 1L << shift;
        limits[i].until = time(NULL) + (backoff < MAX_BACKOFF ? backoff : MAX_BACKOFF);
    }
    pthread_mutex_unlock(&limits_mu);
}

long berth_authsvc_retry_after(const char *username)
{
    return throttled(username);
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
    berth_dbconn_t *c = berth_db_acquire(a->db, &err);
    int64_t id = 0;
    if (c == NULL)
        rc = BERTH_EUNAVAIL;
    else if ((rc = berth_db_ldap_onboard(c, username, lu.dn, lu.email, lu.realname, lu.admin, lu.groups, lu.ngroups, &id, &err)) == 0)
        rc = berth_db_user_get(c, username, out, &err);
    if (c != NULL)
        berth_db_release(a->db, c);
    berth_ldap_user_dispose(&lu);
    return rc == 0 ? 0 : rc == BERTH_ECONFLICT ? BERTH_EUNAUTH : BERTH_EUNAVAIL;
}

int berth_authsvc_login(berth_authsvc_t *a, const char *username, const char *password, const char *remote, berth_db_user_t *out)
{
    pthread_once(&dummy_once, make_dummy);
    if (throttled(username) > 0)
        return BERTH_ERETRY;
    berth_dbconn_t *c = berth_db_acquire(a->db, NULL);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    int robot = strncmp(username, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0;
    int rc = robot ? berth_db_robot_get(c, username, out, NULL) : berth_db_user_get(c, username, out, NULL);
    berth_db_release(a->db, c);
    if (rc != 0 && rc != BERTH_ENOTFOUND)
        return BERTH_EUNAVAIL;
    int ok;
    if (robot) {
        ok = rc == 0 && robot_secret_ok(out, password);
    } else if (a->ldap != NULL && (rc == BERTH_ENOTFOUND || (out->ldap && out->password_hash[0] == '\0'))) {
        /* local users (the admin among them) never depend on LDAP; LDAP users never get a local password */
        int lr = ldap_login(a, username, password, out);
        if (lr == BERTH_EUNAVAIL) {
            berth_audit(username, remote, "login", "user", username, NULL, 0, "LDAP unavailable");
            return BERTH_EUNAVAIL; /* not the caller's fault: no back-off */
        }
        ok = lr == 0;
        rc = lr == 0 ? 0 : BERTH_ENOTFOUND;
    } else {
        ok = berth_password_verify(rc == 0 && out->password_hash[0] ? out->password_hash : dummy_hash, password);
    }
    ok = rc == 0 && ok && !out->disabled;
    record(username, ok);
    if (!ok) {
        berth_log_info("login failed for %s", username);
        berth_audit(username, remote, "login", robot ? "robot" : "user", username, NULL, 0, "bad credentials");
    }
    return ok ? 0 : BERTH_EUNAUTH;
}

void berth_authsvc_too_many(berth_resp_t *resp, const char *username)
{
    berth_err_t err;
    berth_resp_init(resp);
    berth_resp_header(resp, "retry-after", "%ld", berth_authsvc_retry_after(username) + 1);
    berth_err_set(&err, BERTH_OCI_TOOMANYREQUESTS, "too many failed logins; retry later");
    berth_resp_error(resp, &err);
    berth_log_warn("login throttled for user %s", username);
}

unsigned berth_authsvc_permitted(berth_authsvc_t *a, const berth_db_user_t *user, const berth_scope_t *scope)
{
    berth_dbconn_t *c = berth_db_acquire(a->db, NULL);
    if (c == NULL)
        return 0;
    unsigned p = scope->actions & permitted(c, user, scope);
    berth_db_release(a->db, c);
    return p;
}

int berth_authsvc_bootstrap(berth_authsvc_t *a, const char *password, berth_err_t *err)
{
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
