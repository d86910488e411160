#include "auth/audit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bgloop.h"
#include "core/log.h"
#include "core/ref.h"
#include "sql/users.h"

#define QUEUE_MAX 4096 /* ~6 MiB; the writer drains 256 per round trip */
#define BATCH 256
#define COALESCE_SECONDS 10 /* identical pulls within this window become one row with a count */
#define COALESCE_SLOTS 1024

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static berth_db_audit_t *queue; /* ring */
static size_t qhead, qlen;
static int running, stopping;
static unsigned long dropped;
static berth_db_t *audit_db;
static berth_bgloop_t *writer;
static berth_db_audit_t *batch; /* the writer's, BATCH rows */

/*
 * Pull coalescing: the first pull of a (caller, address, manifest) is queued as a row; repeats within
 * COALESCE_SECONDS only count here and are flushed as one row with that count when the window closes.
 */
typedef struct {
    berth_db_audit_t row; /* the event repeated (count = repeats not yet written) */
    time_t since;
    int used;
} slot_t;
static slot_t *slots;

/* JSON needs valid UTF-8: anything else (a hostile user name) is stored with '?' in place of high bytes */
static void copy(char *dst, size_t sz, const char *src)
{
    size_t i = 0;
    for (; src != NULL && src[i] != '\0' && i + 1 < sz; i++)
        dst[i] = (unsigned char)src[i] < 0x80 ? src[i] : '?';
    dst[i] = '\0';
}

static void write_batch(berth_db_audit_t *rows, size_t n)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        berth_err_t err;
        berth_err_clear(&err);
        berth_dbconn_t *c = berth_db_acquire(audit_db, &err);
        int rc = c != NULL ? berth_db_audit_insert(c, rows, n, &err) : BERTH_EUNAVAIL;
        if (c != NULL)
            berth_db_release(audit_db, c);
        if (rc == 0)
            return;
        berth_log_warn("audit log write failed (%s), attempt %d", err.msg, attempt + 1);
    }
    pthread_mutex_lock(&mu);
    dropped += n;
    pthread_mutex_unlock(&mu);
}

static void push_locked(const berth_db_audit_t *e);

/* Queue the counts of windows that closed (all of them when `all`); called with mu held */
static void flush_slots_locked(int all)
{
    time_t now = time(NULL);
    for (int i = 0; slots != NULL && i < COALESCE_SLOTS; i++)
        if (slots[i].used && slots[i].row.count > 0 && (all || now - slots[i].since >= COALESCE_SECONDS)) {
            push_locked(&slots[i].row);
            slots[i].row.count = 0;
            slots[i].used = 0;
        }
}

/* One round of the writer (core/bgloop): queue the closed pull windows (all of them on the last round), then
 * write the queue in batches until it is empty. Woken by every push, and once a second for the windows. */
static void writer_tick(void *data, int last)
{
    (void)data;
    pthread_mutex_lock(&mu);
    flush_slots_locked(last);
    while (qlen > 0) {
        size_t n = 0;
        while (qlen > 0 && n < BATCH) {
            batch[n++] = queue[qhead];
            qhead = (qhead + 1) % QUEUE_MAX;
            qlen--;
        }
        pthread_mutex_unlock(&mu);
        write_batch(batch, n);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
}

int berth_audit_start(berth_db_t *db)
{
    audit_db = db;
    queue = calloc(QUEUE_MAX, sizeof(*queue));
    slots = calloc(COALESCE_SLOTS, sizeof(*slots));
    batch = malloc(BATCH * sizeof(*batch));
    pthread_mutex_lock(&mu); /* the writer's first tick reads the queue under mu: running is set before it can */
    running =
        queue != NULL && slots != NULL && batch != NULL && berth_bgloop_start(&writer, "berth-audit", 1000, writer_tick, NULL) == 0;
    pthread_mutex_unlock(&mu);
    if (!running) {
        free(queue);
        queue = NULL;
        free(slots);
        slots = NULL;
        free(batch);
        batch = NULL;
        return BERTH_ERROR;
    }
    return 0;
}

void berth_audit_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1; /* nothing is queued from now on; the last tick drains what is */
    pthread_mutex_unlock(&mu);
    berth_bgloop_stop(writer);
    writer = NULL;
    pthread_mutex_lock(&mu);
    running = 0;
    pthread_mutex_unlock(&mu);
    free(queue);
    queue = NULL;
    free(slots);
    slots = NULL;
    free(batch);
    batch = NULL;
}

