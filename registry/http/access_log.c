#include "registry/http/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/utf8.h"

static int log_fd = -1;

/*
 * Lines are queued in memory and written by a thread of their own: the event loops must never wait on a
 * disk. A full queue (the disk cannot keep up) drops lines and counts them rather than stall requests.
 */
#define QUEUE_MAX 65536
typedef struct line {
    struct line *next;
    size_t len;
    char text[];
} line_t;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER, idle_cv = PTHREAD_COND_INITIALIZER;
static int busy;
static line_t *head, *tail;
static size_t queued;
static unsigned long dropped;

static void *writer_main(void *arg)
{
    for (;;) {
        pthread_mutex_lock(&mu);
        while (head == NULL)
            pthread_cond_wait(&cv, &mu);
        line_t *batch = head;
        head = tail = NULL;
        queued = 0;
        busy = 1;
        pthread_mutex_unlock(&mu);
        while (batch != NULL) {
            line_t *next = batch->next;
            ssize_t w = write(log_fd, batch->text, batch->len);
            (void)w;
            free(batch);
            batch = next;
        }
        pthread_mutex_lock(&mu);
        busy = 0;
        pthread_cond_broadcast(&idle_cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int berth_access_log_open(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    if (strcmp(path, "-") == 0)
        log_fd = STDOUT_FILENO;
    else
        log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (log_fd < 0)
        return -1;
    pthread_t tid;
    int rc = pthread_create(&tid, NULL, writer_main, NULL);
    if (rc != 0) {
        if (log_fd != STDOUT_FILENO)
            close(log_fd);
        log_fd = -1;
        errno = rc; /* the caller reports strerror(errno) */
        return -1;
    }
    pthread_detach(tid);
    return 0;
}

void berth_access_log(const char *remote, const char *method, const char *path, int status, uint64_t bytes_in, uint64_t bytes_out,
                      double ms, const char *route)
{
    if (log_fd < 0)
        return;
    char ts[32];
    berth_log_now(ts);
    /* the path is what the client sent, bytes that are not UTF-8 included (probes above all): JSON needs text */
    size_t plen = strlen(path);
    char *clean = malloc(3 * plen + 1);
    berth_utf8_scrub(path, clean, 3 * plen + 1);
    /* the query string can carry nothing secret here (digests, paging), but Authorization is never logged */
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:f,s:s}", "ts", ts, "remote", remote ? remote : "-", "method", method,
                          "path", clean, "status", status, "bytes_in", (json_int_t)bytes_in, "bytes_out", (json_int_t)bytes_out,
                          "ms", ms, "route", route);
    free(clean);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        return;
    size_t len = strlen(s);
    line_t *l = malloc(sizeof(*l) + len + 1);
    memcpy(l->text, s, len); // NOLINT(bugprone-not-null-terminated-result): a counted line ending in '\n', not a C string
    l->text[len] = '\n';
    l->len = len + 1;
    l->next = NULL;
    free(s);
    pthread_mutex_lock(&mu);
    if (queued >= QUEUE_MAX) {
        dropped++;
        free(l);
    } else {
        if (tail != NULL)
            tail->next = l;
        else
            head = l;
        tail = l;
        queued++;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
}

void berth_access_log_flush(void)
{
    if (log_fd < 0)
        return;
    pthread_mutex_lock(&mu);
    while (head != NULL || busy)
        pthread_cond_wait(&idle_cv, &mu);
    pthread_mutex_unlock(&mu);
}

unsigned long berth_access_log_dropped(void)
{
    pthread_mutex_lock(&mu);
    unsigned long d = dropped;
    pthread_mutex_unlock(&mu);
    return d;
}
