/* Who is calling (session cookie, Basic credentials or nobody) and what they may do; the audit record of changes. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/audit.h"
#include "auth/gate.h"
#include "auth/header.h"
#include "core/log.h"
#include "core/query.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

static int unauthenticated(berth_api_t *a)
{
    return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "authentication required");
}

int berth_api_project(berth_api_t *a, const char *name, berth_authz_t *z, char canonical[256])
{
    berth_err_t err;
    berth_err_clear(&err);
    snprintf(canonical, 256, "%s", name);
    if (berth_authz_project(a->c, a->authed ? &a->who : NULL, name, z, &err) != 0)
        return berth_api_err(a, &err);
    /* Harbor addresses projects by name or id; X-Is-Resource-Name: true says a numeric segment is a name */
    if (!z->exists && berth_api_id_ok(name) && !a->rq->resource_name) {
        const char *p[] = {name};
        berth_db_json_t r;
        json_t *v = NULL;
        if (berth_db_api(a->c, BERTH_Q_PROJECT_NAME_BY_ID, p, &r, &err) != 0)
            return berth_api_err(a, &err);
        if (r.json != NULL && (v = json_loads(r.json, JSON_DECODE_ANY, NULL)) != NULL && json_is_string(v)) {
            snprintf(canonical, 256, "%s", json_string_value(v));
            if (berth_authz_project(a->c, a->authed ? &a->who : NULL, canonical, z, &err) != 0) {
                json_decref(v);
                free(r.json);
                return berth_api_err(a, &err);
            }
        }
        json_decref(v);
        free(r.json);
    }
    if (!z->exists || !berth_authz_can(z, BERTH_RES_PROJECT, BERTH_ACT_READ)) {
        if (!a->authed)
            return unauthenticated(a);
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "project %s not found", name);
    }
    return 0;
}

int berth_api_need(berth_api_t *a, const berth_authz_t *z, berth_resource_t res, unsigned actions)
{
    if (berth_authz_can(z, res, actions))
        return 0;
    if (!a->authed)
        return unauthenticated(a);
    return berth_api_fail(a, BERTH_OCI_DENIED, "%s may not do this", a->who.username);
}

int berth_api_need_admin(berth_api_t *a)
{
    if (!a->authed)
        return unauthenticated(a);
    if (!a->who.sysadmin)
        return berth_api_fail(a, BERTH_OCI_DENIED, "system administrators only");
    return 0;
}

int berth_api_need_login(berth_api_t *a)
{
    return a->authed ? 0 : unauthenticated(a);
}

void berth_api_audit(berth_api_t *a, const char *op, const char *rtype, const char *resource, const char *project, int ok)
{
    berth_audit(a->authed ? a->who.username : "", a->rq->remote, op, rtype, resource, project, ok, "api");
}

static int is_safe(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

/*
 * A browser session of an LDAP user, due for its check against the directory: still there, it carries on with
 * the groups the directory has now; gone, every session of the user ends (401); no answer from the directory, 503.
 */
static int session_recheck(berth_api_t *a, const char *hex)
{
    berth_err_t err;
    int rc = berth_authsvc_recheck(a->reg->auth, &a->who);
    if (rc == BERTH_EUNAVAIL)
        return berth_api_fail(a, BERTH_OCI_UNAVAILABLE, "LDAP unavailable");
    if (rc != 0) {
        berth_db_sessions_end(a->c, a->who.id, NULL);
        berth_audit(a->who.username, a->rq->remote, "logout", "session", "web", NULL, 1, "gone from the directory");
        memset(&a->who, 0, sizeof(a->who));
        return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "session expired");
    }
    if (berth_db_session_checked(a->c, hex, &err) != 0)
        return berth_api_err(a, &err);
    return 0;
}

