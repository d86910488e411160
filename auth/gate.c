#include "auth/gate.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/audit.h"
#include "auth/header.h"
#include "auth/offload.h"
#include "auth/token.h"
#include "core/log.h"
#include "core/route.h"

/*
 * Positive decisions only, keyed by sha256(surface, Authorization value, scope): a refusal is never remembered,
 * so new grants apply at once and guessing passwords cannot fill the table. A decision lives
 * auth.decision_ttl_seconds (10 s; a token's decision no longer than the token): that is the revocation
 * window. When it runs out the caller is decided afresh against the database, a Bearer token included — its
 * account must still exist and be enabled, and it keeps only what the account may still do — so a deleted or
 * disabled account, a removed membership or a changed password stops working within the window. The surface is part of the key
 * because what a credential proves differs: a registry token is a /v2 credential only, so a decision remembered for it on /v2 must
 * never be found by the REST API, which takes Basic credentials (and sessions) alone.
 *
 * Sooner than the window, all decisions are forgotten when any instance commits a change that can take a right
 * away (sql/migrations/0191: triggers NOTIFY "!auth"; berth_gate_forget_all). A decision belongs to the epoch read
 * before the database was asked for it, so one taken from a read that a revocation overtook is never found.
 */
#define SLOTS 4096

typedef enum { SURFACE_V2 = 'v', SURFACE_API = 'a' } surface_t;

typedef struct {
    unsigned char key[32];
    time_t until;
    uint64_t epoch;               /* `epoch` when the decision was read: forgotten once it moved */
    char who[BERTH_GATE_WHO_MAX]; /* who the decision was for ("" anonymous), for the audit log */
} slot_t;
static slot_t slots[SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t epoch = 1; /* __atomic: bumped by berth_gate_forget_all from the listener thread */

void berth_gate_forget_all(void)
{
    __atomic_add_fetch(&epoch, 1, __ATOMIC_ACQ_REL);
}

static uint64_t epoch_now(void)
{
    return __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
}

static void decision_key(unsigned char out[32], surface_t surface, const char *authz, size_t len, const berth_scope_t *need,
                         size_t n)
{
    unsigned char tag = (unsigned char)surface;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, &tag, 1);
    EVP_DigestUpdate(ctx, authz != NULL ? authz : "", authz != NULL ? len : 0);
    for (size_t i = 0; i < n; i++) {
        char scope[300] = "";
        berth_scope_format(&need[i], scope, sizeof(scope));
        EVP_DigestUpdate(ctx, "\n", 1);
        EVP_DigestUpdate(ctx, scope, strlen(scope));
    }
    EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
}

/* Until when a decision taken now is remembered */
static time_t decided_until(const berth_authsvc_t *a, time_t now)
{
    return now + (a->decision_ttl_seconds > 0 ? a->decision_ttl_seconds : 10);
}

static berth_gate_t unavailable(berth_resp_t *resp)
{
    berth_err_t err;
    berth_resp_init(resp);
    berth_err_set(&err, BERTH_OCI_AUTH_UNAVAILABLE, NULL);
    berth_resp_error(resp, &err);
    return BERTH_GATE_REFUSE;
}

static int remembered(const unsigned char key[32], char *who)
{
    slot_t *s = &slots[(key[0] | key[1] << 8) % SLOTS];
    pthread_mutex_lock(&mu);
    int hit = memcmp(s->key, key, 32) == 0 && s->until > time(NULL) && s->epoch == epoch_now();
    if (hit && who != NULL)
        memcpy(who, s->who, BERTH_GATE_WHO_MAX);
    pthread_mutex_unlock(&mu);
    return hit;
}

/*
 * The same decision taken before and since run out, whatever its age: only for a database that does not answer,
 * when the account behind a valid token cannot be re-checked. Revocation cannot happen during the outage either
 * (it is a database write), so what held for this very token and scope keeps holding while the token is valid.
 */
static int remembered_stale(const unsigned char key[32], char *who)
{
    slot_t *s = &slots[(key[0] | key[1] << 8) % SLOTS];
    pthread_mutex_lock(&mu);
    int hit = memcmp(s->key, key, 32) == 0 && s->until != 0 && s->epoch == epoch_now(); /* not if revoked since */
    if (hit && who != NULL)
        memcpy(who, s->who, BERTH_GATE_WHO_MAX);
    pthread_mutex_unlock(&mu);
    return hit;
}

static void flight_done(const unsigned char key[32]);

static void remember(const unsigned char key[32], uint64_t read_at, time_t until, const char *who)
{
    slot_t *s = &slots[(key[0] | key[1] << 8) % SLOTS];
    pthread_mutex_lock(&mu);
    memcpy(s->key, key, 32);
    s->until = until;
    s->epoch = read_at;
    snprintf(s->who, sizeof(s->who), "%s", who);
    pthread_mutex_unlock(&mu);
    flight_done(key); /* requests waiting for this very verification find it now */
}

