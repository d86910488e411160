/* Shared by the files of registry/api/: the request context and the helpers every endpoint uses. */
#ifndef BERTH_API_INTERNAL_H
#define BERTH_API_INTERNAL_H

#include <jansson.h>

#include "auth/authz.h"
#include "core/ref.h"
#include "registry/api/api.h"
#include "sql/api.h"

#define BERTH_API_MAX_SEGS 12

struct st_berth_api_route_t; /* routes.h */

typedef struct st_berth_api_t {
    berth_registry_t *reg;
    const berth_api_req_t *rq;
    berth_resp_t *resp;
    berth_dbconn_t *c;
    berth_db_user_t who; /* valid when authed */
    int authed;
    char *seg[BERTH_API_MAX_SEGS]; /* decoded path segments after /api/v2.0/ (route parameters) */
    int nseg;
    char qbuf[1024];                          /* last value berth_api_param returned */
    const struct st_berth_api_route_t *route; /* the row that matched */
    berth_authz_t z;                          /* routes in a project: the caller's rights there */
    char project[256];                        /* routes in a project: its canonical name */
    char repo[BERTH_NAME_MAX + 2];            /* routes with {repository_name}: "project/repository", checked */
} berth_api_t;

typedef int (*berth_api_fn)(berth_api_t *a);

extern const berth_api_conf_t *berth_api_conf;

/* Answers. Each returns 0 so handlers can `return berth_api_...(a, ...)`. */
int berth_api_json(berth_api_t *a, int status, char *json); /* takes json */
int berth_api_jsonv(berth_api_t *a, int status, json_t *v); /* takes v */
int berth_api_empty(berth_api_t *a, int status);
/** 201 with Location "<prefix>/<id>", the id read from `key` of a query's JSON result, which is freed here. */
int berth_api_created(berth_api_t *a, char *json, const char *key, const char *prefix);
/** 200 text/plain with the string a query returned as JSON (a log), which is freed here; 404 `what` when it is not one. */
int berth_api_text(berth_api_t *a, char *json, const char *what);
int berth_api_fail(berth_api_t *a, berth_oci_t oci, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** Answer from err (database failures and the like). */
int berth_api_err(berth_api_t *a, const berth_err_t *err);

/** Decoded query parameter or NULL when absent (points into a->qbuf: copy before the next call). */
const char *berth_api_param(berth_api_t *a, const char *key);
/** Copy the text `v` into out; when it does not fit, answered 400 naming `what` (-1), never cut. */
int berth_api_copy(berth_api_t *a, char *out, size_t outsz, const char *v, const char *what);
/** A q= filter term ("key=value" exact or "key=~value" substring), copied into out; returns 1 exact, 2 fuzzy, 0 absent. */
int berth_api_qterm(berth_api_t *a, const char *key, char *out, size_t outsz);
/** page/page_size into limit/offset strings; 0, or answered 400. */
int berth_api_page(berth_api_t *a, char limit[24], char offset[24]);
/**
 * Harbor's sort=key or sort=-key (descending): `keys` (NULL-terminated, see BERTH_API_SORTS) are what the list may
 * be sorted by. Writes the validated value into out ("" when absent: the list's own order), the list query's
 * sort parameter (SORT_BY in sql/api.c); anything else is answered 400 (-1).
 */
int berth_api_sort(berth_api_t *a, const char *const *keys, char out[40]);
#define BERTH_API_SORTS(...) ((const char *const[]){__VA_ARGS__, NULL})
/** Run a list query and answer 200 with X-Total-Count and Link (page navigation). */
int berth_api_list(berth_api_t *a, berth_q_t q, const char *const *params, const char *limit, const char *offset);
/** Run a query returning one object and answer 200 with it, or 404 `what` when there is none. */
int berth_api_object(berth_api_t *a, berth_q_t q, const char *const *params, const char *what);
/** Run a query; 0 with *out, or answered the error (returns -1). */
int berth_api_query(berth_api_t *a, berth_q_t q, const char *const *params, berth_db_json_t *out);
/** One row of `q` as a JSON object (json_decref it), or NULL answered (404 "<what> not found" when no row). */
json_t *berth_api_fetch(berth_api_t *a, berth_q_t q, const char *const *params, const char *what);
/** The request body as a JSON object, or NULL answered 400. */
json_t *berth_api_body(berth_api_t *a);

/**
 * Authorization for project `name` (a route segment; digits-only names that are not a project are taken as
 * project ids). 0 with *z, or answered (and -1): callers who cannot read the project get the answer a
 * nonexistent one gets (401 anonymous, 404 otherwise), so existence does not leak.
 */
int berth_api_project(berth_api_t *a, const char *name, berth_authz_t *z, char canonical[256]);
/** 0 if `z` grants `actions` on `res`, else answered 403 (-1). */
int berth_api_need(berth_api_t *a, const berth_authz_t *z, berth_resource_t res, unsigned actions);
/** 0 for a system admin, else answered 401/403 (-1). */
int berth_api_need_admin(berth_api_t *a);
/** 0 for any authenticated caller, else answered 401 (-1). */
int berth_api_need_login(berth_api_t *a);
/** Run a delete query that returns the deleted object's name (JSON string), audit it, answer 200 or 404. */
int berth_api_delete(berth_api_t *a, berth_q_t q, const char *const *params, const char *rtype, const char *fallback,
                     const char *project);
/** Audit an API change by the caller. */
void berth_api_audit(berth_api_t *a, const char *op, const char *rtype, const char *resource, const char *project, int ok);

/** The user group a member request names ({id} or {group_name, ldap_group_dn}, created if new); 0 or answered. */
int berth_api_group_id(berth_api_t *a, json_t *group, char id[24]);

/** The decoded path segment of the matched route's "{name}", or NULL. */
const char *berth_api_arg(berth_api_t *a, const char *name);
/** Split the path after the API prefix into decoded segments (a->seg); -1 when malformed or too many. */
int berth_api_split(berth_api_t *a, const char *path, size_t len);
/** Who is calling (a->who, a->authed): 0, or answered (bad credentials, CSRF, unavailable directory). */
int berth_api_authenticate(berth_api_t *a);
/** 1 if `s` is a database id: 1 to 18 decimal digits (so it fits a bigint). */
int berth_api_id_ok(const char *s);

#endif
