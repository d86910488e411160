/*
 * The REST API's route tables: one per endpoint group (projects.c, image.c, accounts.c, system.c, stats.c, ldap.c,
 * isa.c, replication.c, immutable.c, gc.c, retention.c, quotas.c, webhook.c), each row a method, the OpenAPI path, who may call it,
 * the handler and the OpenAPI operationId. The dispatcher (api.c) walks them and checks the permission before the handler runs;
 * unit_api_routes walks them against openapi.yaml. Adding an endpoint is its handler, one row here and its OpenAPI text. No group
 * calls another.
 */
#ifndef BERTH_API_ROUTES_H
#define BERTH_API_ROUTES_H

#include "registry/api/internal.h"

/** Who may call a route. The zero value is no permission at all: the dispatcher refuses such a route (403). */
typedef enum {
    BERTH_API_DENY = 0,
    BERTH_API_PUBLIC,  /* anyone, answered before identity and the database (GET /health reports a database that is down) */
    BERTH_API_ANYONE,  /* anonymous callers too; the handler may narrow it per object (search, ISA pull per image) */
    BERTH_API_LOGIN,   /* any authenticated caller; the handler may narrow it per object (self or admin, robot, policy scope) */
    BERTH_API_ADMIN,   /* system administrators */
    BERTH_API_PROJECT, /* `act` on `res` in the project the path's first parameter names (which the caller must see) */
} berth_api_perm_kind_t;

typedef struct st_berth_api_perm_t {
    berth_api_perm_kind_t kind;
    berth_resource_t res; /* BERTH_API_PROJECT only */
    unsigned act;
} berth_api_perm_t;

/* Permissions for BERTH_API_ROUTE rows (initializers, expanded after the row's arguments are split) */
#define BERTH_API_P_PUBLIC                                                                                                         \
    {                                                                                                                              \
        BERTH_API_PUBLIC, 0, 0                                                                                                     \
    }
#define BERTH_API_P_ANYONE                                                                                                         \
    {                                                                                                                              \
        BERTH_API_ANYONE, 0, 0                                                                                                     \
    }
#define BERTH_API_P_LOGIN                                                                                                          \
    {                                                                                                                              \
        BERTH_API_LOGIN, 0, 0                                                                                                      \
    }
#define BERTH_API_P_ADMIN                                                                                                          \
    {                                                                                                                              \
        BERTH_API_ADMIN, 0, 0                                                                                                      \
    }
#define BERTH_API_P_PROJECT(res, act)                                                                                              \
    {                                                                                                                              \
        BERTH_API_PROJECT, BERTH_RES_##res, BERTH_ACT_##act                                                                        \
    }

typedef struct st_berth_api_route_t {
    const char *method; /* a GET route answers HEAD too, unless a HEAD row for the path comes first */
    const char *path;   /* the OpenAPI path under /api/v2.0: "/projects/{project_name_or_id}/members/{mid}" */
    berth_api_perm_t perm;
    berth_api_fn handler;
    const char *operation_id; /* the OpenAPI operationId */
} berth_api_route_t;

/* A row: every column is required (the macro's arity), so a route cannot be written without its permission. */
#define BERTH_API_ROUTE(method, path, perm, handler, operation_id)                                                                 \
    {                                                                                                                              \
        method, path, perm, handler, operation_id                                                                                  \
    }
#define BERTH_API_ROUTES_END                                                                                                       \
    {                                                                                                                              \
        NULL, NULL, {BERTH_API_DENY, 0, 0}, NULL, NULL                                                                             \
    }

/* The tables, each ending with BERTH_API_ROUTES_END. Within a table the first matching row wins, so a literal
 * segment ("users/current") comes before a parameter in the same place ("users/{user_id}"). */
extern const berth_api_route_t berth_api_system_routes[];
extern const berth_api_route_t berth_api_stats_routes[];
extern const berth_api_route_t berth_api_projects_routes[];
extern const berth_api_route_t berth_api_isa_routes[];
extern const berth_api_route_t berth_api_image_routes[];
extern const berth_api_route_t berth_api_accounts_routes[];
extern const berth_api_route_t berth_api_ldap_routes[];
extern const berth_api_route_t berth_api_replication_routes[];
extern const berth_api_route_t berth_api_immutable_routes[];
extern const berth_api_route_t berth_api_gc_routes[];
extern const berth_api_route_t berth_api_retention_routes[];
extern const berth_api_route_t berth_api_quotas_routes[];
extern const berth_api_route_t berth_api_webhook_routes[];

/** Every table, NULL-terminated, in the order the dispatcher walks them. */
extern const berth_api_route_t *const berth_api_route_tables[];

/** The row for a->rq's method and a->seg, or NULL. */
const berth_api_route_t *berth_api_route_find(berth_api_t *a);
/** 1 if the route's path matches segments seg[0..nseg) (a "{name}" matches any one segment). */
int berth_api_route_match(const berth_api_route_t *r, char *const *seg, int nseg);
/** Apply a->route's permission: 0, or answered (401, 403, 404 for a project the caller cannot see) and -1. */
int berth_api_permit(berth_api_t *a);
/** Check a->route's typed path parameters (ids are numbers, {repository_name} is valid): 0, or answered 400 and -1. */
int berth_api_path_check(berth_api_t *a);
/** Name of a permission for listings ("login", "project repository:pull"); into buf. */
const char *berth_api_perm_name(const berth_api_perm_t *p, char *buf, size_t bufsz);

/* Browser sessions (POST /c/login, /c/log_out): not /api/v2.0 routes, so not in the tables. login 1 or 0. */
int berth_api_session(berth_api_t *a, int login);

#endif