/*
 * Identical Basic credentials arriving together — a burst of nodes sharing one account — are verified once. A
 * general worker (which may not hash passwords) that finds the same decision key already being verified waits
 * for that verification, up to FLIGHT_WAIT_MS, and then finds the decision remembered; without this every one
 * of them moves to the auth workers to pay argon2, and their bounded queue sheds the burst with 503s. The key
 * stays "in flight" from the first sight on a general worker until the verification ends on the auth pool.
 */
#define FLIGHTS 64
#define FLIGHT_WAIT_MS 2000
#define FLIGHT_STALE_S 10 /* a verification that never reported back (shed, crashed) stops holding others */
static struct {
    unsigned char key[32];
    time_t since; /* 0: free */
} flights[FLIGHTS];
static pthread_cond_t flight_cv = PTHREAD_COND_INITIALIZER;

static int flight_find(const unsigned char key[32], time_t now)
{
    for (int i = 0; i < FLIGHTS; i++)
        if (flights[i].since != 0 && now - flights[i].since < FLIGHT_STALE_S && memcmp(flights[i].key, key, 32) == 0)
            return i;
    return -1;
}

/* 1 when this caller waited for another verification of the same key (the caller then looks for the decision) */
static int flight_join(const unsigned char key[32])
{
    if (!berth_offload_forbidden())
        return 0; /* a thread that verifies never waits: it is the one the others wait for */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (FLIGHT_WAIT_MS % 1000) * 1000000L;
    until.tv_sec += FLIGHT_WAIT_MS / 1000 + until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&mu);
    time_t now = time(NULL);
    if (flight_find(key, now) < 0) { /* the first: claim the key and go verify */
        for (int i = 0; i < FLIGHTS; i++)
            if (flights[i].since == 0 || now - flights[i].since >= FLIGHT_STALE_S) {
                memcpy(flights[i].key, key, 32);
                flights[i].since = now;
                break;
            }
        pthread_mutex_unlock(&mu);
        return 0;
    }
    while (flight_find(key, time(NULL)) >= 0 && pthread_cond_timedwait(&flight_cv, &mu, &until) == 0)
        ;
    pthread_mutex_unlock(&mu);
    return 1;
}

/* The verification of `key` ended (either way): release the waiters */
static void flight_done(const unsigned char key[32])
{
    pthread_mutex_lock(&mu);
    int i = flight_find(key, time(NULL));
    if (i >= 0) {
        flights[i].since = 0;
        pthread_cond_broadcast(&flight_cv);
    }
    pthread_mutex_unlock(&mu);
}

int berth_gate_required(berth_scope_t *out, const berth_route_t *route)
{
    memset(out, 0, sizeof(*out));
    const char *tpl = route->id > BERTH_V2_NONE && route->id < BERTH_V2__COUNT ? berth_routes[route->id].scope : "";
    if (tpl == NULL)
        return 0; /* the base endpoint */
    char s[BERTH_NAME_MAX + 64];
    const char *at = strstr(tpl, "<name>");
    int n = at != NULL ? snprintf(s, sizeof(s), "%.*s%s%s", (int)(at - tpl), tpl, route->name, at + 6)
                       : snprintf(s, sizeof(s), "%s", tpl);
    if (n < 0 || (size_t)n >= sizeof(s) || berth_scope_parse(out, s, (size_t)n, NULL) != 0 || out->actions == 0) {
        /* an unrouted request, or a row unit_routes refuses: fail closed, to system administrators only */
        berth_log_err("no scope for /v2 route %d", (int)route->id);
        berth_scope_parse(out, "registry:catalog:*", 18, NULL);
    }
    return 1;
}

berth_gate_t berth_gate_fast(const char *authz, size_t len, const berth_scope_t *need, char *who)
{
    unsigned char key[32];
    decision_key(key, SURFACE_V2, authz, len, need, need != NULL);
    return remembered(key, who) ? BERTH_GATE_ALLOW : BERTH_GATE_UNKNOWN;
}

/* Scopes as a challenge's scope value: space-separated, as Distribution writes several */
static void scopes_str(const berth_scope_t *s, size_t n, char *buf, size_t bufsz)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o + 1 < bufsz; i++) {
        if (i > 0)
            buf[o++] = ' ';
        int w = berth_scope_format(&s[i], buf + o, bufsz - o);
        if (w < 0) {
            buf[o - (i > 0)] = '\0';
            return;
        }
        o += (size_t)w;
    }
}

/*
 * The refusal. A 401 challenge names every scope the request needs, so a client that fetches a token for it
 * once succeeds; with insufficient_scope, error_description names what the presented token lacked.
 */
