/*
 * The transfer: one task's artifact copied (or deleted) between two registries through replication/client.c, both
 * ends over the distribution API — this Berth through its own edge, as the internal replication user. Manifests
 * are fetched with every Accept type, children before the index; blobs go in chunks with the destination's upload
 * session kept per task and blob, resumed from the offset the destination reports; referrers follow their
 * subject; a blob already sent into another repository there is mounted.
 */
#ifndef BERTH_REPLICATION_TRANSFER_H
#define BERTH_REPLICATION_TRANSFER_H

#include "core/err.h"
#include "replication/task.h"

/** Who "this Berth" is as an endpoint, and the blob chunk size (<= 0: 8 MiB). Copied. */
void berth_repl_transfer_init(const char *self_url, const char *self_user, const char *self_password, long chunk_bytes);

typedef struct st_berth_repl_transfer_result_t {
    long long total; /* bytes of the blobs the artifact needs, whether sent, mounted or already there */
    int stopped;     /* the execution was stopped meanwhile */
    char log[2048];  /* what happened, ';'-separated */
} berth_repl_transfer_result_t;

/**
 * Run one attempt of a task. 0 when done; BERTH_ERETRY when a retry may succeed (the transport failed, the far end
 * answered 5xx, an upload session went stale); BERTH_ECONFLICT when its execution was stopped meanwhile; BERTH_ERROR
 * when the far end refused and a retry will not help.
 */
int berth_repl_transfer_run(const berth_repl_task_t *task, berth_repl_transfer_result_t *res);

/**
 * Every artifact (tag) of the policy's source that passes its filters becomes a copy task of execution
 * `execution_id`. The number of tasks, or a negative code with err set when the source cannot be listed.
 */
int berth_repl_transfer_enumerate(const berth_repl_policy_t *pol, long long execution_id, berth_err_t *err);

#endif
