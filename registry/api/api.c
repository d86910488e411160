#include "registry/api/internal.h"

#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/audit.h"
#include "auth/gate.h"
#include "auth/header.h"
#include "auth/offload.h"
#include "core/log.h"
#include "core/query.h"

static const berth_api_conf_t default_conf = {.project_creation_admin_only = 1, .session_ttl = 1800, .external_url = "", .version = ""};
const berth_api_conf_t *berth_api_conf = &default_conf;

void berth_api_configure(const berth_api_conf_t *conf)
{
    berth_api_conf = conf;
}

int berth_api_json(berth_api_t *a, int status, char *json)
{
    berth_resp_body(a->resp, status, json, json != NULL ? strlen(json) : 0, "application/json");
    return 0;
}

int berth_api_jsonv(berth_api_t *a, int status, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    return berth_api_json(a, status, s);
}

int berth_api_empty(berth_api_t *a, int status)
{
    berth_resp_body(a->resp, status, NULL, 0, NULL);
    return 0;
}

int berth_api_created(berth_api_t *a, char *json, const char *key, const char *prefix)
{
    json_t *v = json_loads(json, 0, NULL);
    berth_resp_header(a->resp, "location", "%s/%lld", prefix, (long long)json_integer_value(json_object_get(v, key)));
    json_decref(v);
    free(json);
    return berth_api_empty(a, 201);
}

int berth_api_err(berth_api_t *a, const berth_err_t *err)
{
    if (berth_offload_moving()) /* not an answer: the request runs again on an auth worker */
        return -1;
    if (berth_err_status(err->oci) >= 500)
        berth_log_err("%s %.*s: %s", a->rq->method, (int)a->rq->path_len, a->rq->path, err->msg);
    berth_resp_error(a->resp, err);
    return -1;
}

int berth_api_fail(berth_api_t *a, berth_oci_t oci, const char *fmt, ...)
{
    berth_err_t err;
    berth_err_set(&err, oci, NULL);
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
        va_end(ap);
    }
    return berth_api_err(a, &err);
}

const char *berth_api_param(berth_api_t *a, const char *key)
{
    if (a->rq->query == NULL || berth_query_get(a->rq->query, a->rq->query_len, key, a->qbuf, sizeof(a->qbuf)) < 0)
        return NULL;
    return a->qbuf;
}

int berth_api_qterm(berth_api_t *a, const char *key, char *out, size_t outsz)
{
    const char *q = berth_api_param(a, "q");
    return q != NULL ? berth_query_term(q, key, out, outsz) : 0;
}

static long num_param(berth_api_t *a, const char *key, long dflt, long min, long max, int *bad)
{
    const char *v = berth_api_param(a, key);
    if (v == NULL)
        return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min || n > max)
        *bad = 1;
    return n;
}

int berth_api_page(berth_api_t *a, char limit[24], char offset[24])
{
    int bad = 0;
    long page = num_param(a, "page", 1, 1, 1000000, &bad), size = num_param(a, "page_size", 10, 1, 100, &bad);
    if (bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "page must be >= 1 and page_size between 1 and 100");
    snprintf(limit, 24, "%ld", size);
    snprintf(offset, 24, "%ld", (page - 1) * size);
    return 0;
}

int berth_api_sort(berth_api_t *a, const char *const *keys, char out[40])
{
    const char *v = berth_api_param(a, "sort");
    out[0] = '\0';
    if (v == NULL || v[0] == '\0')
        return 0;
    size_t n = strlen(v);
    memcpy(out, v, n < 39 ? n : 39);
    out[n < 39 ? n : 39] = '\0';
    const char *k = out[0] == '-' ? out + 1 : out;
    for (const char *const *p = keys; *p != NULL; p++)
        if (strcmp(k, *p) == 0)
            return 0;
    char allowed[256] = "";
    for (const char *const *p = keys; *p != NULL; p++)
        snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s", p == keys ? "" : ", ", *p);
    return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "sort must be one of %s, optionally with a leading '-'", allowed);
}

