/* Garbage collection (Harbor's /system/gc): history, a run's log, stop, and the schedule that also starts a run
 * now (type Manual). System administrators only. The runs themselves execute on the collector's thread
 * (registry/service/gc.c), which this only wakes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/gc.h"

static int list_runs(berth_api_t *a)
{
    char limit[24], offset[24], sort[40];
    if (berth_api_page(a, limit, offset) != 0 ||
        berth_api_sort(a, BERTH_API_SORTS("id", "creation_time", "update_time"), sort) != 0)
        return -1;
    const char *p[] = {limit, offset, sort};
    return berth_api_list(a, BERTH_Q_GC_LIST, p, limit, offset);
}

static const char *run_id(berth_api_t *a)
{
    const char *id = berth_api_arg(a, "gc_id");
    return id != NULL && berth_api_id_ok(id) ? id : NULL;
}

static int get_run(berth_api_t *a)
{
    const char *id = run_id(a);
    if (id == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "garbage collection run not found");
    const char *p[] = {id};
    return berth_api_object(a, BERTH_Q_GC_GET, p, "garbage collection run");
}

static int run_log(berth_api_t *a)
{
    const char *id = run_id(a);
    berth_db_json_t l = {0};
    const char *p[] = {id};
    if (id == NULL || berth_api_query(a, BERTH_Q_GC_LOG, p, &l) != 0)
        return id == NULL ? berth_api_fail(a, BERTH_OCI_NOT_FOUND, "garbage collection run not found") : -1;
    return berth_api_text(a, l.json, "garbage collection run not found");
}

static int stop_run(berth_api_t *a)
{
    const char *id = run_id(a);
    berth_db_json_t r = {0};
    const char *p[] = {id};
    if (id == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "garbage collection run not found");
    if (berth_api_query(a, BERTH_Q_GC_STOP, p, &r) != 0)
        return -1;
    int stopped = r.json != NULL;
    free(r.json);
    if (!stopped) { /* absent, or finished already */
        const char *gp[] = {id};
        berth_db_json_t g = {0};
        if (berth_api_query(a, BERTH_Q_GC_GET, gp, &g) != 0)
            return -1;
        int exists = g.json != NULL;
        free(g.json);
        return exists ? berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "the run has already ended")
                      : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "garbage collection run not found");
    }
    berth_api_audit(a, "stop", "garbage_collection", id, NULL, 1);
    berth_gc_wake();
    return berth_api_empty(a, 200);
}

