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

int berth_api_stats_route(berth_api_t *a)
{
    if (a->nseg < 1 || strcmp(a->seg[0], "statistics") != 0)
        return 1;
    if (berth_api_need_login(a) != 0)
        return -1;
    char id[24], arg[24];
    snprintf(id, sizeof(id), "%lld", (long long)a->who.id);
    const char *admin = a->who.sysadmin ? "true" : "false", *robot = a->who.robot ? "true" : "false";
    int bad = 0;
    if (berth_api_match(a, "GET", "statistics")) {
        const char *p[] = {id, admin, robot};
        return berth_api_object(a, BERTH_Q_STATISTICS, p, "statistics");
    }
    if (berth_api_match(a, "GET", "statistics/storage")) {
        snprintf(arg, sizeof(arg), "%ld", bounded(a, "limit", 20, 100, &bad));
        if (bad)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "limit must be between 1 and 100");
        const char *p[] = {id, admin, robot, arg};
        return berth_api_object(a, BERTH_Q_STATS_STORAGE, p, "statistics");
    }
    if (berth_api_match(a, "GET", "statistics/activity")) {
        snprintf(arg, sizeof(arg), "%ld", bounded(a, "days", 30, 366, &bad));
        if (bad)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "days must be between 1 and 366");
        const char *p[] = {id, admin, robot, arg};
        return berth_api_object(a, BERTH_Q_STATS_ACTIVITY, p, "statistics");
    }
    if (berth_api_match(a, "GET", "statistics/replication")) {
        if (berth_api_need_admin(a) != 0)
            return -1;
        snprintf(arg, sizeof(arg), "%ld", bounded(a, "limit", 30, 500, &bad));
        if (bad)
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "limit must be between 1 and 500");
        const char *p[] = {arg};
        return berth_api_object(a, BERTH_Q_STATS_REPLICATION, p, "statistics");
    }
    return 1;
}
