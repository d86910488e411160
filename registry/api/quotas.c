/* /api/v2.0/quotas: Harbor's per-project storage quotas (system administrators). Usage is kept by the database
 * (sql/migrations/0110_quotas.sql); this file lists quotas and changes their limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/quota.h"

static int list_quotas(berth_api_t *a)
{
    char limit[24], offset[24], ref[32] = "", ref_id[24] = "";
    if (berth_api_page(a, limit, offset) != 0)
        return -1;
    const char *v;
    if ((v = berth_api_param(a, "reference")) != NULL)
        snprintf(ref, sizeof(ref), "%s", v);
    if ((v = berth_api_param(a, "reference_id")) != NULL) {
        if (!berth_api_id_ok(v))
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "reference_id must be a number");
        snprintf(ref_id, sizeof(ref_id), "%s", v);
    }
    if (ref[0] != '\0' && strcmp(ref, "project") != 0) /* Harbor's only reference */
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "reference must be project");
    char sort[40];
    if (berth_api_sort(a, BERTH_API_SORTS("hard.storage", "used.storage", "creation_time", "update_time"), sort) != 0)
        return -1;
    const char *p[] = {ref[0] ? ref : NULL, ref_id[0] ? ref_id : NULL, limit, offset, sort};
    return berth_api_list(a, BERTH_Q_QUOTAS_LIST, p, limit, offset);
}

static int get_quota(berth_api_t *a)
{
    const char *p[] = {berth_api_arg(a, "quota_id")};
    return berth_api_object(a, BERTH_Q_QUOTA_GET, p, "quota");
}

/* PUT {"hard": {"storage": N}}: N bytes (1 to 1024 TiB) or -1 for unlimited. A limit below the current usage is
 * allowed: it refuses every push that adds bytes until usage falls under it. */
static int update_quota(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *hard = json_object_get(body, "hard");
    json_t *storage = json_object_get(hard, "storage");
    int ok = json_is_object(hard) && json_object_size(hard) == 1 && json_is_integer(storage) &&
             berth_quota_limit_ok(json_integer_value(storage)) && json_integer_value(storage) != 0;
    long long n = ok ? (long long)json_integer_value(storage) : 0;
    json_decref(body);
    if (!ok)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                              "hard must be {\"storage\": N} with N bytes from 1 to %lld, or -1 for unlimited", BERTH_QUOTA_MAX);
    char nbuf[24];
    snprintf(nbuf, sizeof(nbuf), "%lld", n);
    const char *id = berth_api_arg(a, "quota_id");
    const char *p[] = {id, nbuf};
    berth_db_json_t r;
    if (berth_api_query(a, BERTH_Q_QUOTA_UPDATE, p, &r) != 0)
        return -1;
    if (r.json == NULL) {
        berth_api_audit(a, "update", "quota", id, NULL, 0);
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "quota not found");
    }
    json_t *name = json_loads(r.json, JSON_DECODE_ANY, NULL);
    free(r.json);
    char res[300];
    snprintf(res, sizeof(res), "%s:storage=%lld", json_is_string(name) ? json_string_value(name) : id, n);
    berth_api_audit(a, "update", "quota", res, json_is_string(name) ? json_string_value(name) : NULL, 1);
    json_decref(name);
    return berth_api_empty(a, 200);
}

const berth_api_route_t berth_api_quotas_routes[] = {
    BERTH_API_ROUTE("GET", "/quotas", BERTH_API_P_ADMIN, list_quotas, "listQuotas"),
    BERTH_API_ROUTE("GET", "/quotas/{quota_id}", BERTH_API_P_ADMIN, get_quota, "getQuota"),
    BERTH_API_ROUTE("PUT", "/quotas/{quota_id}", BERTH_API_P_ADMIN, update_quota, "updateQuota"),
    BERTH_API_ROUTES_END,
};