static berth_gate_t refuse(berth_authsvc_t *a, berth_resp_t *resp, int status, const berth_scope_t *need, size_t n,
                           const char *error, const char *missing, const char *why)
{
    berth_err_t err;
    berth_resp_init(resp);
    char scope[BERTH_GATE_SCOPES_MAX * 300];
    scopes_str(need, n, scope, sizeof(scope));
    if (status == 401) {
        char ch[2048];
        int w = snprintf(ch, sizeof(ch), "Bearer realm=\"%s/service/token\",service=\"%s\"", a->realm, a->service);
        size_t o = w > 0 && (size_t)w < sizeof(ch) ? (size_t)w : sizeof(ch) - 1;
        if (scope[0] != '\0')
            o += (size_t)snprintf(ch + o, sizeof(ch) - o, ",scope=\"%s\"", scope);
        if (error != NULL && o < sizeof(ch))
            o += (size_t)snprintf(ch + o, sizeof(ch) - o, ",error=\"%s\"", error);
        if (missing != NULL && missing[0] != '\0' && o < sizeof(ch))
            snprintf(ch + o, sizeof(ch) - o, ",error_description=\"missing %s\"", missing);
        berth_resp_header(resp, "www-authenticate", "%s", ch);
        berth_err_set(&err, BERTH_OCI_UNAUTHORIZED, "authentication required");
    } else {
        berth_err_set(&err, BERTH_OCI_DENIED, NULL);
    }
    berth_resp_error(resp, &err);
    berth_log_debug("access refused (%d): %s%s%s", status, why, scope[0] ? " for " : "", scope);
    return BERTH_GATE_REFUSE;
}

berth_gate_t berth_gate_check(berth_authsvc_t *a, const char *authz, size_t len, const berth_scope_t *need, const char *remote,
                              berth_resp_t *resp, char *who)
{
    return berth_gate_check_all(a, authz, len, need, need != NULL, remote, resp, who);
}

