/*
 * The REST API (Harbor's /api/v2.0 paths and JSON shapes) and browser sessions (/c/login, /c/log_out).
 * Blocking (SQL, argon2): call on a worker thread. Every endpoint asks the same authorization (auth/authz.h).
 */
#ifndef BERTH_API_API_H
#define BERTH_API_API_H

#include <stddef.h>

#include "core/resp.h"
#include "registry/service/registry.h"

typedef struct st_berth_api_req_t {
    const char *method;
    const char *path; /* from "/api/v2.0/..." or "/c/...", without the query */
    size_t path_len;
    const char *query; /* without '?', may be NULL */
    size_t query_len;
    const char *body;
    size_t body_len;
    const char *authorization; /* header values or NULL */
    const char *cookie;
    const char *csrf; /* X-Harbor-CSRF-Token */
    const char *remote;
    const char *origin, *fetch_site, *host; /* Origin, Sec-Fetch-Site, Host (login CSRF check); may be NULL */
    int secure;                             /* the client came over TLS: session cookies get Secure */
    int resource_name; /* X-Is-Resource-Name: true — a {project_name_or_id} segment is a name even when numeric */
} berth_api_req_t;

/** Settings the API reports or enforces. */
typedef struct st_berth_api_conf_t {
    int project_creation_admin_only; /* Harbor's project_creation_restriction: adminonly (1) or everyone (0) */
    int session_ttl;                 /* seconds */
    const char *external_url;
    const char *version;
} berth_api_conf_t;

void berth_api_configure(const berth_api_conf_t *conf);
void berth_api_handle(berth_registry_t *reg, const berth_api_req_t *rq, berth_resp_t *resp);

#endif
