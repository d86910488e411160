/*
 * The REST API's dispatcher: split the path, check the query, find the route in the groups' tables (routes.h), find
 * who is calling, apply the route's permission and hand the request to its handler. The helpers every endpoint
 * uses live in respond.c, request.c, results.c and access.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/query.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "sql/listen.h"

const berth_api_route_t *const berth_api_route_tables[] = {berth_api_system_routes,    berth_api_stats_routes,
                                                           berth_api_projects_routes,  berth_api_image_routes,
                                                           berth_api_isa_routes,       berth_api_accounts_routes,
                                                           berth_api_ldap_routes,      berth_api_replication_routes,
                                                           berth_api_immutable_routes, berth_api_gc_routes,
                                                           berth_api_retention_routes, berth_api_quotas_routes,
                                                           berth_api_webhook_routes,   NULL};

const berth_api_route_t *berth_api_route_find(berth_api_t *a)
{
    const char *m = a->rq->method;
    for (const berth_api_route_t *const *t = berth_api_route_tables; *t != NULL; t++)
        for (const berth_api_route_t *r = *t; r->method != NULL; r++)
            if ((strcmp(r->method, m) == 0 || (strcmp(r->method, "GET") == 0 && strcmp(m, "HEAD") == 0)) &&
                berth_api_route_match(r, a->seg, a->nseg))
                return r;
    return NULL;
}

/* The /c/ surface: browser sessions, outside /api/v2.0 and its tables */
static void session_route(berth_api_t *a)
{
    int post = strcmp(a->rq->method, "POST") == 0;
    if (post && a->nseg == 1 && strcmp(a->seg[0], "login") == 0)
        berth_api_session(a, 1);
    else if (post && a->nseg == 1 && strcmp(a->seg[0], "log_out") == 0)
        berth_api_session(a, 0);
    else
        berth_api_fail(a, BERTH_OCI_NOT_FOUND, NULL);
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
    if (berth_api_split(&a, rq->path + skip, rq->path_len - skip) != 0) {
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
    a.route = is_api ? berth_api_route_find(&a) : NULL;
    if (a.route != NULL && a.route->perm.kind == BERTH_API_PUBLIC) { /* before any identity, and without a database */
        a.c = berth_db_acquire(reg->db, &err);
        a.route->handler(&a);
        goto Exit;
    }
    if ((a.c = berth_db_acquire(reg->db, &err)) == NULL) {
        berth_api_err(&a, &err);
        goto Exit;
    }
    if (!is_api) {
        session_route(&a);
        goto Exit;
    }
    if (berth_api_authenticate(&a) != 0)
        goto Exit;
    berth_db_set_actor(a.c, a.authed ? a.who.username : ""); /* the operator of the webhook events it queues */
    if (a.route == NULL)
        berth_api_fail(&a, BERTH_OCI_NOT_FOUND, "no such API endpoint");
    else if (berth_api_permit(&a) == 0 && berth_api_path_check(&a) == 0)
        a.route->handler(&a);
Exit:
    /* a write that took a right away made its triggers NOTIFY every instance (sql/migrations/0191): this one forgets
     * what it decided before the caller hears the write succeeded (other instances: as the NOTIFY arrives) */
    if (a.c != NULL && is_api && a.route != NULL && resp->status < 400 && strcmp(rq->method, "GET") != 0 &&
        strcmp(rq->method, "HEAD") != 0)
        berth_db_listen_sync(a.c, 1000);
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
