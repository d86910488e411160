/*
 * A background thread that sleeps until it is woken or its interval passes, then runs one tick of its owner's
 * work. The audit writer, the ISA scanner, the upload janitor and replication's threads share it, so starting,
 * waking, the timed wait and a prompt, joined stop are written (and tested) once. The owner keeps its own queue
 * and lock; a wake is remembered, so one given while a tick runs is never lost.
 */
#ifndef BERTH_CORE_BGLOOP_H
#define BERTH_CORE_BGLOOP_H

typedef struct st_berth_bgloop_t berth_bgloop_t;

/** One round of the owner's work, on the loop's thread. `stopping` is 1 on the last call only, made once as the
 * loop stops: drain there, or return at once to drop what is left. */
typedef void (*berth_bgloop_cb)(void *data, int stopping);

/**
 * Start a thread (named `name` for ps/top, cut to 15 bytes) that calls `tick(data, 0)` whenever woken and after
 * `interval_ms` without a wake (0: only when woken). Returns 0, or BERTH_ERROR when the thread cannot be created;
 * then nothing runs and *out is NULL.
 */
int berth_bgloop_start(berth_bgloop_t **out, const char *name, long interval_ms, berth_bgloop_cb tick, void *data);
/** Make the loop tick soon; from any thread, never waits for a tick in progress (it runs another one after). */
void berth_bgloop_wake(berth_bgloop_t *l);
/** 1 once berth_bgloop_stop was called: a long tick checks it between steps to give up early. */
int berth_bgloop_stopping(berth_bgloop_t *l);
/** Ask the loop to stop, wait for the tick in progress and the final one (stopping = 1), join the thread and free
 * `l`. NULL is a no-op. */
void berth_bgloop_stop(berth_bgloop_t *l);

#endif