/* The request's query without page and page_size, for Link headers */
static void other_params(berth_api_t *a, char *out, size_t outsz)
{
    out[0] = '\0';
    size_t o = 0;
    const char *q = a->rq->query, *end = q != NULL ? q + a->rq->query_len : NULL;
    for (const char *p = q; p != NULL && p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *item_end = amp != NULL ? amp : end;
        if (strncmp(p, "page=", 5) != 0 && strncmp(p, "page_size=", 10) != 0 && item_end > p && o + (size_t)(item_end - p) + 2 < outsz) {
            memcpy(out + o, p, (size_t)(item_end - p));
            o += (size_t)(item_end - p);
            out[o++] = '&';
            out[o] = '\0';
        }
        p = item_end + 1;
    }
}

int berth_api_query(berth_api_t *a, berth_q_t q, const char *const *params, berth_db_json_t *out)
{
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_api(a->c, q, params, out, &err) == 0)
        return 0;
    if (err.code == BERTH_EEXISTS)
        berth_err_set(&err, BERTH_OCI_CONFLICT, "already exists");
    else if (err.code == BERTH_ECONFLICT)
        berth_err_set(&err, BERTH_OCI_NOT_FOUND, "a referenced object does not exist");
    return berth_api_err(a, &err);
}

int berth_api_list(berth_api_t *a, berth_q_t q, const char *const *params, const char *limit, const char *offset)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    long size = strtol(limit, NULL, 10), page = strtol(offset, NULL, 10) / size + 1;
    berth_resp_header(a->resp, "x-total-count", "%lld", r.total);
    char rest[1200], links[3000] = "";
    other_params(a, rest, sizeof(rest));
    int n = 0;
    if (page > 1)
        n += snprintf(links, sizeof(links), "<%.*s?%spage=%ld&page_size=%ld>; rel=\"prev\"", (int)a->rq->path_len, a->rq->path, rest,
                      page - 1, size);
    if (page * size < r.total && n >= 0 && (size_t)n < sizeof(links))
        snprintf(links + n, sizeof(links) - (size_t)n, "%s<%.*s?%spage=%ld&page_size=%ld>; rel=\"next\"", n > 0 ? " , " : "",
                 (int)a->rq->path_len, a->rq->path, rest, page + 1, size);
    if (links[0] != '\0')
        berth_resp_header(a->resp, "link", "%s", links);
    return berth_api_json(a, 200, r.json);
}

int berth_api_object(berth_api_t *a, berth_q_t q, const char *const *params, const char *what)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", what);
    return berth_api_json(a, 200, r.json);
}

