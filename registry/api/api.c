/*
 * The REST API's dispatcher: split the path, check the query, find who is calling, and hand the request to the
 * endpoint group it names. The helpers every endpoint uses live in respond.c, request.c, results.c and access.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/query.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

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
    if (is_api &&
        berth_api_match(&a, "GET", "health")) { /* before any identity (as to anyone): it reports a database that does not answer */
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
    if (berth_api_authenticate(&a) != 0)
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
    else if (a.nseg > 0 && strcmp(a.seg[0], "statistics") == 0)
        rc = berth_api_stats_route(&a);
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