/* Who is calling: a session cookie (with the CSRF header on changes), Basic credentials, or nobody. */
int berth_api_authenticate(berth_api_t *a)
{
    const berth_api_req_t *rq = a->rq;
    char sid[128];
    if (rq->cookie != NULL && berth_query_cookie(rq->cookie, "sid", sid, sizeof(sid)) == 0) {
        char hex[65], csrf[65];
        berth_authsvc_sha256_hex(sid, hex);
        berth_err_t err;
        int due = 0, rc = berth_db_session_get(a->c, hex, a->reg->auth->ldap_recheck_seconds, &a->who, csrf, &due, &err);
        OPENSSL_cleanse(sid, sizeof(sid));
        if (rc == 0 && due && (rc = session_recheck(a, hex)) != 0)
            return rc;
        if (rc == 0) {
            /* a cookie rides along with any cross-site request; a header only comes from our own pages */
            if (!is_safe(rq->method) &&
                (rq->csrf == NULL || strlen(rq->csrf) != strlen(csrf) || CRYPTO_memcmp(rq->csrf, csrf, strlen(csrf)) != 0))
                return berth_api_fail(a, BERTH_OCI_DENIED, "CSRF token invalid");
            a->authed = 1;
            berth_resp_header(a->resp, "x-harbor-csrf-token", "%s", csrf); /* pages reloaded read it back */
            return 0;
        }
        if (rc != BERTH_ENOTFOUND)
            return berth_api_err(a, &err);
        if (rq->authorization == NULL)
            return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "session expired");
    }
    int rc = berth_gate_identity(a->reg->auth, rq->authorization, rq->authorization != NULL ? strlen(rq->authorization) : 0,
                                 rq->remote, &a->who);
    if (rc == 0) {
        a->authed = 1;
        return 0;
    }
    if (rc == BERTH_ENOTFOUND)
        return 0;                                                                  /* anonymous */
    if ((rc == BERTH_ERETRY || rc == BERTH_EINVAL) && rq->authorization != NULL) { /* both need a header */
        berth_auth_header_t h;
        int hrc = berth_auth_header_parse(&h, rq->authorization, strlen(rq->authorization));
        if (rc == BERTH_ERETRY)
            berth_authsvc_too_many(a->resp, h.user, rq->remote);
        berth_auth_header_dispose(&h);
        if (rc == BERTH_ERETRY)
            return -1;
        if (hrc == -2)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "control characters in the user name or password");
    }
    if (rc == BERTH_EUNAVAIL)
        return berth_api_fail(a, BERTH_OCI_AUTH_UNAVAILABLE, NULL);
    return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "invalid credentials");
}

int berth_api_permit(berth_api_t *a)
{
    const berth_api_perm_t *p = &a->route->perm;
    switch (p->kind) {
    case BERTH_API_PUBLIC:
    case BERTH_API_ANYONE: return 0;
    case BERTH_API_LOGIN: return berth_api_need_login(a);
    case BERTH_API_ADMIN: return berth_api_need_admin(a);
    case BERTH_API_PROJECT:
        if (berth_api_project(a, a->seg[1], &a->z, a->project) != 0)
            return -1;
        return berth_api_need(a, &a->z, p->res, p->act);
    case BERTH_API_DENY: break;
    }
    /* a row without a permission: refused, whoever asks (deny by default) */
    berth_log_err("%s %s has no permission in its route table", a->route->method, a->route->path);
    return berth_api_fail(a, BERTH_OCI_DENIED, "this endpoint has no permission rule");
}

const char *berth_api_perm_name(const berth_api_perm_t *p, char *buf, size_t bufsz)
{
    static const char *const kinds[] = {"deny", "public", "anyone", "login", "system admin", "project"};
    if (p->kind != BERTH_API_PROJECT || (unsigned)p->res >= BERTH_RES__COUNT)
        snprintf(buf, bufsz, "%s", (unsigned)p->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[p->kind] : "?");
    else
        snprintf(buf, bufsz, "project %s:%s", berth_authz_resource_name(p->res), berth_authz_action_name(p->act) ?: "?");
    return buf;
}
