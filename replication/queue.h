/*
 * PostgreSQL rows are replication's queue: an execution is one run of a policy, each artifact is a task row, and
 * workers claim tasks with FOR UPDATE SKIP LOCKED, so a restarted berthd takes unfinished work up again. Every
 * function runs one statement of sql/api.c on a pooled connection and returns 0 or a BERTH_E* code; the rows come
 * back typed (task.h).
 */
#ifndef BERTH_REPLICATION_QUEUE_H
#define BERTH_REPLICATION_QUEUE_H

#include <stddef.h>

#include "replication/task.h"
#include "sql/db.h"

void berth_repl_queue_init(berth_db_t *db);

/** The policy with its source endpoint (sealed secret). BERTH_ENOTFOUND, or BERTH_ERROR when the database fails. */
int berth_repl_queue_policy_get(long long id, berth_repl_policy_t *out);
/** The enabled push policies an event may start (id, filters, replicate_deletion). *out is an array; caller frees. */
int berth_repl_queue_event_policies(berth_repl_policy_t **out, size_t *n);
/** The enabled scheduled policies (id, cron). As above. */
int berth_repl_queue_scheduled_policies(berth_repl_policy_t **out, size_t *n);
/** 1 when this berthd won minute `minute_epoch` of scheduled policy `id` (it starts the execution), else 0. */
int berth_repl_queue_fire(long long id, long long minute_epoch);
void berth_repl_queue_policies_free(berth_repl_policy_t *v, size_t n);

/**
 * A new execution of a policy. With skip_while_active, BERTH_EEXISTS while the policy's previous execution is
 * still InProgress (nothing is created); BERTH_ERROR when the database fails.
 */
int berth_repl_queue_exec_create(long long policy_id, const char *trigger, int skip_while_active, long long *execution_id);
/** Fail an execution before it copied anything, with the reason as its status text. */
void berth_repl_queue_exec_fail(long long execution_id, const char *why);
/** Stop an execution and its unfinished tasks. */
void berth_repl_queue_exec_stop(long long execution_id);
/** Close an execution when no task waits or runs any more (Failed if a task failed); `text` may be NULL. */
void berth_repl_queue_exec_finish(long long execution_id, const char *text);
/** 1 while the execution is InProgress (not stopped); 0 otherwise or when the database cannot say. */
int berth_repl_queue_exec_running(long long execution_id);

/** A task copying `repo:ref` (ref a tag or digest) to its name under the policy, or deleting it there. */
int berth_repl_queue_task_add(long long execution_id, const berth_repl_policy_t *pol, const char *repo, const char *ref,
                              berth_repl_op_t op);
/** The next runnable task for this instance. BERTH_ENOTFOUND when there is none, BERTH_ERROR on a database fault. */
int berth_repl_queue_claim(const char *instance, berth_repl_task_t *out);
/** An attempt's end: status, a log line, bytes copied, and the retry delay when Pending again. */
void berth_repl_queue_task_done(long long task_id, const char *status, const char *line, long long total, int delay_s);
void berth_repl_queue_task_progress(long long task_id, long long sent);
/** Tasks this instance (or one silent for five minutes) left running go back to Pending. */
void berth_repl_queue_reset(const char *instance);

/** The destination's upload session this task left for `digest`: 0 with its URL, BERTH_ENOTFOUND when none. */
int berth_repl_queue_upload_get(long long task_id, const char *digest, char *location, size_t locsz);
void berth_repl_queue_upload_put(long long task_id, const char *digest, const char *location);
void berth_repl_queue_upload_del(long long task_id, const char *digest);

#endif
