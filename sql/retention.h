/* Tag retention runs in PostgreSQL (sql/retention.c): schedules, claims with a lease, candidates, task rows. */
#ifndef BERTH_SQL_RETENTION_H
#define BERTH_SQL_RETENTION_H

#include <stddef.h>

#include "sql/db.h"

/** A claimed execution. Caller frees policy and project. */
typedef struct st_berth_db_ret_exec_t {
    long long id, policy_id;
    int dry_run;
    char *policy;  /* the policy's JSON ({rules, trigger, …}) */
    char *project; /* project name */
} berth_db_ret_exec_t;

/** One artifact of the project: borrowed from the list it came in. */
typedef struct st_berth_db_ret_candidate_t {
    const char *repo, *digest;
    double pushed, pulled; /* epoch seconds; pulled -1 when never */
    char *tags;            /* the tags, ' ' between them ("" untagged); a copy the caller may split in place */
} berth_db_ret_candidate_t;

typedef struct st_berth_db_ret_candidates_t {
    berth_db_ret_candidate_t *v;
    size_t n;
    double now; /* the database's clock, epoch seconds */
    void *res;  /* owns the strings */
} berth_db_ret_candidates_t;

/** Start a run of every scheduled policy whose cron matches the minute `minute` (epoch seconds, local time
 *  matched by the caller's cron check): one run per policy and minute, whichever berthd gets there first. */
int berth_db_ret_schedule_fire(berth_dbconn_t *c, long long policy_id, long long minute, berth_err_t *err);
/** Scheduled policies: ids and crons (parallel arrays, caller frees both and each cron). */
int berth_db_ret_scheduled(berth_dbconn_t *c, long long **ids, char ***crons, size_t *n, berth_err_t *err);
/** Claim the oldest Pending execution (or a Running one whose lease ran out) for `instance`; BERTH_ENOTFOUND when
 *  none. Tasks of an earlier attempt are dropped: the run starts again. */
int berth_db_ret_claim(berth_dbconn_t *c, const char *instance, berth_db_ret_exec_t *out, berth_err_t *err);
void berth_db_ret_exec_dispose(berth_db_ret_exec_t *e);
/** Renew the lease. 1 when a stop was asked for, 0 to go on, BERTH_ENOTFOUND when the claim was lost. */
int berth_db_ret_heartbeat(berth_dbconn_t *c, long long eid, const char *instance, berth_err_t *err);
/** End the execution: Success, Error or Stopped; in the same transaction the project's TAG_RETENTION webhook event
 * is queued with `detail` (JSON, may be NULL) as event_data.retention (sql/webhook.h). */
int berth_db_ret_finish(berth_dbconn_t *c, long long eid, const char *instance, const char *status, const char *project,
                        const char *detail, berth_err_t *err);
/** Every top-level artifact of project `project`, by repository, newest push first. */
int berth_db_ret_candidates(berth_dbconn_t *c, const char *project, berth_db_ret_candidates_t *out, berth_err_t *err);
void berth_db_ret_candidates_dispose(berth_db_ret_candidates_t *l);
/** Record one repository's task: its counts, what went (JSON array) and its log. */
int berth_db_ret_task_add(berth_dbconn_t *c, long long eid, const char *repo, const char *status, int total, int retained,
                          const char *deleted_json, const char *log, double start, berth_err_t *err);

#endif