/* GET: the schedule, with when it fires next; "None" before one was ever set */
static int get_schedule(berth_api_t *a)
{
    berth_db_json_t r = {0};
    if (berth_api_query(a, BERTH_Q_GC_SCHEDULE_GET, NULL, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    free(r.json);
    if (v == NULL)
        v = json_pack("{s:{s:s,s:s},s:s}", "schedule", "type", "None", "cron", "", "job_parameters",
                      "{\"delete_untagged\": false, \"dry_run\": false, \"workers\": 1}");
    json_t *sch = json_object_get(v, "schedule");
    const char *type = json_string_value(json_object_get(sch, "type")), *cron = json_string_value(json_object_get(sch, "cron"));
    char expr[128];
    time_t next =
        type != NULL && berth_gc_schedule_cron(type, cron, expr, sizeof(expr)) == 0 ? berth_gc_next_time(expr, time(NULL)) : 0;
    if (next != 0) {
        char ts[40];
        struct tm tm;
        gmtime_r(&next, &tm);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(sch, "next_scheduled_time", json_string(ts));
    }
    json_object_set_new(v, "grace_seconds", json_integer(berth_gc_grace_seconds()));
    return berth_api_jsonv(a, 200, v);
}

/* A boolean parameter: absent is false; anything but true/false is 400 (-1 answered) */
static int bool_param(berth_api_t *a, json_t *params, const char *key, int *out)
{
    json_t *v = json_object_get(params, key);
    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "parameters.%s must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* POST (201) and PUT (200) of the schedule; type Manual starts a run now (201 with its Location) */
static int set_schedule(berth_api_t *a, int status)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *sch = json_object_get(body, "schedule"), *params = json_object_get(body, "parameters");
    const char *type = json_string_value(json_object_get(sch, "type"));
    const char *cron = json_string_value(json_object_get(sch, "cron"));
    int untagged = 0, dry = 0, rc = 0;
    long long workers = 1;
    char expr[128], wbuf[8];
    if (!json_is_object(sch) || type == NULL)
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "schedule.type is required (None, Hourly, Daily, Weekly, Custom or Manual)");
    else if (params != NULL && !json_is_object(params))
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "parameters must be an object");
    else if (berth_gc_schedule_cron(type, cron, expr, sizeof(expr)) != 0)
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST,
                            "schedule.type must be None, Hourly, Daily, Weekly, Custom or Manual, and Custom needs a valid cron");
    else if (bool_param(a, params, "delete_untagged", &untagged) != 0 || bool_param(a, params, "dry_run", &dry) != 0)
        rc = -1;
    else if (json_object_get(params, "workers") != NULL &&
             (!json_is_integer(json_object_get(params, "workers")) ||
              (workers = json_integer_value(json_object_get(params, "workers"))) < 1 || workers > 5))
        rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "parameters.workers must be an integer from 1 to 5");
    if (rc != 0) {
        json_decref(body);
        return -1;
    }
    snprintf(wbuf, sizeof(wbuf), "%lld", workers);
    const char *u = untagged ? "true" : "false", *d = dry ? "true" : "false";
    int manual = type != NULL && strcmp(type, "Manual") == 0;
    berth_db_json_t r = {0};
    berth_err_t err;
    if (manual) {
        const char *p[] = {"MANUAL", u, d, wbuf};
        rc = berth_db_api(a->c, BERTH_Q_GC_CREATE, p, &r, &err);
    } else {
        const char *p[] = {type, expr, u, d, wbuf};
        rc = berth_db_api(a->c, BERTH_Q_GC_SCHEDULE_PUT, p, &r, &err);
    }
    berth_api_audit(a, manual ? "create" : "update", manual ? "garbage_collection" : "garbage_collection_schedule", type, NULL,
                    rc == 0);
    json_decref(body);         /* `type` points into it */
    if (rc == BERTH_EEXISTS) { /* the active run may be a dead instance's: this collector looks now whether its lease ran
                                * out and takes it over, instead of at its next tick (gc.c, every 20 s) */
        berth_gc_wake();
        return berth_api_fail(a, BERTH_OCI_CONFLICT, "a garbage collection run is already pending or running");
    }
    if (rc != 0)
        return berth_api_err(a, &err);
    if (!manual) {
        free(r.json);
        return berth_api_empty(a, status);
    }
    berth_gc_wake();
    return berth_api_created(a, r.json, "id", "/api/v2.0/system/gc");
}

static int create_schedule(berth_api_t *a)
{
    return set_schedule(a, 201);
}

static int update_schedule(berth_api_t *a)
{
    return set_schedule(a, 200);
}

const berth_api_route_t berth_api_gc_routes[] = {
    BERTH_API_ROUTE("GET", "/system/gc", BERTH_API_P_ADMIN, list_runs, "getGCHistory"),
    BERTH_API_ROUTE("GET", "/system/gc/schedule", BERTH_API_P_ADMIN, get_schedule, "getGCSchedule"),
    BERTH_API_ROUTE("POST", "/system/gc/schedule", BERTH_API_P_ADMIN, create_schedule, "createGCSchedule"),
    BERTH_API_ROUTE("PUT", "/system/gc/schedule", BERTH_API_P_ADMIN, update_schedule, "updateGCSchedule"),
    BERTH_API_ROUTE("GET", "/system/gc/{gc_id}", BERTH_API_P_ADMIN, get_run, "getGC"),
    BERTH_API_ROUTE("PUT", "/system/gc/{gc_id}", BERTH_API_P_ADMIN, stop_run, "stopGC"),
    BERTH_API_ROUTE("GET", "/system/gc/{gc_id}/log", BERTH_API_P_ADMIN, run_log, "getGCLog"),
    BERTH_API_ROUTES_END,
};
