#include "registry/service/gc.h"

#include <jansson.h>
#include <limits.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bgloop.h"
#include "core/digest.h"
#include "core/log.h"
#include "registry/service/events.h"
#include "replication/policy.h"
#include "sql/api.h"
#include "sql/gc.h"

/* phases of a run (gc_runs.phase); the mark statements move 1->2, 3->4, 5->6 (a dry run skips the sweeps) */
enum {
    PH_START,
    PH_MARK_MANIFESTS,
    PH_SWEEP_MANIFESTS,
    PH_MARK_LINKS,
    PH_SWEEP_LINKS,
    PH_MARK_BLOBS,
    PH_SWEEP_BLOBS,
    PH_ORPHANS,
    PH_FINISH
};

#define LOG_LIST_MAX 1000 /* digests a run's log names; the counters cover the rest */

static struct {
    berth_registry_t *reg;
    berth_db_t *db;
    berth_bgloop_t *loop;
    berth_gc_conf_t conf;
    char owner[80];
    /* /metrics: the run this berthd works on, as its last statement returned it (guarded by mu) */
    pthread_mutex_t mu;
    long long run_id;
    int running, phase, dry;
    long long counters[13];
    unsigned long long runs_done, runs_failed;
} gc = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const counter_names[13] = {
    "manifests_marked", "manifests_deleted", "links_marked", "links_deleted", "blobs_marked", "bytes_marked", "blobs_deleted",
    "bytes_freed",      "orphans",           "orphan_bytes", "processed",     "cursor",       "phase"};

typedef struct {
    pthread_mutex_t mu; /* state, listed, pass_done and the events: a sweep's connections share the run */
    long long id;
    char idbuf[24], marks[24], grace[24], lease[24];
    int dry, untagged;
    long grace_s;
    int workers;         /* connections that sweep (the run's `workers`, 1..SWEEPERS_MAX) */
    int listed;          /* digests named in the log so far */
    long long pass_done; /* manifests deleted in the current pass (another pass follows when > 0) */
    int serial;          /* this manifest pass runs on one connection (see execute_run) */
    json_t *state;       /* the run's row as the last statement returned it */
} run_t;

typedef enum { GO_ON, DONE, HALT } step_t; /* HALT: stopped, lost the lease, or an error: leave this run */

/* ---- small helpers -------------------------------------------------------------------------------------- */

static long long jint(json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static void now_prefix(char *buf, size_t sz)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sz, "%Y-%m-%dT%H:%M:%SZ ", &tm);
}

/* One statement through berth_db_api; *out the parsed JSON (NULL for no row). 0 or a negative code. */
static int q(berth_dbconn_t *c, berth_q_t id, const char *const *p, json_t **out, berth_err_t *err)
{
    berth_db_json_t r = {0};
    int rc = berth_db_api(c, id, p, &r, err);
    if (out != NULL)
        *out = rc == 0 && r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    free(r.json);
    return rc;
}

/* Take the run's new state (consumes st); publish it for /metrics */
static void set_state(run_t *r, json_t *st)
{
    if (st == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    json_decref(r->state);
    r->state = st;
    pthread_mutex_lock(&gc.mu);
    gc.run_id = r->id;
    gc.dry = r->dry;
    for (size_t i = 0; i < 13; i++)
        gc.counters[i] = jint(st, counter_names[i]);
    gc.phase = (int)jint(st, "phase");
    pthread_mutex_unlock(&gc.mu);
    pthread_mutex_unlock(&r->mu);
}

/* (the run's own thread, while no sweep runs; the sweepers use stop_asked) */
static const char *status_of(const run_t *r)
{
    const char *s = json_string_value(json_object_get(r->state, "status"));
    return s != NULL ? s : "";
}

/* a user asked the run to stop (PUT .../gc/{id}) */
static int stop_asked(run_t *r)
{
    pthread_mutex_lock(&r->mu);
    int yes = strcmp(status_of(r), "Stopping") == 0;
    pthread_mutex_unlock(&r->mu);
    return yes;
}

/* A log line for the run's row (and berthd's log); `fmt` without the newline */
static char *line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *line(const char *fmt, ...)
{
    char pre[40], body[900], *out;
    now_prefix(pre, sizeof(pre));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (asprintf(&out, "%s%s\n", pre, body) < 0)
        abort();
    return out;
}

/* Append `text` (one line or several; taken) to the run's log; a single line also goes to berthd's log */
static int note(berth_dbconn_t *c, run_t *r, char *text, berth_err_t *err)
{
    if (strchr(text, '\n') == text + strlen(text) - 1)
        berth_log_info("gc run %lld: %.*s", r->id, (int)strlen(text) - 1 - 21, text + 21);
    const char *p[] = {r->idbuf, gc.owner, text};
    json_t *st = NULL;
    int rc = q(c, BERTH_Q_GC_NOTE, p, &st, err);
    free(text);
    set_state(r, st);
    return rc;
}

static int phase(berth_dbconn_t *c, run_t *r, int next, char *text, berth_err_t *err)
{
    char nb[8];
    snprintf(nb, sizeof(nb), "%d", next);
    const char *p[] = {r->idbuf, gc.owner, r->lease, nb, text != NULL ? text : ""};
    json_t *st = NULL;
    int rc = q(c, BERTH_Q_GC_PHASE, p, &st, err);
    if (text != NULL) {
        berth_log_info("gc run %lld: %.*s", r->id, (int)strlen(text) - 1 - 21, text + 21);
        free(text);
    }
    if (rc == 0 && st == NULL)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "lease lost");
    set_state(r, st);
    return rc;
}

