#include "registry/http/worker.h"

#include <pthread.h>
#include <stdlib.h>

struct st_berth_workers_t {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    berth_work_t *head, *tail;
    long queued;
    int stopping, n;
    pthread_t *threads;
};

static void *main_loop(void *arg)
{
    berth_workers_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (w->head == NULL && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        berth_work_t *work = w->head;
        if (work == NULL) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        w->head = work->next;
        if (w->head == NULL)
            w->tail = NULL;
        w->queued--;
        pthread_mutex_unlock(&w->mu);
        work->run(work);
    }
}

berth_workers_t *berth_workers_start(int nthreads)
{
    berth_workers_t *w = calloc(1, sizeof(*w));
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->threads = calloc((size_t)nthreads, sizeof(pthread_t));
    for (w->n = 0; w->n < nthreads; w->n++)
        if (pthread_create(&w->threads[w->n], NULL, main_loop, w) != 0) {
            berth_workers_stop(w); /* joins the w->n already running */
            return NULL;
        }
    return w;
}

static void enqueue_locked(berth_workers_t *w, berth_work_t *work)
{
    work->next = NULL;
    if (w->tail != NULL)
        w->tail->next = work;
    else
        w->head = work;
    w->tail = work;
    w->queued++;
    pthread_cond_signal(&w->cv);
}

void berth_workers_submit(berth_workers_t *w, berth_work_t *work)
{
    pthread_mutex_lock(&w->mu);
    enqueue_locked(w, work);
    pthread_mutex_unlock(&w->mu);
}

int berth_workers_try_submit(berth_workers_t *w, berth_work_t *work, long max_queued)
{
    pthread_mutex_lock(&w->mu);
    int rc = w->queued < max_queued ? 0 : -1;
    if (rc == 0)
        enqueue_locked(w, work);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

long berth_workers_queued(berth_workers_t *w)
{
    pthread_mutex_lock(&w->mu);
    long q = w->queued;
    pthread_mutex_unlock(&w->mu);
    return q;
}

void berth_workers_stop(berth_workers_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n; i++)
        pthread_join(w->threads[i], NULL);
    free(w->threads);
    free(w);
}
