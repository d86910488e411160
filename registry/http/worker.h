/* Worker threads for blocking work (SQL, hashing, disk). The event loops never wait on them. */
#ifndef BERTH_HTTP_WORKER_H
#define BERTH_HTTP_WORKER_H

typedef struct st_berth_work_t {
    void (*run)(struct st_berth_work_t *w); /* runs on a worker thread */
    struct st_berth_work_t *next;
} berth_work_t;

typedef struct st_berth_workers_t berth_workers_t;

/** NULL when a thread cannot be created (those already created are joined). */
berth_workers_t *berth_workers_start(int nthreads);
/** Queue work; `run` is called on some worker thread and must hand its result back itself. */
void berth_workers_submit(berth_workers_t *w, berth_work_t *work);
/** Queue work unless `max_queued` items already wait: 0, or -1 (not queued; the caller answers for it). */
int berth_workers_try_submit(berth_workers_t *w, berth_work_t *work, long max_queued);
/** Finish queued work, then join the threads. */
void berth_workers_stop(berth_workers_t *w);
/** Work items waiting for a thread (for /metrics). */
long berth_workers_queued(berth_workers_t *w);

#endif