static int end(berth_dbconn_t *c, run_t *r, const char *status, char *text, const char *error)
{
    berth_err_t err;
    const char *p[] = {r->idbuf, gc.owner, status, text, error};
    json_t *st = NULL;
    berth_log_info("gc run %lld: %.*s", r->id, (int)strlen(text) - 1 - 21, text + 21);
    int rc = q(c, BERTH_Q_GC_END, p, &st, &err);
    free(text);
    set_state(r, st);
    pthread_mutex_lock(&gc.mu);
    if (strcmp(status, "Success") == 0)
        gc.runs_done++;
    else if (strcmp(status, "Error") == 0)
        gc.runs_failed++;
    pthread_mutex_unlock(&gc.mu);
    return rc;
}

/* Lines naming digests, gathered into one log append (a statement per line would rewrite the log each time) */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} lines_t;

static void lines_open(lines_t *l)
{
    l->buf = NULL;
    l->len = 0;
    l->f = open_memstream(&l->buf, &l->len);
}

static void lines_add(lines_t *l, run_t *r, char *text)
{
    pthread_mutex_lock(&r->mu);
    int room = r->listed < LOG_LIST_MAX;
    r->listed += room;
    pthread_mutex_unlock(&r->mu);
    if (room)
        fputs(text, l->f);
    free(text);
}

/* Append what was gathered (nothing when empty) */
static int lines_flush(lines_t *l, berth_dbconn_t *c, run_t *r, berth_err_t *err)
{
    fclose(l->f);
    if (l->len == 0) {
        free(l->buf);
        return 0;
    }
    return note(c, r, l->buf, err);
}

/* ---- files ---------------------------------------------------------------------------------------------- */

/* '{d1,d2}' from a JSON array of digest strings or of {digest} objects */
static char *pg_array(json_t *arr)
{
    size_t n = json_array_size(arr), cap = 3 + n * (BERTH_DIGEST_MAX + 1), len = 0;
    char *s = malloc(cap);
    s[len++] = '{';
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        const char *d = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "digest"));
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i > 0 ? "," : "", d != NULL ? d : "");
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

json_t *berth_gc_unowned(berth_dbconn_t *c, json_t *digests, berth_err_t *err)
{
    json_t *gone = NULL;
    char *arr = pg_array(digests);
    const char *p[] = {arr};
    int rc = q(c, BERTH_Q_GC_FILES_UNOWNED, p, &gone, err);
    free(arr);
    if (rc == 0 && json_is_array(gone))
        return gone;
    if (rc == 0)
        berth_err_set(err, BERTH_OCI_INTERNAL, "unexpected answer to the blob-row check");
    json_decref(gone);
    return NULL;
}

/*
 * Unlink the files of `digests` (a JSON array) that have no blob row: those found without one are locked (their
 * blob-file locks, tried exclusively: an upload holds its lock from placing a file until its row commits), looked
 * up again under the locks, and go. Returns the count removed (and adds their sizes, when `sizes` maps digest ->
 * size) or a negative code.
 */
static int remove_files(berth_dbconn_t *c, json_t *digests, json_t *sizes, long long *bytes, berth_err_t *err)
{
    if (json_array_size(digests) == 0)
        return 0;
    json_t *cand = berth_gc_unowned(c, digests, err), *locked = NULL, *gone = NULL; /* most have a row: no lock */
    if (cand == NULL || json_array_size(cand) == 0) {
        json_decref(cand);
        return cand == NULL ? BERTH_ERROR : 0;
    }
    int rc;
    char *arr = pg_array(cand);
    const char *p[] = {arr};
    if ((rc = berth_db_begin(c, err)) == 0 && (rc = q(c, BERTH_Q_GC_FILES_LOCK, p, &locked, err)) == 0) {
        free(arr);
        arr = pg_array(locked);
        p[0] = arr;
        rc = q(c, BERTH_Q_GC_FILES_UNOWNED, p, &gone, err);
    }
    free(arr);
    json_decref(cand);
    json_decref(locked);
    int removed = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(gone); i++) {
        const char *ds = json_string_value(json_array_get(gone, i));
        berth_digest_t d;
        berth_err_t ferr;
        if (ds == NULL || berth_digest_parse(&d, ds, strlen(ds), NULL) != 0)
            continue;
        if (berth_store_blob_remove(gc.reg->store, &d, &ferr) != 0) {
            berth_log_warn("gc: %s", ferr.msg); /* left for the next run's orphan sweep */
            continue;
        }
        removed++;
        if (sizes != NULL && bytes != NULL)
            *bytes += (long long)json_integer_value(json_object_get(sizes, ds));
    }
    json_decref(gone);
    if (rc != 0) {
        berth_db_rollback(c);
        return rc;
    }
    return (rc = berth_db_commit(c, err)) != 0 ? rc : removed;
}

#define SWEEPERS_MAX 5 /* Harbor's workers: 1..5 */

/* ---- phases --------------------------------------------------------------------------------------------- */

