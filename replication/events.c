/*
 * The event thread: pushes and deletes reported here (berth_repl_event, which never blocks the caller) become runs
 * of event-based policies, and once a minute the scheduled policies whose cron fires are started.
 */
#include "replication/events.h"

#include "core/bgloop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replication/policy.h"
#include "replication/queue.h"
#include "replication/replication.h"
#include "replication/trigger.h"

typedef struct ev {
    struct ev *next;
    char op[16], repo[256], tag[160];
} ev_t;

static ev_t *ev_head, *ev_tail;
static berth_bgloop_t *loop;
static int running;
static time_t last_minute; /* the loop's own */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void berth_repl_event(const char *operation, const char *repo, const char *tag)
{
    if (tag == NULL || strchr(tag, ':') != NULL)
        return; /* tags only: digests are not what event policies name */
    ev_t *e = calloc(1, sizeof(*e));
    snprintf(e->op, sizeof(e->op), "%s", operation);
    snprintf(e->repo, sizeof(e->repo), "%s", repo);
    snprintf(e->tag, sizeof(e->tag), "%s", tag);
    pthread_mutex_lock(&mu);
    if (!running) {
        pthread_mutex_unlock(&mu);
        free(e);
        return;
    }
    if (ev_tail != NULL)
        ev_tail->next = e;
    else
        ev_head = e;
    ev_tail = e;
    berth_bgloop_wake(loop);
    pthread_mutex_unlock(&mu);
}

/* scheduled policies whose cron fires at this minute */
static void run_scheduled(time_t now)
{
    struct tm tm;
    localtime_r(&now, &tm);
    berth_repl_policy_t *pols;
    size_t n;
    if (berth_repl_queue_scheduled_policies(&pols, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        long long eid;
        berth_err_t err;
        /* every berthd on the database checks the minute; the one that claims it starts the execution */
        if (pols[i].cron[0] != '\0' && berth_repl_cron_matches(pols[i].cron, &tm) &&
            berth_repl_queue_fire(pols[i].id, (long long)(now - now % 60)))
            berth_repl_trigger(pols[i].id, "scheduled", &eid, &err);
    }
    berth_repl_queue_policies_free(pols, n);
}

/* One round of the loop (core/bgloop; woken by each event, else every 5 s): every queued event, then the
 * scheduled policies once per minute. The last round (stopping) does nothing: what is queued is dropped. */
static void events_tick(void *data, int last)
{
    (void)data;
    if (last)
        return;
    for (;;) {
        pthread_mutex_lock(&mu);
        ev_t *e = ev_head;
        if (e != NULL) {
            ev_head = e->next;
            if (ev_head == NULL)
                ev_tail = NULL;
        }
        pthread_mutex_unlock(&mu);
        if (e == NULL)
            break;
        if (!berth_bgloop_stopping(loop))
            berth_repl_trigger_event(e->op, e->repo, e->tag);
        free(e);
    }
    time_t now = time(NULL), minute = now / 60;
    if (minute != last_minute) { /* scheduled policies, once per minute */
        last_minute = minute;
        run_scheduled(now);
    }
}

int berth_repl_events_start(void)
{
    pthread_mutex_lock(&mu); /* an event arriving meanwhile waits for `loop` to be set */
    last_minute = 0;
    int rc = berth_bgloop_start(&loop, "berth-repl-ev", 5000, events_tick, NULL);
    running = rc == 0;
    pthread_mutex_unlock(&mu);
    return rc;
}

void berth_repl_events_stop(void)
{
    pthread_mutex_lock(&mu);
    int was = running;
    pthread_mutex_unlock(&mu);
    if (!was)
        return;
    pthread_mutex_lock(&mu);
    running = 0; /* no event is queued from now on */
    pthread_mutex_unlock(&mu);
    berth_bgloop_stop(loop);
    loop = NULL;
    while (ev_head != NULL) {
        ev_t *e = ev_head;
        ev_head = e->next;
        free(e);
    }
    ev_tail = NULL;
}
