/*
 * The event thread: pushes and deletes reported here (berth_repl_event, which never blocks the caller) become runs
 * of event-based policies, and once a minute the scheduled policies whose cron fires are started.
 */
#include "replication/events.h"

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
static pthread_t thread;
static int running, stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

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
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* scheduled policies whose cron fires at this minute */
static void tick(time_t now)
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
        if (pols[i].cron[0] != '\0' && berth_repl_cron_matches(pols[i].cron, &tm))
            berth_repl_trigger(pols[i].id, "scheduled", &eid, &err);
    }
    berth_repl_queue_policies_free(pols, n);
}

static void *events_main(void *arg)
{
    (void)arg;
    time_t last_minute = 0;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (ev_head == NULL) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 5;
            pthread_cond_timedwait(&cv, &mu, &ts);
        }
        ev_t *e = ev_head;
        if (e != NULL) {
            ev_head = e->next;
            if (ev_head == NULL)
                ev_tail = NULL;
        }
        pthread_mutex_unlock(&mu);
        if (e != NULL) {
            berth_repl_trigger_event(e->op, e->repo, e->tag);
            free(e);
        }
        time_t now = time(NULL), minute = now / 60;
        if (minute != last_minute) { /* scheduled policies, once per minute */
            last_minute = minute;
            tick(now);
        }
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int berth_repl_events_start(void)
{
    pthread_mutex_lock(&mu);
    stopping = 0;
    int rc = pthread_create(&thread, NULL, events_main, NULL) == 0 ? 0 : BERTH_ERROR;
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
    stopping = 1;
    running = 0;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    while (ev_head != NULL) {
        ev_t *e = ev_head;
        ev_head = e->next;
        free(e);
    }
    ev_tail = NULL;
}