/* One mark statement in its own transaction, committed only while this berthd still holds the run: a berthd
 * that took the run over meanwhile cannot have both mark sets (the statement's update of the run row then finds
 * another owner, and the marks are rolled back). A mark over a million rows outlasts a short lease, so the lease
 * is stretched first. */
static int mark(berth_dbconn_t *c, run_t *r, berth_q_t id, berth_err_t *err)
{
    char long_lease[24];
    snprintf(long_lease, sizeof(long_lease), "%ld", gc.conf.lease_seconds > 600 ? gc.conf.lease_seconds : 600);
    const char *lp[] = {r->idbuf, gc.owner, long_lease};
    const char *p[] = {r->idbuf, r->marks, r->grace, r->dry ? "true" : "false", gc.owner};
    json_t *st = NULL;
    int rc = q(c, BERTH_Q_GC_RENEW, lp, &st, err);
    if (rc == 0 && st == NULL)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "lease lost");
    json_decref(st);
    st = NULL;
    if (rc == 0 && (rc = berth_db_begin(c, err)) == 0) {
        if ((rc = q(c, id, p, &st, err)) == 0 && st == NULL)
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "lease lost");
        if (rc == 0)
            rc = berth_db_commit(c, err);
        else
            berth_db_rollback(c);
    }
    if (rc != 0) {
        json_decref(st);
        return rc;
    }
    set_state(r, st);
    if ((rc = berth_db_gc_analyze(c, err)) != 0)
        return rc;
    if (id == BERTH_Q_GC_MARK_MANIFESTS)
        return note(c, r, line("marked %lld untagged manifest(s)", jint(r->state, "manifests_marked")), err);
    if (id == BERTH_Q_GC_MARK_LINKS)
        return note(c, r, line("marked %lld blob link(s) no manifest of their repository uses", jint(r->state, "links_marked")),
                    err);
    rc = note(c, r,
              line("marked %lld blob(s), %lld bytes, that no repository links", jint(r->state, "blobs_marked"),
                   jint(r->state, "bytes_marked")),
              err);
    if (rc != 0 || !r->dry)
        return rc;
    /* a dry run names what a real run would delete (as a real run names what it deleted) */
    char kind[] = "3", lim[16];
    snprintf(lim, sizeof(lim), "%d", LOG_LIST_MAX);
    const char *mp[] = {r->marks, kind, lim};
    json_t *list = NULL;
    if ((rc = q(c, BERTH_Q_GC_MARKED, mp, &list, err)) != 0)
        return rc;
    lines_t l;
    lines_open(&l);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *o = json_array_get(list, i);
        lines_add(&l, r,
                  line("would delete blob %s (%lld bytes)", json_string_value(json_object_get(o, "digest")), jint(o, "size")));
    }
    json_decref(list);
    return lines_flush(&l, c, r, err);
}

/* A window of a sweep: the marks with ids in (after, last] */
typedef struct {
    long long after, last;
    long long cursor; /* the run's cursor written with the batch; -1: the window's end (every window before it is done) */
} window_t;

/* marks a batch takes: a manifest batch holds the quota_blobs rows of its manifests' charges, which a PUT charging
   one of them waits for: keep it short */
static long batch_size(int kind)
{
    return kind == 1 && gc.conf.batch > 100 ? 100 : gc.conf.batch;
}

/* The files of a committed blob batch: BERTH_Q_GC_LOCK_BLOBS took their blob-file locks for this connection's
 * session, so no upload can place one of them again until BERTH_Q_GC_FILES_UNLOCK */
static void unlink_files(run_t *r, json_t *deleted)
{
    for (size_t i = 0; i < json_array_size(deleted); i++) {
        const char *ds = json_string_value(json_object_get(json_array_get(deleted, i), "digest"));
        berth_digest_t d;
        berth_err_t ferr;
        if (ds != NULL && berth_digest_parse(&d, ds, strlen(ds), NULL) == 0 &&
            berth_store_blob_remove(gc.reg->store, &d, &ferr) != 0)
            berth_log_warn("gc run %lld: %s (left for the orphan sweep)", r->id, ferr.msg);
    }
}

/* One batch of a sweep phase: lock, re-check and delete, commit; then the files (blobs) or the events
 * (manifests). GO_ON, DONE when the window has no marks, HALT on stop or error. */
