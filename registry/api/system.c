/* System endpoints (ping, health, systeminfo, search, audit-logs, the OpenAPI document) and browser sessions. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/audit.h"
#include "auth/header.h"
#include "auth/service.h"
#include "core/log.h"
#include "core/query.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

extern const char berth_openapi_yaml[]; /* generated from registry/api/openapi.yaml */

/* GET /health: components core, database, storage. `a->c` may be NULL (the database did not answer). */
static int health(berth_api_t *a)
{
    berth_db_json_t r = {0};
    berth_err_t err;
    int db_ok = a->c != NULL && berth_db_api(a->c, BERTH_Q_PING, NULL, &r, &err) == 0;
    free(r.json);
    /* storage below its reserve is "unhealthy" (uploads are refused) but still 200: pulls are served. A store that
     * does not answer (the bucket unreachable or refusing the credentials) is 503 like the database: a readiness
     * probe then takes this instance out of the Service */
    berth_store_space_t sp;
    int has_space = berth_store_space(a->reg->store, &sp) == 0;
    berth_err_t serr;
    berth_err_clear(&serr);
    int reachable = has_space || berth_store_reachable(a->reg->store, &serr) == 0; /* figures read: the store answered */
    int storage_ok = reachable && !(has_space && sp.below_reserve);
    json_t *storage = json_pack("{s:s,s:s}", "name", "storage", "status", storage_ok ? "healthy" : "unhealthy");
    if (has_space)
        json_object_update_new(storage, json_pack("{s:I,s:I,s:I}", "free_bytes", (json_int_t)sp.free_bytes, "total_bytes",
                                                  (json_int_t)sp.total_bytes, "min_free_bytes", (json_int_t)sp.reserve_bytes));
    if (!reachable)
        json_object_set_new(storage, "error", json_string(serr.msg));
    else if (!storage_ok)
        json_object_set_new(storage, "error", json_string("free space below storage.min_free_bytes: uploads refused"));
    json_t *v =
        json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s},o]}", "status", db_ok && storage_ok ? "healthy" : "unhealthy", "components", "name",
                  "core", "status", "healthy", "name", "database", "status", db_ok ? "healthy" : "unhealthy", storage);
    int up = db_ok && reachable;
    if (!up)
        berth_resp_header(a->resp, "retry-after", "%d", berth_err_retry_after(BERTH_OCI_UNAVAILABLE));
    return berth_api_jsonv(a, up ? 200 : 503, v);
}

/* Harbor's GeneralInfo: what the login page needs for everyone; the version and addresses (which help an attacker
 * more than a visitor) only for logged-in callers, as Harbor does */
static int systeminfo(berth_api_t *a)
{
    char now[32];
    berth_log_now(now);
    json_t *v = json_pack("{s:s,s:b,s:b,s:s,s:s}", "auth_mode",
                          a->reg->auth != NULL && a->reg->auth->ldap != NULL ? "ldap_auth" : "db_auth", "primary_auth_mode", 0,
                          "self_registration", 0, "banner_message", "", "current_time", now);
    if (a->authed) {
        const char *ext = berth_api_conf->external_url != NULL ? berth_api_conf->external_url : "";
        const char *host = strstr(ext, "://");
        json_object_update_new(
            v, json_pack("{s:s,s:s,s:s,s:s,s:b,s:b,s:s,s:b,s:b}", "harbor_version", berth_api_conf->version, "external_url", ext,
                         "registry_url", host != NULL ? host + 3 : ext, "project_creation_restriction",
                         berth_api_conf->project_creation_admin_only ? "adminonly" : "everyone", "has_ca_root", 0, "read_only", 0,
                         "registry_storage_provider_name", "filesystem", "with_notary", 0, "notification_enable", 0));
    }
    return berth_api_jsonv(a, 200, v);
}