unsigned long berth_audit_dropped(void)
{
    pthread_mutex_lock(&mu);
    unsigned long d = dropped;
    pthread_mutex_unlock(&mu);
    return d;
}

static void push_locked(const berth_db_audit_t *e)
{
    if (qlen == QUEUE_MAX) {
        dropped += (unsigned long)(e->count > 0 ? e->count : 1);
        return;
    }
    queue[(qhead + qlen) % QUEUE_MAX] = *e;
    qlen++;
    berth_bgloop_wake(writer);
}

static void enqueue(const berth_db_audit_t *e)
{
    pthread_mutex_lock(&mu);
    if (!running || stopping)
        dropped += running;
    else
        push_locked(e);
    pthread_mutex_unlock(&mu);
}

static unsigned slot_of(const berth_db_audit_t *e)
{
    unsigned h = 2166136261u;
    const char *parts[] = {e->username, e->remote, e->repo, e->digest, e->resource};
    for (int k = 0; k < 5; k++)
        for (const char *p = parts[k]; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
    return h % COALESCE_SLOTS;
}

static int same_pull(const berth_db_audit_t *a, const berth_db_audit_t *b)
{
    return strcmp(a->username, b->username) == 0 && strcmp(a->remote, b->remote) == 0 && strcmp(a->repo, b->repo) == 0 &&
           strcmp(a->digest, b->digest) == 0 && strcmp(a->resource, b->resource) == 0;
}

/* a pull: written at once the first time, then counted until its window closes */
static void enqueue_pull(const berth_db_audit_t *e)
{
    pthread_mutex_lock(&mu);
    if (!running || stopping) {
        dropped += running;
        pthread_mutex_unlock(&mu);
        return;
    }
    slot_t *s = &slots[slot_of(e)];
    time_t now = time(NULL);
    if (s->used && same_pull(&s->row, e) && now - s->since < COALESCE_SECONDS) {
        s->row.count++;
    } else {
        if (s->used && s->row.count > 0)
            push_locked(&s->row); /* another event took the slot: write what the old one counted */
        push_locked(e);
        s->row = *e;
        s->row.count = 0;
        s->since = now;
        s->used = 1;
    }
    pthread_mutex_unlock(&mu);
}

static void fill(berth_db_audit_t *e, const char *username, const char *remote, const char *operation, const char *rtype,
                 const char *resource, const char *project, int ok, const char *detail)
{
    copy(e->username, sizeof(e->username), username != NULL && username[0] ? username : "anonymous");
    copy(e->remote, sizeof(e->remote), remote);
    copy(e->operation, sizeof(e->operation), operation);
    copy(e->resource_type, sizeof(e->resource_type), rtype);
    copy(e->resource, sizeof(e->resource), resource);
    copy(e->project, sizeof(e->project), project);
    copy(e->result, sizeof(e->result), ok ? "success" : "failure");
    copy(e->detail, sizeof(e->detail), detail);
    e->repo[0] = e->digest[0] = '\0';
    e->count = 1;
}

void berth_audit(const char *username, const char *remote, const char *operation, const char *rtype, const char *resource,
                 const char *project, int ok, const char *detail)
{
    berth_db_audit_t e;
    fill(&e, username, remote, operation, rtype, resource, project, ok, detail);
    enqueue(&e);
}

void berth_audit_pull(const char *username, const char *remote, const char *repo, const char *ref, const char *digest)
{
    berth_db_audit_t e;
    char resource[sizeof(e.resource)], project[BERTH_NAME_MAX + 1];
    int is_digest = strchr(ref, ':') != NULL;
    snprintf(resource, sizeof(resource), "%s%s%s", repo, is_digest ? "@" : ":", ref);
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    snprintf(project, sizeof(project), "%.*s", (int)plen, repo);
    fill(&e, username, remote, "pull", "artifact", resource, project, 1, "");
    copy(e.repo, sizeof(e.repo), repo);
    copy(e.digest, sizeof(e.digest), digest);
    enqueue_pull(&e);
}
