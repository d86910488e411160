/* Statistics for the web UI (issue #11): Harbor's /statistics and the aggregates its charts draw, all computed
 * in SQL over the projects the caller may see. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"
#include "registry/api/routes.h"

static long bounded(berth_api_t *a, const char *key, long dflt, long max, int *bad)
{
    const char *v = berth_api_param(a, key);
    if (v == NULL)
        return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 1 || n > max)
        *bad = 1;
    return n;
}

/* the caller's id, whether a system admin, whether a robot: $1-$3 of the statistics queries */
typedef struct {
    char id[24];
    const char *admin, *robot;
} viewer_t;

static void viewer(berth_api_t *a, viewer_t *v)
{
    snprintf(v->id, sizeof(v->id), "%lld", (long long)a->who.id);
    v->admin = a->who.sysadmin ? "true" : "false";
    v->robot = a->who.robot ? "true" : "false";
}

static int totals(berth_api_t *a)
{
    viewer_t v;
    viewer(a, &v);
    const char *p[] = {v.id, v.admin, v.robot};
    return berth_api_object(a, BERTH_Q_STATISTICS, p, "statistics");
}

/* A per-viewer aggregate with one bounded integer parameter (1..max, default def) */
static int viewer_bounded(berth_api_t *a, berth_q_t q, const char *param, long def, long max)
{
    viewer_t v;
    char arg[24];
    int bad = 0;
    viewer(a, &v);
    snprintf(arg, sizeof(arg), "%ld", bounded(a, param, def, max, &bad));
    if (bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s must be between 1 and %ld", param, max);
    const char *p[] = {v.id, v.admin, v.robot, arg};
    return berth_api_object(a, q, p, "statistics");
}

static int storage(berth_api_t *a)
{
    return viewer_bounded(a, BERTH_Q_STATS_STORAGE, "limit", 20, 100);
}

static int activity(berth_api_t *a)
{
    return viewer_bounded(a, BERTH_Q_STATS_ACTIVITY, "days", 30, 366);
}

static int replication(berth_api_t *a)
{
    char arg[24];
    int bad = 0;
    snprintf(arg, sizeof(arg), "%ld", bounded(a, "limit", 30, 500, &bad));
    if (bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "limit must be between 1 and 500");
    const char *p[] = {arg};
    return berth_api_object(a, BERTH_Q_STATS_REPLICATION, p, "statistics");
}

const berth_api_route_t berth_api_stats_routes[] = {
    BERTH_API_ROUTE("GET", "/statistics", BERTH_API_P_LOGIN, totals, "getStatistic"),
    BERTH_API_ROUTE("GET", "/statistics/storage", BERTH_API_P_LOGIN, storage, "getStatisticStorage"),
    BERTH_API_ROUTE("GET", "/statistics/activity", BERTH_API_P_LOGIN, activity, "getStatisticActivity"),
    BERTH_API_ROUTE("GET", "/statistics/replication", BERTH_API_P_ADMIN, replication, "getStatisticReplication"),
    BERTH_API_ROUTES_END,
};