static int search(berth_api_t *a)
{
    const char *q = berth_api_param(a, "q");
    if (q == NULL)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "q is required");
    char term[256], id[24];
    snprintf(term, sizeof(term), "%s", q);
    snprintf(id, sizeof(id), "%lld", a->authed ? (long long)a->who.id : 0LL);
    const char *p[] = {id, a->authed && a->who.sysadmin ? "true" : "false", a->authed && a->who.robot ? "true" : "false", term};
    return berth_api_object(a, BERTH_Q_SEARCH, p, "search");
}

static int audit_logs(berth_api_t *a)
{
    char limit[24], offset[24], id[24];
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    /* robots see no global log; users see the projects they administer; system admins see everything */
    snprintf(id, sizeof(id), "%lld", a->who.robot ? -1LL : (long long)a->who.id);
    char op[32] = "", rtype[32] = "", user[256] = "", res[512] = "";
    berth_api_qterm(a, "operation", op, sizeof(op));
    berth_api_qterm(a, "resource_type", rtype, sizeof(rtype));
    berth_api_qterm(a, "username", user, sizeof(user));
    berth_api_qterm(a, "resource", res, sizeof(res));
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("op_time", "id", "username", "operation", "resource", "resource_type"), sort) != 0)
        return -1;
    const char *p[] = {id,
                       a->who.sysadmin ? "true" : "false",
                       NULL,
                       op[0] ? op : NULL,
                       rtype[0] ? rtype : NULL,
                       user[0] ? user : NULL,
                       res[0] ? res : NULL,
                       limit,
                       offset,
                       sort};
    return berth_api_list(a, BERTH_Q_AUDIT_LIST, p, limit, offset);
}

static int ping(berth_api_t *a)
{
    berth_resp_body(a->resp, 200, strdup("Pong"), 4, "text/plain");
    return 0;
}

static int openapi(berth_api_t *a)
{
    berth_resp_body(a->resp, 200, strdup(berth_openapi_yaml), strlen(berth_openapi_yaml), "application/yaml");
    return 0;
}

const berth_api_route_t berth_api_system_routes[] = {
    BERTH_API_ROUTE("GET", "/ping", BERTH_API_P_ANYONE, ping, "getPing"),
    BERTH_API_ROUTE("GET", "/health", BERTH_API_P_PUBLIC, health, "getHealth"),
    BERTH_API_ROUTE("GET", "/systeminfo", BERTH_API_P_ANYONE, systeminfo, "getSystemInfo"),
    BERTH_API_ROUTE("GET", "/search", BERTH_API_P_ANYONE, search, "search"),
    BERTH_API_ROUTE("GET", "/audit-logs", BERTH_API_P_LOGIN, audit_logs, "listAuditLogs"),
    BERTH_API_ROUTE("GET", "/openapi.yaml", BERTH_API_P_ANYONE, openapi, "getOpenAPI"),
    BERTH_API_ROUTES_END,
};

/*
 * POST /c/login (form: principal, password) opens a browser session: an HttpOnly, SameSite=Strict cookie and a
 * CSRF token the page must echo in X-Harbor-CSRF-Token on every change. Robots have no sessions (Harbor).
 * POST /c/log_out ends it.
 */
/* "scheme://host[:port]" of a URL: its length, or 0 when it has none */
static size_t origin_len(const char *url)
{
    const char *p = url != NULL ? strstr(url, "://") : NULL;
    return p == NULL ? 0 : (size_t)(p + 3 - url) + strcspn(p + 3, "/?#");
}

/*
 * Login CSRF: another site can post this form with its own credentials and sign the victim's browser in as the
 * attacker. Browsers say where a request comes from (Sec-Fetch-Site, Origin); a login they mark as coming from
 * anywhere but this origin is refused. Requests that carry neither header (curl, CI, other non-browser clients)
 * are not browsers' and pass.
 */