static step_t sweep_batch_tx(berth_dbconn_t *c, run_t *r, int kind, const window_t *win, berth_err_t *err)
{
    static const berth_q_t locks[4] = {0, BERTH_Q_GC_LOCK_MANIFESTS, BERTH_Q_GC_LOCK_LINKS, BERTH_Q_GC_LOCK_BLOBS};
    char after[24], last[24], size[24];
    snprintf(after, sizeof(after), "%lld", win->after);
    snprintf(last, sizeof(last), "%lld", win->last);
    snprintf(size, sizeof(size), "%ld", batch_size(kind));
    json_t *w = NULL, *res = NULL;
    int rc = berth_db_begin(c, err);
    if (rc == 0 && kind == 1)
        rc = q(c, BERTH_Q_GC_QUIET, NULL, NULL, err);
    const char *lp[] = {r->marks, after, size, last};
    if (rc == 0)
        rc = q(c, locks[kind], lp, &w, err);
    if (rc != 0) {
        berth_db_rollback(c);
        return HALT;
    }
    if (json_is_null(json_object_get(w, "hi"))) { /* no marks after the cursor */
        berth_db_rollback(c);
        json_decref(w);
        return DONE;
    }
    char hi[24], n[24];
    snprintf(hi, sizeof(hi), "%lld", win->cursor >= 0 ? win->cursor : jint(w, "hi"));
    snprintf(n, sizeof(n), "%lld", jint(w, "n"));
    const char *locked = json_string_value(json_object_get(w, "locked"));
    if (locked == NULL)
        locked = "{}"; /* every row of the window is gone or held by another transaction: skipped */
    static const berth_q_t sweeps[4] = {0, BERTH_Q_GC_SWEEP_MANIFESTS, BERTH_Q_GC_SWEEP_LINKS, BERTH_Q_GC_SWEEP_BLOBS};
    const char *sp[] = {locked, r->grace, r->marks};
    rc = q(c, sweeps[kind], sp, &res, err);
    json_decref(w);
    json_t *st = NULL;
    if (rc == 0 && res != NULL) {
        char k[4], gone[24], bytes[24];
        snprintf(k, sizeof(k), "%d", kind);
        snprintf(gone, sizeof(gone), "%lld", jint(res, "n"));
        snprintf(bytes, sizeof(bytes), "%lld", jint(res, "bytes"));
        const char *pp[] = {r->idbuf, gc.owner, r->lease, k, gone, bytes, hi, n};
        rc = q(c, BERTH_Q_GC_PROGRESS, pp, &st, err);
    }
    if (rc != 0 || st == NULL) {
        if (rc == 0)
            berth_err_set(err, BERTH_OCI_INTERNAL, "lease lost");
        berth_db_rollback(c);
        json_decref(res);
        return HALT;
    }
    if ((rc = berth_db_commit(c, err)) != 0) {
        json_decref(st);
        json_decref(res);
        return HALT;
    }
    set_state(r, st);
    json_t *deleted = json_object_get(res, "deleted");
    lines_t l;
    lines_open(&l);
    if (kind == 1) {
        pthread_mutex_lock(&r->mu); /* one sweeper's events at a time, as when there was one */
        r->pass_done += (long long)json_array_size(deleted);
        pthread_mutex_unlock(&r->mu);
        for (size_t i = 0; i < json_array_size(deleted); i++) {
            json_t *o = json_array_get(deleted, i);
            const char *repo = json_string_value(json_object_get(o, "repo")), *dg = json_string_value(json_object_get(o, "digest"));
            /* the ordinary change event: caches, replication, webhooks and the squashfs publisher hear it */
            pthread_mutex_lock(&r->mu);
            berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_MANIFEST_DELETE,
                                              .surface = BERTH_EVENT_INTERNAL,
                                              .repo = repo,
                                              .digest = dg,
                                              .size = jint(o, "size"),
                                              .principal = ""});
            pthread_mutex_unlock(&r->mu);
            lines_add(&l, r, line("deleted manifest %s@%s", repo, dg));
        }
    } else if (kind == 3) {
        unlink_files(r, deleted);
        for (size_t i = 0; i < json_array_size(deleted); i++) {
            json_t *o = json_array_get(deleted, i);
            lines_add(&l, r,
                      line("deleted blob %s (%lld bytes)", json_string_value(json_object_get(o, "digest")), jint(o, "size")));
        }
    }
    lines_flush(&l, c, r, err);
    json_decref(res);
    return stop_asked(r) ? HALT : GO_ON;
}

static step_t sweep_batch(berth_dbconn_t *c, run_t *r, int kind, const window_t *win, berth_err_t *err)
{
    step_t s = sweep_batch_tx(c, r, kind, win, err);
    berth_err_t uerr;
    /* the blob-file locks are the session's: a rollback keeps them, so every way out releases them (a broken
       connection has lost them with its session) */
    if (kind == 3 && q(c, BERTH_Q_GC_FILES_UNLOCK, NULL, NULL, &uerr) != 0)
        berth_log_warn("gc run %lld: blob-file locks not released: %s", r->id, uerr.msg);
    return s;
}

/*
 * A sweep phase's pass over the marks after the run's cursor, cut into windows of a batch each and handed to the
 * run's `workers` connections at once (this thread's is one of them): on a million rows one connection's
 * statements, not the locks, were the manifest and link sweeps' time (docs/benchmarks.md). Windows are disjoint
 * and every row a batch touches is taken FOR UPDATE SKIP LOCKED, so sweepers never wait for each other. The cursor
 * a batch writes is the start of the lowest window not yet done when it was handed out (its own end when that is
 * itself), so a resume never starts past a window that did not commit; at worst it sweeps a window again, which
 * re-checks everything and deletes nothing twice.
 */
typedef struct {
    pthread_mutex_t mu;
    run_t *r;
    int kind, halted;
    long long start;     /* the cursor the pass starts after */
    json_t *ends;        /* ids ending each full window; what follows the last is the last window */
    size_t n, next, low; /* windows; the next to hand out; every window below `low` is done */
    unsigned char *done;
    berth_err_t err; /* the first batch that halted */
} sweep_t;

static long long window_end(const sweep_t *s, size_t i)
{
    return i < json_array_size(s->ends) ? (long long)json_integer_value(json_array_get(s->ends, i)) : LLONG_MAX;
}