json_t *berth_api_body(berth_api_t *a)
{
    json_error_t jerr;
    json_t *v = a->rq->body != NULL ? json_loadb(a->rq->body, a->rq->body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (v == NULL || !json_is_object(v)) {
        json_decref(v);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

int berth_api_id_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 18 && strspn(s, "0123456789") == n;
}

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

int berth_api_delete(berth_api_t *a, berth_q_t q, const char *const *params, const char *rtype, const char *fallback,
                     const char *project)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    berth_api_audit(a, "delete", rtype, json_is_string(v) ? json_string_value(v) : fallback, project, r.json != NULL);
    json_decref(v);
    int found = r.json != NULL;
    free(r.json);
    return found ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", rtype);
}

int berth_api_match(berth_api_t *a, const char *method, const char *pattern)
{
    if (strcmp(a->rq->method, method) != 0 && !(strcmp(method, "GET") == 0 && strcmp(a->rq->method, "HEAD") == 0))
        return 0;
    int i = 0;
    for (const char *p = pattern; *p != '\0'; i++) {
        const char *end = strchr(p, '/');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (i >= a->nseg)
            return 0;
        if (!(len == 2 && memcmp(p, "{}", 2) == 0) && (strlen(a->seg[i]) != len || memcmp(a->seg[i], p, len) != 0))
            return 0;
        p = end != NULL ? end + 1 : p + len;
    }
    return i == a->nseg;
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
static int authenticate(berth_api_t *a)
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
            if (!is_safe(rq->method) && (rq->csrf == NULL || strlen(rq->csrf) != strlen(csrf) ||
                                         CRYPTO_memcmp(rq->csrf, csrf, strlen(csrf)) != 0))
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
        return 0; /* anonymous */
    if (rc == BERTH_ERETRY || rc == BERTH_EINVAL) {
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

/* Split "/api/v2.0/a/b%252Fc" into decoded segments. Harbor double-encodes '/' inside repository names. */
static int split(berth_api_t *a, const char *path, size_t len)
{
    for (const char *p = path, *end = path + len; p < end;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        size_t n = slash != NULL ? (size_t)(slash - p) : (size_t)(end - p);
        if (a->nseg == BERTH_API_MAX_SEGS || n > 1024)
            return -1;
        char once[1100], twice[1100];
        if (berth_query_decode(p, n, 0, once, sizeof(once)) < 0 || berth_query_decode(once, strlen(once), 0, twice, sizeof(twice)) < 0)
            return -1;
        a->seg[a->nseg++] = strdup(twice);
        p = slash != NULL ? slash + 1 : end;
    }
    return 0;
}

void berth_api_handle(berth_registry_t *reg, const berth_api_req_t *rq, berth_resp_t *resp)
{
    berth_resp_init(resp);
    berth_api_t a = {.reg = reg, .rq = rq, .resp = resp};
    berth_err_t err;
    berth_err_clear(&err);
    static const char api_prefix[] = "/api/v2.0/", c_prefix[] = "/c/";
    int is_api = rq->path_len > sizeof(api_prefix) - 1 && memcmp(rq->path, api_prefix, sizeof(api_prefix) - 1) == 0;
    size_t skip = is_api ? sizeof(api_prefix) - 1 : sizeof(c_prefix) - 1;
    if (split(&a, rq->path + skip, rq->path_len - skip) != 0) {
        berth_api_fail(&a, BERTH_OCI_BAD_REQUEST, "malformed path");
        goto Exit;
    }
    /* the edge of every /api parser: lookups after this cannot fail quietly (berth_api_param) */
    int qc = rq->query != NULL ? berth_query_check(rq->query, rq->query_len, sizeof(a.qbuf) - 1) : 0;
    if (qc != 0) {
        if (qc == -3)
            berth_api_fail(&a, BERTH_OCI_BAD_REQUEST, "query parameter longer than %zu bytes", sizeof(a.qbuf) - 1);
        else
            berth_api_fail(&a, BERTH_OCI_BAD_REQUEST, "malformed query parameter (bad escape, NUL byte or not UTF-8)");
        goto Exit;
    }
    if (is_api && berth_api_match(&a, "GET", "health")) { /* before any identity (as to anyone): it reports a database that does not answer */
        a.c = berth_db_acquire(reg->db, &err);
        berth_api_health(&a);
        goto Exit;
    }
    if ((a.c = berth_db_acquire(reg->db, &err)) == NULL) {
        berth_api_err(&a, &err);
        goto Exit;
    }
    if (!is_api) {
        if (berth_api_match(&a, "POST", "login"))
            berth_api_session(&a, 1);
        else if (berth_api_match(&a, "POST", "log_out"))
            berth_api_session(&a, 0);
        else
            berth_api_fail(&a, BERTH_OCI_NOT_FOUND, NULL);
        goto Exit;
    }
    if (authenticate(&a) != 0)
        goto Exit;
    int rc = 1;
    if (a.nseg > 0 && strcmp(a.seg[0], "projects") == 0)
        rc = berth_api_projects_route(&a);
    else if (a.nseg > 0 && (strcmp(a.seg[0], "users") == 0 || strcmp(a.seg[0], "robots") == 0))
        rc = berth_api_accounts_route(&a);
    else if (a.nseg > 0 && (strcmp(a.seg[0], "ldap") == 0 || strcmp(a.seg[0], "usergroups") == 0))
        rc = berth_api_ldap_route(&a);
    else if (a.nseg > 0 && strcmp(a.seg[0], "isa") == 0)
        rc = berth_api_isa_route(&a);
    else if (a.nseg > 0 && (strcmp(a.seg[0], "registries") == 0 || strcmp(a.seg[0], "replication") == 0))
        rc = berth_api_replication_route(&a);
    else
        rc = berth_api_system_route(&a);
    if (rc > 0)
        berth_api_fail(&a, BERTH_OCI_NOT_FOUND, "no such API endpoint");
Exit:
    if (a.c != NULL)
        berth_db_release(reg->db, a.c);
    for (int i = 0; i < a.nseg; i++)
        free(a.seg[i]);
    if (strcmp(rq->method, "HEAD") == 0) { /* HEAD answers carry no body */
        free(resp->body);
        resp->body = NULL;
        resp->len = 0;
    }
    memset(&a.who, 0, sizeof(a.who));
}