berth_gate_t berth_gate_check_all(berth_authsvc_t *a, const char *authz, size_t len, const berth_scope_t *need, size_t n,
                                  const char *remote, berth_resp_t *resp, char *who)
{
    unsigned char key[32];
    if (n > BERTH_GATE_SCOPES_MAX)
        n = BERTH_GATE_SCOPES_MAX;
    decision_key(key, SURFACE_V2, authz, len, need, n);
    uint64_t read_at = epoch_now(); /* before anything is read: a revocation committed since forgets this decision */
    if (who != NULL)
        who[0] = '\0';
    if (remembered(key, who))
        return BERTH_GATE_ALLOW;
    berth_auth_header_t h;
    int hrc = berth_auth_header_parse(&h, authz, len);
    if (hrc == -2) { /* a NUL or control byte in Basic credentials: refused whole, as on every login surface */
        berth_auth_header_dispose(&h);
        berth_err_t err;
        berth_resp_init(resp);
        berth_err_set(&err, BERTH_OCI_BAD_REQUEST, "control characters in the user name or password");
        berth_resp_error(resp, &err);
        return BERTH_GATE_REFUSE;
    }
    if (hrc != 0) {
        berth_auth_header_dispose(&h);
        return refuse(a, resp, 401, need, n, "invalid_request", NULL, "malformed Authorization header");
    }
    time_t now = time(NULL);
    berth_gate_t out = BERTH_GATE_ALLOW;
    if (h.kind == BERTH_AUTH_BEARER) {
        berth_token_claims_t c;
        berth_err_t err;
        berth_db_user_t acct;
        int rc = 0;
        if (berth_token_verify(a->keys, h.token, a->issuer, a->service, now, &c, &err) != 0) {
            out = refuse(a, resp, 401, need, n, "invalid_token", NULL, err.msg); /* the reason goes to the log only */
        } else if (c.subject[0] != '\0' &&
                   ((rc = berth_authsvc_principal(a, c.subject, &acct)) != 0 || (c.account_id != 0 && c.account_id != acct.id))) {
            /* gone, disabled, or deleted and created again under the same name: another account */
            if (rc == BERTH_EUNAVAIL && remembered_stale(key, who))
                out = BERTH_GATE_ALLOW; /* cached token verification outlives a database outage */
            else
                out = rc == BERTH_EUNAVAIL
                          ? unavailable(resp)
                          : refuse(a, resp, 401, need, n, "invalid_token", NULL, "the token's account is gone or disabled");
            berth_token_claims_dispose(&c);
        } else {
            berth_scope_t lacking[BERTH_GATE_SCOPES_MAX];
            size_t nl = 0;
            int down = 0;
            for (size_t i = 0; i < n && !down; i++) { /* what the token grants and the account may still do */
                unsigned may;
                down = berth_authsvc_permitted(a, c.subject[0] != '\0' ? &acct : NULL, &need[i], &may) != 0;
                unsigned granted = berth_token_allowed(&c, need[i].type, need[i].name) & may;
                if ((need[i].actions & ~granted) != 0) {
                    lacking[nl] = need[i];
                    lacking[nl++].actions = need[i].actions & ~granted;
                }
            }
            if (down) { /* the rights could not be read: what held for this very token keeps holding, as above */
                if (!remembered_stale(key, who))
                    out = unavailable(resp);
            } else if (nl > 0) {
                char missing[BERTH_GATE_SCOPES_MAX * 300];
                scopes_str(lacking, nl, missing, sizeof(missing));
                out = refuse(a, resp, 401, need, n, "insufficient_scope", missing, "token does not grant the scope");
            } else {
                remember(key, read_at, c.expires_at < decided_until(a, now) ? c.expires_at : decided_until(a, now), c.subject);
            }
            if (out == BERTH_GATE_ALLOW && who != NULL)
                snprintf(who, BERTH_GATE_WHO_MAX, "%s", c.subject);
            berth_token_claims_dispose(&c);
        }
        berth_auth_header_dispose(&h);
        return out;
    }
    berth_db_user_t user;
    int authenticated = 0;
    if (h.kind == BERTH_AUTH_BASIC) {
        if (flight_join(key) && remembered(key, who)) {
            berth_auth_header_dispose(&h);
            return BERTH_GATE_ALLOW;
        }
        int rc = berth_authsvc_login(a, h.user, h.secret, remote, &user);
        /* verified here (a move verifies on the auth pool): a failure releases the waiters now, a success once
         * the decision is remembered (remember) or refused (below), so no waiter wakes before it can see it */
        if (rc != 0 && !berth_offload_moving())
            flight_done(key);
        if (rc == BERTH_ERETRY) {
            berth_authsvc_too_many(resp, h.user, remote);
            berth_auth_header_dispose(&h);
            return BERTH_GATE_REFUSE;
        }
        berth_auth_header_dispose(&h);
        if (rc == BERTH_EUNAVAIL)
            return unavailable(resp);
        if (rc != 0)
            return refuse(a, resp, 401, need, n, NULL, NULL, "bad credentials");
        authenticated = 1;
    }
    if (n == 0) { /* the base endpoint: tell anonymous callers where tokens come from */
        if (!authenticated)
            return refuse(a, resp, 401, NULL, 0, NULL, NULL, "anonymous");
        remember(key, read_at, decided_until(a, now), user.username);
        if (who != NULL)
            snprintf(who, BERTH_GATE_WHO_MAX, "%s", user.username);
        return BERTH_GATE_ALLOW;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned permitted;
        if (berth_authsvc_permitted(a, authenticated ? &user : NULL, &need[i], &permitted) != 0) {
            if (authenticated)
                flight_done(key);
            return unavailable(resp); /* not a refusal: the rights could not be read */
        }
        if ((need[i].actions & ~permitted) == 0)
            continue;
        if (authenticated) {
            char what[16];
            unsigned act = need[i].actions;
            berth_scope_actions_str(act & BERTH_ACTION_PUSH ? BERTH_ACTION_PUSH : act, what, sizeof(what)); /* a write is a push */
            berth_audit(user.username, remote, what, "repository", need[i].name, NULL, 0, "permission denied");
        }
        if (authenticated)
            flight_done(key);
        return refuse(a, resp, authenticated ? 403 : 401, need, n, NULL, NULL, "not permitted");
    }
    remember(key, read_at, decided_until(a, now), authenticated ? user.username : "");
    if (who != NULL)
        snprintf(who, BERTH_GATE_WHO_MAX, "%s", authenticated ? user.username : "");
    return BERTH_GATE_ALLOW;
}

int berth_gate_identity(berth_authsvc_t *a, const char *authz, size_t len, const char *remote, berth_db_user_t *out)
{
    if (authz == NULL || len == 0)
        return BERTH_ENOTFOUND;
    unsigned char key[32];
    char who[BERTH_GATE_WHO_MAX];
    /* the kind is checked before anything remembered is consulted: registry tokens carry repository scopes,
     * not API rights, however they were used before */
    berth_auth_header_t h;
    if (berth_auth_header_parse(&h, authz, len) != 0 || h.kind != BERTH_AUTH_BASIC) {
        berth_auth_header_dispose(&h);
        return BERTH_EINVAL;
    }
    decision_key(key, SURFACE_API, authz, len, NULL, 0);
    uint64_t read_at = epoch_now();
    if (remembered(key, who) && who[0] != '\0') {
        berth_auth_header_dispose(&h);
        return berth_authsvc_principal(a, who, out);
    }
    int rc = berth_authsvc_login(a, h.user, h.secret, remote, out);
    berth_auth_header_dispose(&h);
    if (rc == 0)
        remember(key, read_at, decided_until(a, time(NULL)), out->username);
    return rc;
}