static int sweep_take(sweep_t *s, size_t *i, window_t *w)
{
    pthread_mutex_lock(&s->mu);
    int got = !s->halted && s->next < s->n && !berth_bgloop_stopping(gc.loop);
    if (got) {
        *i = s->next++;
        w->after = *i == 0 ? s->start : window_end(s, *i - 1);
        w->last = window_end(s, *i);
        w->cursor = *i == s->low ? -1 : s->low == 0 ? s->start : window_end(s, s->low - 1);
    }
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void sweep_loop(sweep_t *s, berth_dbconn_t *c)
{
    size_t i;
    window_t w;
    while (sweep_take(s, &i, &w)) {
        berth_err_t err;
        berth_err_clear(&err);
        step_t st = sweep_batch(c, s->r, s->kind, &w, &err);
        pthread_mutex_lock(&s->mu);
        s->done[i] = 1;
        while (s->low < s->n && s->done[s->low])
            s->low++;
        if (st == HALT && !s->halted) {
            s->halted = 1;
            s->err = err;
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static void *sweeper_main(void *data)
{
    sweep_t *s = data;
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(gc.db, &err);
    if (c == NULL) { /* the other connections sweep its share */
        berth_log_warn("gc run %lld: a sweeper has no connection: %s", s->r->id, err.msg);
        return NULL;
    }
    sweep_loop(s, c);
    berth_db_release(gc.db, c);
    return NULL;
}

/* DONE when every window is swept, GO_ON when berthd is stopping (the caller leaves the run), HALT on stop or error */
static step_t sweep_pass(berth_dbconn_t *c, run_t *r, int kind, berth_err_t *err)
{
    sweep_t s = {.r = r, .kind = kind, .start = jint(r->state, "cursor")};
    char k[4], after[24], size[24];
    snprintf(k, sizeof(k), "%d", kind);
    snprintf(after, sizeof(after), "%lld", s.start);
    snprintf(size, sizeof(size), "%ld", batch_size(kind));
    const char *p[] = {r->marks, k, after, size};
    if (q(c, BERTH_Q_GC_WINDOWS, p, &s.ends, err) != 0 || !json_is_array(s.ends)) {
        json_decref(s.ends);
        return HALT;
    }
    s.n = json_array_size(s.ends) + 1;
    s.done = calloc(s.n, 1);
    if (s.done == NULL)
        abort();
    pthread_mutex_init(&s.mu, NULL);
    pthread_t th[SWEEPERS_MAX];
    int started = 0, sweepers = kind == 1 && r->serial ? 1 : r->workers;
    for (int i = 1; i < sweepers && i < SWEEPERS_MAX && (size_t)i < s.n; i++)
        if (pthread_create(&th[started], NULL, sweeper_main, &s) == 0)
            started++;
    sweep_loop(&s, c);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    step_t out = s.halted ? HALT : s.low == s.n ? DONE : GO_ON;
    if (s.halted)
        *err = s.err;
    if (started > 0 && out == DONE) { /* the sweepers' states came back in any order: the counters as committed */
        const char *p[] = {r->idbuf, gc.owner, r->lease};
        json_t *st = NULL;
        if (q(c, BERTH_Q_GC_RENEW, p, &st, err) != 0 || st == NULL)
            out = HALT;
        set_state(r, st);
    }
    pthread_mutex_destroy(&s.mu);
    free(s.done);
    json_decref(s.ends);
    return out;
}

typedef struct {
    json_t *batch, *sizes; /* digests of the batch; digest -> size */
    long grace;
    int dry;
    run_t *r;
    berth_dbconn_t *c;
    long long found, bytes;
    int failed;
    berth_err_t *err;
} orphans_t;

/* A batch of old files: those without a row go (a dry run counts them) */
static int orphan_flush(orphans_t *o)
{
    if (json_array_size(o->batch) == 0 || o->failed)
        return o->failed;
    long long bytes = 0;
    int n;
    if (o->dry) {
        char *arr = pg_array(o->batch);
        const char *p[] = {arr};
        json_t *gone = NULL;
        n = q(o->c, BERTH_Q_GC_FILES_UNOWNED, p, &gone, o->err);
        free(arr);
        if (n == 0) {
            n = (int)json_array_size(gone);
            for (size_t i = 0; i < json_array_size(gone); i++)
                bytes += (long long)json_integer_value(json_object_get(o->sizes, json_string_value(json_array_get(gone, i))));
        }
        json_decref(gone);
    } else {
        n = remove_files(o->c, o->batch, o->sizes, &bytes, o->err);
    }
    json_array_clear(o->batch);
    json_object_clear(o->sizes);
    if (n < 0) {
        o->failed = 1;
        return 1;
    }
    if (n > 0) {
        char cnt[24], b[24];
        snprintf(cnt, sizeof(cnt), "%d", n);
        snprintf(b, sizeof(b), "%lld", bytes);
        const char *p[] = {o->r->idbuf, gc.owner, o->r->lease, cnt, b};
        json_t *st = NULL;
        if (q(o->c, BERTH_Q_GC_ORPHANS, p, &st, o->err) != 0 || st == NULL) {
            json_decref(st);
            o->failed = 1;
            return 1;
        }
        set_state(o->r, st);
        o->found += n;
        o->bytes += bytes;
    }
    return berth_bgloop_stopping(gc.loop) || strcmp(status_of(o->r), "Stopping") == 0;
}

static int orphan_file(const berth_digest_t *d, int64_t size, double age, void *data)
{
    orphans_t *o = data;
    if (age < (double)o->grace)
        return 0; /* younger than the window: an upload may be placing it */
    json_array_append_new(o->batch, json_string(d->str));
    json_object_set_new(o->sizes, d->str, json_integer(size));
    return json_array_size(o->batch) >= 1000 ? orphan_flush(o) : 0;
}

/* Files no blob row owns and older than the window: a crash between a sweep's commit and its unlinks, or an
 * upload whose row never committed. The walk is repeated from the start after a resume (it is idempotent). */
static step_t orphans(berth_dbconn_t *c, run_t *r, berth_err_t *err)
{
    orphans_t o = {.batch = json_array(), .sizes = json_object(), .grace = r->grace_s, .dry = r->dry, .r = r, .c = c, .err = err};
    int stopped = berth_store_blob_each(gc.reg->store, orphan_file, &o);
    if (!stopped)
        orphan_flush(&o);
    json_decref(o.batch);
    json_decref(o.sizes);
    if (o.failed || stopped || berth_bgloop_stopping(gc.loop) || strcmp(status_of(r), "Stopping") == 0)
        return HALT;
    if (note(c, r,
             line("%s %lld orphaned file(s), %lld bytes (no blob row, older than the window)", r->dry ? "would remove" : "removed",
                  o.found, o.bytes),
             err) != 0)
        return HALT;
    return DONE;
}

/* Work on a claimed run until it finishes, is stopped, loses its lease or meets an error (-1: it resumes later) */
static int execute(berth_dbconn_t *c, run_t *r)
{
    berth_err_t err;
    berth_err_clear(&err);
    for (;;) {
        if (strcmp(status_of(r), "Stopping") == 0) {
            end(c, r, "Stopped",
                line("stopped at phase %lld; a new run with the same parameters resumes here", jint(r->state, "phase")), NULL);
            return 0;
        }
        if (berth_bgloop_stopping(gc.loop)) {
            const char *p[] = {r->idbuf, gc.owner};
            q(c, BERTH_Q_GC_LEAVE, p, NULL, &err); /* the next start resumes it without waiting for the lease */
            return 0;
        }
        int ph = (int)jint(r->state, "phase"), rc = 0;
        step_t s = GO_ON;
        switch (ph) {
        case PH_START:
            rc = phase(c, r, r->untagged ? PH_MARK_MANIFESTS : PH_MARK_LINKS,
                       line("started: delete_untagged=%s dry_run=%s grace_seconds=%ld", r->untagged ? "true" : "false",
                            r->dry ? "true" : "false", r->grace_s),
                       &err);
            break;
        case PH_MARK_MANIFESTS: rc = mark(c, r, BERTH_Q_GC_MARK_MANIFESTS, &err); break;
        case PH_MARK_LINKS: rc = mark(c, r, BERTH_Q_GC_MARK_LINKS, &err); break;
        case PH_MARK_BLOBS: rc = mark(c, r, BERTH_Q_GC_MARK_BLOBS, &err); break;
        case PH_SWEEP_MANIFESTS:
        case PH_SWEEP_LINKS:
        case PH_SWEEP_BLOBS: {
            int kind = ph == PH_SWEEP_MANIFESTS ? 1 : ph == PH_SWEEP_LINKS ? 2 : 3;
            s = sweep_pass(c, r, kind, &err);
            /* a parent, a referrer went in this pass: what only it referenced may go in the next one. And a pass
               on several connections that deleted nothing is followed by one on a single connection: two sweepers
               can each skip the other's manifests (both hold some of the quota_blobs rows of a shared layer) */
            int parallel = r->workers > 1 && !r->serial;
            if (s == DONE && kind == 1 && (r->pass_done > 0 || parallel)) {
                r->serial = r->pass_done == 0;
                r->pass_done = 0;
                rc = phase(c, r, PH_SWEEP_MANIFESTS, NULL, &err);
            } else if (s == DONE) {
                /* the usage the batches released is in the ledger: into the quota rows (a short transaction of its own) */
                if (kind == 1 && (rc = q(c, BERTH_Q_GC_SETTLE_QUOTAS, NULL, NULL, &err)) != 0)
                    break;
                rc = phase(c, r, ph + 1,
                           kind == 1   ? line("deleted %lld manifest(s)", jint(r->state, "manifests_deleted"))
                           : kind == 2 ? line("deleted %lld blob link(s)", jint(r->state, "links_deleted"))
                                       : line("deleted %lld blob(s), %lld bytes freed", jint(r->state, "blobs_deleted"),
                                              jint(r->state, "bytes_freed")),
                           &err);
            }
            break;
        }
        case PH_ORPHANS:
            s = orphans(c, r, &err);
            if (s == DONE)
                rc = phase(c, r, PH_FINISH, NULL, &err);
            break;
        default: {
            if (!r->dry) {
                const char *p[] = {r->grace};
                q(c, BERTH_Q_GC_PRUNE, p, NULL, &err);
            }
            json_t *st = r->state;
            end(c, r, "Success",
                r->dry ? line("dry run done: would delete %lld manifest(s), %lld blob link(s), %lld blob(s) (%lld bytes), %lld "
                              "orphaned file(s) (%lld bytes)",
                              jint(st, "manifests_marked"), jint(st, "links_marked"), jint(st, "blobs_marked"),
                              jint(st, "bytes_marked"), jint(st, "orphans"), jint(st, "orphan_bytes"))
                       : line("done: deleted %lld manifest(s), %lld blob link(s), %lld blob(s), %lld bytes freed, %lld orphaned "
                              "file(s) (%lld bytes)",
                              jint(st, "manifests_deleted"), jint(st, "links_deleted"), jint(st, "blobs_deleted"),
                              jint(st, "bytes_freed"), jint(st, "orphans"), jint(st, "orphan_bytes")),
                NULL);
            return 0;
        }
        }
        if (rc != 0 || (s == HALT && strcmp(status_of(r), "Stopping") != 0)) {
            if (err.code != 0)
                berth_log_warn("gc run %lld: phase %d interrupted (%s); it resumes there at the collector's next look", r->id, ph,
                               err.msg);
            return -1;
        }
    }
}

/* ---- the thread ----------------------------------------------------------------------------------------- */

static void fire_schedule(berth_dbconn_t *c)
{
    berth_err_t err;
    json_t *s = NULL;
    if (q(c, BERTH_Q_GC_SCHEDULE_GET, NULL, &s, &err) != 0 || s == NULL)
        return;
    const char *type = json_string_value(json_object_get(json_object_get(s, "schedule"), "type"));
    const char *cron = json_string_value(json_object_get(json_object_get(s, "schedule"), "cron"));
    char expr[128];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    json_t *fired = NULL;
    if (type != NULL && berth_gc_schedule_cron(type, cron != NULL ? cron : "", expr, sizeof(expr)) == 0 && expr[0] != '\0' &&
        berth_repl_cron_matches(expr, &tm) && q(c, BERTH_Q_GC_SCHEDULE_FIRE, NULL, &fired, &err) == 0 && fired != NULL) {
        json_t *params = json_loads(json_string_value(fired), 0, NULL);
        char workers[8];
        snprintf(workers, sizeof(workers), "%lld", jint(params, "workers"));
        const char *p[] = {"SCHEDULE", json_is_true(json_object_get(params, "delete_untagged")) ? "true" : "false",
                           json_is_true(json_object_get(params, "dry_run")) ? "true" : "false", workers};
        if (q(c, BERTH_Q_GC_CREATE, p, NULL, &err) != 0)
            berth_log_info("gc: scheduled run skipped: %s", err.code == BERTH_EEXISTS ? "a run is still active" : err.msg);
        json_decref(params);
    }
    json_decref(fired);
    json_decref(s);
}

static void tick(void *data, int stopping)
{
    (void)data;
    if (stopping)
        return;
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(gc.db, &err);
    if (c == NULL)
        return;
    fire_schedule(c);
    char lease[24], grace[24];
    snprintf(lease, sizeof(lease), "%ld", gc.conf.lease_seconds);
    snprintf(grace, sizeof(grace), "%ld", gc.conf.grace_seconds);
    for (int i = 0; i < 8 && !berth_bgloop_stopping(gc.loop); i++) {
        json_t *claimed = NULL;
        const char *p[] = {gc.owner, lease, grace};
        if (q(c, BERTH_Q_GC_CLAIM, p, &claimed, &err) != 0 || claimed == NULL)
            break;
        run_t r = {.id = jint(claimed, "id"),
                   .dry = json_is_true(json_object_get(claimed, "dry_run")),
                   .untagged = json_is_true(json_object_get(claimed, "delete_untagged")),
                   .grace_s = (long)jint(claimed, "grace"),
                   .workers = (int)jint(claimed, "workers")};
        snprintf(r.idbuf, sizeof(r.idbuf), "%lld", r.id);
        snprintf(r.marks, sizeof(r.marks), "%lld", jint(claimed, "marks"));
        snprintf(r.grace, sizeof(r.grace), "%ld", r.grace_s);
        snprintf(r.lease, sizeof(r.lease), "%s", lease);
        pthread_mutex_init(&r.mu, NULL);
        pthread_mutex_lock(&gc.mu);
        gc.running = 1;
        pthread_mutex_unlock(&gc.mu);
        set_state(&r, json_incref(json_object_get(claimed, "state")));
        /* taken over in the middle of a manifest pass: what that pass deleted may have freed children; one more pass
           (the cursor does not say whether it deleted anything: with several sweepers it may still be 0) */
        r.pass_done = jint(r.state, "phase") == PH_SWEEP_MANIFESTS;
        json_decref(claimed);
        int interrupted = execute(c, &r);
        json_decref(r.state);
        pthread_mutex_destroy(&r.mu);
        pthread_mutex_lock(&gc.mu);
        gc.running = 0;
        pthread_mutex_unlock(&gc.mu);
        /* an error (the database gone, a statement failing): the run waits for the next look (the interval or a wake)
           instead of being claimed again at once, which repeated the error and its log line back to back */
        if (interrupted)
            break;
    }
    berth_db_release(gc.db, c);
}

int berth_gc_start(berth_registry_t *reg, const berth_gc_conf_t *conf, berth_err_t *err)
{
    gc.reg = reg;
    gc.conf = *conf;
    if (gc.conf.lease_seconds <= 0)
        gc.conf.lease_seconds = 60;
    if (gc.conf.batch <= 0)
        gc.conf.batch = 1000;
    if (gc.conf.interval_ms <= 0)
        gc.conf.interval_ms = 20000;
    unsigned char rnd[6];
    RAND_bytes(rnd, sizeof(rnd));
    char host[40] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(gc.owner, sizeof(gc.owner), "%.39s/%d/%02x%02x%02x%02x%02x%02x", host, (int)getpid(), rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5]);
    /* its own connection without the request deadline: a mark over a million rows takes longer than a request may */
    /* + the sweepers' (opened on first use) */
    int rc = berth_db_open(&gc.db, conf->database_url, 1 + SWEEPERS_MAX, err);
    if (rc != 0)
        return rc;
    if (berth_bgloop_start(&gc.loop, "berth-gc", gc.conf.interval_ms, tick, NULL) != 0) {
        berth_db_close(gc.db);
        gc.db = NULL;
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot start the garbage collector's thread");
    }
    berth_bgloop_wake(gc.loop);
    return 0;
}

void berth_gc_stop(void)
{
    berth_bgloop_stop(gc.loop);
    gc.loop = NULL;
    if (gc.db != NULL)
        berth_db_close(gc.db);
    gc.db = NULL;
}

void berth_gc_wake(void)
{
    if (gc.loop != NULL)
        berth_bgloop_wake(gc.loop);
}

long berth_gc_grace_seconds(void)
{
    return gc.conf.grace_seconds;
}

void berth_gc_metrics(FILE *f)
{
    pthread_mutex_lock(&gc.mu);
    long long k[13];
    memcpy(k, gc.counters, sizeof(k));
    int running = gc.running, ph = gc.phase;
    long long id = gc.run_id;
    unsigned long long done = gc.runs_done, failed = gc.runs_failed;
    pthread_mutex_unlock(&gc.mu);
    long long marked = ph == PH_SWEEP_MANIFESTS ? k[0] : ph == PH_SWEEP_LINKS ? k[2] : ph == PH_SWEEP_BLOBS ? k[4] : 0;
    long pct = ph >= PH_FINISH && !running ? 100 : ph * 100 / 9 + (marked > 0 ? (long)(k[10] * 11 / marked) : 0);
    if (pct > 100)
        pct = 100;
    fprintf(
        f,
        "# HELP berth_gc_running 1 while this berthd works on a garbage-collection run.\n"
        "# TYPE berth_gc_running gauge\nberth_gc_running %d\n"
        "# TYPE berth_gc_run_id gauge\nberth_gc_run_id %lld\n"
        "# TYPE berth_gc_phase gauge\nberth_gc_phase %d\n"
        "# HELP berth_gc_progress_percent The last run's progress on this berthd.\n"
        "# TYPE berth_gc_progress_percent gauge\nberth_gc_progress_percent %ld\n"
        "# HELP berth_gc_marked What the last run marked as garbage, by kind.\n"
        "# TYPE berth_gc_marked gauge\nberth_gc_marked{kind=\"manifest\"} %lld\nberth_gc_marked{kind=\"link\"} %lld\n"
        "berth_gc_marked{kind=\"blob\"} %lld\n"
        "# HELP berth_gc_swept What the last run deleted, by kind.\n"
        "# TYPE berth_gc_swept gauge\nberth_gc_swept{kind=\"manifest\"} %lld\nberth_gc_swept{kind=\"link\"} %lld\n"
        "berth_gc_swept{kind=\"blob\"} %lld\nberth_gc_swept{kind=\"orphan_file\"} %lld\n"
        "# TYPE berth_gc_bytes_marked gauge\nberth_gc_bytes_marked %lld\n"
        "# TYPE berth_gc_bytes_freed gauge\nberth_gc_bytes_freed %lld\n"
        "# TYPE berth_gc_runs_total counter\nberth_gc_runs_total{status=\"Success\"} %llu\nberth_gc_runs_total{status=\"Error\"} "
        "%llu\n",
        running, id, ph, pct, k[0], k[2], k[4], k[1], k[3], k[6], k[8], k[5], k[7] + k[9], done, failed);
}

int berth_gc_schedule_cron(const char *type, const char *cron, char *out, size_t outsz)
{
    static const struct {
        const char *type, *cron;
    } fixed[] = {{"None", ""}, {"Manual", ""}, {"Hourly", "0 0 * * * *"}, {"Daily", "0 0 0 * * *"}, {"Weekly", "0 0 0 * * 0"}};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (strcmp(type, fixed[i].type) == 0) {
            snprintf(out, outsz, "%s", fixed[i].cron);
            return 0;
        }
    if ((strcmp(type, "Custom") == 0 || strcmp(type, "Schedule") == 0) && cron != NULL && strlen(cron) < outsz &&
        berth_repl_cron_valid(cron)) {
        snprintf(out, outsz, "%s", cron);
        return 0;
    }
    return BERTH_EINVAL;
}

time_t berth_gc_next_time(const char *cron, time_t from)
{
    if (cron == NULL || cron[0] == '\0')
        return 0;
    time_t t = from - from % 60 + 60;
    for (long i = 0; i < 366L * 24 * 60; i++, t += 60) {
        struct tm tm;
        localtime_r(&t, &tm);
        if (berth_repl_cron_matches(cron, &tm))
            return t;
    }
    return 0;
}