static int login_cross_site(const berth_api_req_t *rq)
{
    if (rq->fetch_site != NULL && strcmp(rq->fetch_site, "same-origin") != 0 && strcmp(rq->fetch_site, "none") != 0)
        return 1;
    if (rq->origin == NULL)
        return 0;
    char own[512];
    int n = snprintf(own, sizeof(own), "%s://%s", rq->secure ? "https" : "http", rq->host != NULL ? rq->host : "");
    if (rq->host != NULL && n > 0 && (size_t)n < sizeof(own) && strcasecmp(rq->origin, own) == 0)
        return 0;
    const char *ext = berth_api_conf->external_url;
    size_t el = origin_len(ext);
    return !(el > 0 && strlen(rq->origin) == el && strncasecmp(rq->origin, ext, el) == 0);
}

int berth_api_session(berth_api_t *a, int login)
{
    const berth_api_req_t *rq = a->rq;
    const char *cookie_attrs = rq->secure ? "; Path=/; HttpOnly; SameSite=Strict; Secure" : "; Path=/; HttpOnly; SameSite=Strict";
    if (!login) {
        char sid[128] = "";
        if (rq->cookie != NULL)
            berth_query_cookie(rq->cookie, "sid", sid, sizeof(sid));
        if (sid[0] != '\0') {
            char hex[65];
            berth_authsvc_sha256_hex(sid, hex);
            berth_db_session_delete(a->c, hex, NULL);
        }
        berth_resp_header(a->resp, "set-cookie", "sid=deleted; Max-Age=0%s", cookie_attrs);
        return berth_api_empty(a, 200);
    }
    if (login_cross_site(rq))
        return berth_api_fail(a, BERTH_OCI_DENIED, "cross-site login refused");
    char user[256] = "", pw[256] = "";
    const char *body = rq->body != NULL ? rq->body : "";
    if (berth_query_get(body, rq->body_len, "principal", user, sizeof(user)) < 0 ||
        berth_query_get(body, rq->body_len, "password", pw, sizeof(pw)) < 0) {
        OPENSSL_cleanse(pw, sizeof(pw));
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "principal and password are required, without NUL bytes");
    }
    if (!berth_auth_credential_ok(user, strlen(user)) || !berth_auth_credential_ok(pw, strlen(pw))) {
        OPENSSL_cleanse(pw, sizeof(pw));
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "control characters in the user name or password");
    }
    if (strncmp(user, BERTH_ROBOT_PREFIX, strlen(BERTH_ROBOT_PREFIX)) == 0) {
        OPENSSL_cleanse(pw, sizeof(pw));
        return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "robot accounts cannot open sessions");
    }
    int rc = berth_authsvc_login(a->reg->auth, user, pw, rq->remote, &a->who);
    OPENSSL_cleanse(pw, sizeof(pw));
    if (rc == BERTH_ERETRY) {
        berth_authsvc_too_many(a->resp, user, rq->remote);
        return -1;
    }
    if (rc == BERTH_EUNAVAIL)
        return berth_api_fail(a, BERTH_OCI_AUTH_UNAVAILABLE, NULL);
    if (rc != 0)
        return berth_api_fail(a, BERTH_OCI_UNAUTHORIZED, "invalid credentials");
    char sid[48], hex[65], csrf[48], csrf_hex[65];
    berth_authsvc_random_secret(sid, hex);
    berth_authsvc_random_secret(csrf, csrf_hex);
    berth_err_t err;
    if (berth_db_session_create(a->c, hex, a->who.id, csrf, berth_api_conf->session_ttl, &err) != 0) {
        OPENSSL_cleanse(sid, sizeof(sid));
        return berth_api_err(a, &err);
    }
    a->authed = 1;
    berth_audit(a->who.username, rq->remote, "login", "session", "web", NULL, 1, "");
    berth_resp_header(a->resp, "set-cookie", "sid=%s; Max-Age=%d%s", sid, berth_api_conf->session_ttl, cookie_attrs);
    berth_resp_header(a->resp, "x-harbor-csrf-token", "%s", csrf);
    OPENSSL_cleanse(sid, sizeof(sid));
    return berth_api_jsonv(a, 200, json_pack("{s:s,s:s}", "username", a->who.username, "csrf_token", csrf));
}
