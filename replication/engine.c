/*
 * The engine's life: berth_repl_start wires the parts together (seal.c's key, queue.c's database, transfer.c's
 * idea of this Berth), puts back tasks a stopped berthd left running, and starts the worker threads and the event
 * thread. A worker claims a task, runs one attempt of it (transfer.c) and records the outcome (policy.c decides it).
 */
#include "replication/replication.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "replication/events.h"
#include "replication/policy.h"
#include "replication/queue.h"
#include "replication/seal.h"
#include "replication/transfer.h"
#include "replication/trigger.h"

#define MAX_WORKERS 8

static char instance[800];
static pthread_t workers[MAX_WORKERS];
static int nworkers, running, stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

void berth_repl__wake(void)
{
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* One attempt of a claimed task, and its outcome on the task row */
static void run_task(const berth_repl_task_t *t)
{
    berth_repl_transfer_result_t res;
    int rc = berth_repl_transfer_run(t, &res);
    int delay;
    const char *status = berth_repl_task_outcome(rc, res.stopped, t->attempts, &delay);
    char line[2200];
    snprintf(line, sizeof(line), "attempt %d: %s%s%s", t->attempts,
             rc == 0              ? "done"
             : rc == BERTH_ERETRY ? "transfer failed, will retry"
                                  : "failed",
             res.log[0] ? " " : "", res.log);
    berth_repl_queue_task_done(t->id, status, line, rc == 0 ? res.total : 0, delay);
    berth_log_info("replication task %lld (%s → %s): %s", t->id, t->src, t->dst, status);
    if (strcmp(status, "Pending") != 0)
        berth_repl_queue_exec_finish(t->execution_id, NULL);
}

static void *worker_main(void *arg)
{
    (void)arg;
    while (1) {
        pthread_mutex_lock(&mu);
        int stop = stopping;
        pthread_mutex_unlock(&mu);
        if (stop)
            break;
        berth_repl_task_t task;
        if (berth_repl_queue_claim(instance, &task) == 0) {
            run_task(&task);
            berth_repl_task_dispose(&task);
            continue;
        }
        pthread_mutex_lock(&mu);
        if (!stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1; /* retries come due by time, not by signal */
            pthread_cond_timedwait(&cv, &mu, &ts);
        }
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int berth_repl_start(const berth_repl_conf_t *c, berth_err_t *err)
{
    if (berth_repl_seal_load_key(c->key_file) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot read or create the replication key %s", c->key_file);
    berth_repl_queue_init(c->db);
    berth_repl_trigger_init(c->db);
    berth_repl_transfer_init(c->self_url, c->self_user, c->self_password, c->chunk_bytes);
    /* this instance is its host and edge address: a restart takes back its own tasks at once */
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(instance, sizeof(instance), "%s|%s", host, c->self_url);
    berth_repl_queue_reset(instance); /* tasks a stopped berthd was running start again */
    running = 1;
    int want = c->workers > 0 && c->workers <= MAX_WORKERS ? c->workers : 2;
    for (nworkers = 0; nworkers < want; nworkers++)
        if (pthread_create(&workers[nworkers], NULL, worker_main, NULL) != 0)
            break;
    if (nworkers < want || berth_repl_events_start() != 0) {
        berth_repl_stop(); /* joins the threads already running */
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot start the replication threads");
    }
    return 0;
}

void berth_repl_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i], NULL);
    berth_repl_events_stop();
    running = 0;
}
