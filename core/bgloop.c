#include "core/bgloop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/err.h"

struct st_berth_bgloop_t {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: a clock step neither fires nor stalls the interval */
    pthread_t tid;
    long interval_ms;
    berth_bgloop_cb tick;
    void *data;
    int woken, stopping; /* under mu */
    char name[16];
};

/* Sleep (mu held) until woken, stopping, or interval_ms passed */
static void wait_locked(berth_bgloop_t *l)
{
    if (l->interval_ms <= 0) {
        while (!l->woken && !l->stopping)
            pthread_cond_wait(&l->cv, &l->mu);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += l->interval_ms / 1000;
    until.tv_nsec += (l->interval_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!l->woken && !l->stopping && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
        ;
}

static void *loop_main(void *arg)
{
    berth_bgloop_t *l = arg;
    pthread_setname_np(pthread_self(), l->name);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        wait_locked(l);
        l->woken = 0;
        int stopping = l->stopping;
        pthread_mutex_unlock(&l->mu);
        l->tick(l->data, stopping);
        if (stopping)
            return NULL;
        pthread_mutex_lock(&l->mu);
    }
}

int berth_bgloop_start(berth_bgloop_t **out, const char *name, long interval_ms, berth_bgloop_cb tick, void *data)
{
    *out = NULL;
    berth_bgloop_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return BERTH_ERROR;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&l->mu, NULL);
    l->interval_ms = interval_ms;
    l->tick = tick;
    l->data = data;
    snprintf(l->name, sizeof(l->name), "%s", name);
    if (pthread_create(&l->tid, NULL, loop_main, l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return BERTH_ERROR;
    }
    *out = l;
    return 0;
}

void berth_bgloop_wake(berth_bgloop_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->woken = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int berth_bgloop_stopping(berth_bgloop_t *l)
{
    pthread_mutex_lock(&l->mu);
    int s = l->stopping;
    pthread_mutex_unlock(&l->mu);
    return s;
}

void berth_bgloop_stop(berth_bgloop_t *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->tid, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
