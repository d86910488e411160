/*
 * Online garbage collection (issue 13). Runs are PostgreSQL rows (sql/gc.c): the REST API creates them
 * (registry/api/gc.c), the schedule creates them, and one background thread per berthd claims the oldest active
 * run through a lease, so several berthd on one database never run two at once and a crashed run is taken over
 * when its lease runs out. A run marks (set operations in SQL), then sweeps in batches that each lock, re-check
 * and delete in one short transaction, then unlinks the files of the deleted blob rows; its phase and cursor are
 * committed with every batch, so a stopped or crashed run resumes where it stopped. The safety rule and its proof
 * are in README.md ("Garbage collection").
 */
#ifndef BERTH_SERVICE_GC_H
#define BERTH_SERVICE_GC_H

#include <jansson.h>
#include <stdio.h>
#include <time.h>

#include "registry/service/registry.h"

typedef struct st_berth_gc_conf_t {
    const char *database_url; /* the collector has its own connection, without the request deadline */
    long grace_seconds;       /* gc.grace_seconds: unreferenced at least this long before anything goes (7200) */
    long lease_seconds;       /* gc.lease_seconds: a run whose holder stopped renewing is taken over after this (60) */
    long batch;               /* gc.batch: rows per sweep transaction (1000) */
    long interval_ms;         /* how often the thread looks for runs and the schedule (20000) */
} berth_gc_conf_t;

/** Start the collector's thread. 0, or BERTH_EUNAVAIL / BERTH_ERROR with err set. */
int berth_gc_start(berth_registry_t *reg, const berth_gc_conf_t *conf, berth_err_t *err);
/** Stop it: a run in progress keeps its state and gives up its lease, so the next start resumes it at once. */
void berth_gc_stop(void);
/** Look for work now (a run was just created). No-op when not started. */
void berth_gc_wake(void);
/** The grace window in effect (for the API's answers). */
long berth_gc_grace_seconds(void);
/** Append the collector's figures to a /metrics page. */
void berth_gc_metrics(FILE *f);
/** Which of `digests` (a JSON array of digest strings) have no blob row: a new JSON array, or NULL with err set. */
json_t *berth_gc_unowned(berth_dbconn_t *c, json_t *digests, berth_err_t *err);

/**
 * Harbor's schedule types as a cron expression (seconds first, as Harbor writes them): Hourly, Daily, Weekly, or
 * Custom/Schedule with `cron` checked. Writes "" for None and Manual. 0, or BERTH_EINVAL.
 */
int berth_gc_schedule_cron(const char *type, const char *cron, char *out, size_t outsz);
/** The first minute after `from` (local time, as replication's schedules) that `cron` fires in, within 366 days; 0 if none. */
time_t berth_gc_next_time(const char *cron, time_t from);

#endif
