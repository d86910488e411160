#include "sql/db_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

#define CANCEL_MAX 64 /* timed-out queries whose cancel waits for the server to answer again */
#define PROBE_EVERY_MS 250

struct st_berth_db_t {
    char *conninfo;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* a connection came back to the pool, or the database went down */
    pthread_cond_t probe_cv; /* wakes the prober */
    berth_dbconn_t *conns;
    berth_dbconn_t *free_list;
    int size, in_use;
    unsigned long waits, errors, timeouts;
    int deadline_ms; /* per round trip; 0 = none (migrations at start) */
    int down;        /* a round trip missed its deadline or a connect failed: fail fast until a probe succeeds */
    int stopping;
    pthread_t prober;
    int prober_started;
    PGcancel *cancels[CANCEL_MAX];
    int ncancels;
};

/* server NOTICEs ("relation exists, skipping") are not for stdout */
static void on_notice(void *arg, const char *msg)
{
    berth_log_debug("postgres: %.*s", (int)strcspn(msg, "\n"), msg);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for `events` on the connection's socket until `until` (ms, monotonic; -1 forever): 1 ready, 0 timed out. */
static int wait_socket(PGconn *pg, short events, int64_t until)
{
    for (;;) {
        int timeout = until < 0 ? -1 : (int)(until - now_ms());
        if (until >= 0 && timeout <= 0)
            return 0;
        struct pollfd pfd = {.fd = PQsocket(pg), .events = events};
        int n = poll(&pfd, 1, timeout);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return 1; /* let libpq see and report the socket's error */
    }
}

/*
 * Connect within the deadline (PQconnectPoll instead of PQconnectdb, whose connect_timeout is whole seconds and
 * waits that long on a frozen server). Keepalives and tcp_user_timeout make a silent network partition an error
 * on an idle or sending connection too. Values in the user's conninfo override these (expand_dbname).
 */
static PGconn *connect_pg(berth_db_t *db)
{
    int ms = db->deadline_ms > 0 ? db->deadline_ms : 5000;
    char user_timeout[16];
    snprintf(user_timeout, sizeof(user_timeout), "%d", ms);
    const char *keys[] = {
        "connect_timeout",  "application_name", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
        "tcp_user_timeout", "dbname",           NULL};
    const char *vals[] = {"5", "berthd", "1", "10", "3", "3", user_timeout, db->conninfo, NULL};
    PGconn *pg = PQconnectStartParams(keys, vals, 1);
    if (pg == NULL || PQstatus(pg) == CONNECTION_BAD)
        return pg;
    int64_t until = now_ms() + ms;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        if (!wait_socket(pg, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, until)) {
            PQfinish(pg);
            return NULL;
        }
        st = PQconnectPoll(pg);
    }
    return pg;
}

static void set_down(berth_db_t *db)
{
    pthread_mutex_lock(&db->mu);
    if (!db->down)
        berth_log_warn("database not answering: requests that need it get 503 until it does (probing every %d ms)", PROBE_EVERY_MS);
    db->down = 1;
    pthread_cond_broadcast(&db->cv);
    pthread_cond_signal(&db->probe_cv);
    pthread_mutex_unlock(&db->mu);
}

/*
 * A pooled connection says nothing while it is idle, so a readable socket means the server spoke first: a
 * restart's "terminating connection" and close, or a crash's reset. libpq still reports CONNECTION_OK until the
 * next query fails, which would cost one request a 503 per pooled connection; such a connection is replaced
 * before it is handed out instead. Nothing was sent on it, so nothing is retried.
 */
static int idle_conn_usable(PGconn *pg)
{
    if (pg == NULL || PQstatus(pg) != CONNECTION_OK)
        return 0;
    struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

static int ensure_connected(berth_db_t *db, berth_dbconn_t *c, berth_err_t *err)
{
    if (idle_conn_usable(c->pg))
        return 0;
    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK)
        berth_log_info("database: a pooled connection was closed by the server while idle; reconnecting");
    if (c->pg != NULL)
        PQfinish(c->pg);
    memset(c->prepared, 0, sizeof(c->prepared));
    c->in_tx = 0;
    c->pg = connect_pg(db);
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
        /* PQerrorMessage never contains the password; it does name the server, so it stays in the log */
        char msg[200];
        snprintf(msg, sizeof(msg), "%s", c->pg != NULL ? PQerrorMessage(c->pg) : "no answer within the deadline");
        msg[strcspn(msg, "\n")] = '\0';
        PQfinish(c->pg);
        c->pg = NULL;
        berth_log_warn("database unreachable: %s", msg);
        if (db->deadline_ms > 0)
            set_down(db);
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database unreachable: %s", msg);
    }
    PQsetNoticeProcessor(c->pg, on_notice, NULL);
    PQsetnonblocking(c->pg, 1); /* PQsend* never block on a full socket: flushing waits under the deadline */
    return 0;
}

/*
 * The prober: while the database is down, connect and run one query every PROBE_EVERY_MS, each under the
 * deadline; the first success lets requests through again. Cancels for timed-out queries are sent only then:
 * PQcancel waits for the server, and a frozen one would hold the prober for as long as the freeze lasts.
 */
static void *probe_main(void *arg)
{
    berth_db_t *db = arg;
    pthread_mutex_lock(&db->mu);
    while (!db->stopping) {
        if (!db->down) {
            pthread_cond_wait(&db->probe_cv, &db->mu);
            continue;
        }
        pthread_mutex_unlock(&db->mu);
        berth_dbconn_t probe = {.db = db};
        int ok = ensure_connected(db, &probe, NULL) == 0 && berth_db_exec(&probe, "SELECT 1", NULL) == 0;
        if (probe.pg != NULL)
            PQfinish(probe.pg);
        pthread_mutex_lock(&db->mu);
        if (ok) {
            PGcancel *cancels[CANCEL_MAX];
            int n = db->ncancels;
            // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, copied by element size
            memcpy(cancels, db->cancels, sizeof(cancels[0]) * (size_t)n);
            db->ncancels = 0;
            db->down = 0;
            pthread_mutex_unlock(&db->mu);
            berth_log_warn("database answering again");
            for (int i = 0; i < n; i++) {
                char buf[256];
                PQcancel(cancels[i], buf, sizeof(buf));
                PQfreeCancel(cancels[i]);
            }
            pthread_mutex_lock(&db->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += PROBE_EVERY_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (!db->stopping)
            pthread_cond_timedwait(&db->probe_cv, &db->mu, &ts);
    }
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

int berth_db_open(berth_db_t **out, const char *conninfo, int size, berth_err_t *err)
{
    berth_db_t *db = calloc(1, sizeof(*db));
    db->conninfo = strdup(conninfo);
    db->size = size < 1 ? 1 : size;
    db->conns = calloc((size_t)db->size, sizeof(*db->conns));
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cv, NULL);
    pthread_cond_init(&db->probe_cv, NULL);
    for (int i = db->size - 1; i >= 0; i--) {
        db->conns[i].db = db;
        db->conns[i].next_free = db->free_list;
        db->free_list = &db->conns[i];
    }
    /* a statement table that breaks the one id space would run the wrong SQL: refuse to start instead */
    berth_err_t bad;
    berth_err_clear(&bad);
    int rc = berth_db_statements_check(&bad);
    if (rc != 0) {
        berth_log_err("sql: %s", bad.msg);
        berth_err_set(err, BERTH_OCI_INTERNAL, "%s", bad.msg);
    } else {
        rc = ensure_connected(db, &db->conns[0], err);
    }
    if (rc != 0) {
        berth_db_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

int berth_db_set_deadline(berth_db_t *db, int deadline_ms, berth_err_t *err)
{
    if (deadline_ms > 0 && !db->prober_started) {
        if (pthread_create(&db->prober, NULL, probe_main, db) != 0)
            return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot start the database probe thread");
        db->prober_started = 1;
    }
    db->deadline_ms = deadline_ms; /* only with a probe that can end the outage it declares */
    return 0;
}

void berth_db_close(berth_db_t *db)
{
    if (db == NULL)
        return;
    if (db->prober_started) {
        pthread_mutex_lock(&db->mu);
        db->stopping = 1;
        pthread_cond_signal(&db->probe_cv);
        pthread_mutex_unlock(&db->mu);
        pthread_join(db->prober, NULL);
    }
    for (int i = 0; i < db->ncancels; i++)
        PQfreeCancel(db->cancels[i]);
    for (int i = 0; i < db->size; i++)
        if (db->conns[i].pg != NULL)
            PQfinish(db->conns[i].pg);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cv);
    pthread_cond_destroy(&db->probe_cv);
    free(db->conns);
    free(db->conninfo);
    free(db);
}

static berth_dbconn_t *fail_fast(berth_db_t *db, berth_err_t *err)
{
    db->errors++;
    pthread_mutex_unlock(&db->mu);
    berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database not answering");
    return NULL;
}

berth_dbconn_t *berth_db_acquire(berth_db_t *db, berth_err_t *err)
{
    pthread_mutex_lock(&db->mu);
    if (db->down)
        return fail_fast(db, err);
    if (db->free_list == NULL)
        db->waits++;
    /* a request waits for a pooled connection no longer than for an answer */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += db->deadline_ms / 1000;
    until.tv_nsec += (db->deadline_ms % 1000) * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    while (db->free_list == NULL && !db->down) {
        if (db->deadline_ms <= 0)
            pthread_cond_wait(&db->cv, &db->mu);
        else if (pthread_cond_timedwait(&db->cv, &db->mu, &until) == ETIMEDOUT && db->free_list == NULL) {
            berth_log_warn("no database connection free within %d ms (database.pool is %d)", db->deadline_ms, db->size);
            return fail_fast(db, err);
        }
    }
    if (db->down)
        return fail_fast(db, err);
    berth_dbconn_t *c = db->free_list;
    db->free_list = c->next_free;
    db->in_use++;
    pthread_mutex_unlock(&db->mu);
    if (ensure_connected(db, c, err) != 0) {
        berth_db_release(db, c);
        pthread_mutex_lock(&db->mu);
        db->errors++;
        pthread_mutex_unlock(&db->mu);
        return NULL;
    }
    return c;
}

void berth_db_release(berth_db_t *db, berth_dbconn_t *c)
{
    if (c->in_tx)
        berth_db_rollback(c);
    c->actor[0] = '\0';
    pthread_mutex_lock(&db->mu);
    c->next_free = db->free_list;
    db->free_list = c;
    db->in_use--;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

void berth_db_stats(berth_db_t *db, int *size, int *in_use, unsigned long *waits, unsigned long *errors)
{
    pthread_mutex_lock(&db->mu);
    *size = db->size;
    *in_use = db->in_use;
    *waits = db->waits;
    *errors = db->errors;
    pthread_mutex_unlock(&db->mu);
}

void berth_db_health(berth_db_t *db, int *down, unsigned long *timeouts)
{
    pthread_mutex_lock(&db->mu);
    *down = db->down;
    *timeouts = db->timeouts;
    pthread_mutex_unlock(&db->mu);
}

/*
 * A round trip missed its deadline: the connection is in an unknown state, so it is closed at once (the request
 * answers 503) and the query's cancel is queued for when the server answers again.
 */
static int timed_out(berth_dbconn_t *c, berth_err_t *err)
{
    berth_db_t *db = c->db;
    PGcancel *k = PQgetCancel(c->pg);
    PQfinish(c->pg);
    c->pg = NULL;
    c->in_tx = 0;
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): a deadline passes only with c->db (its deadline_ms)
    pthread_mutex_lock(&db->mu);
    db->timeouts++;
    if (k != NULL && db->ncancels < CANCEL_MAX) {
        db->cancels[db->ncancels++] = k;
        k = NULL;
    }
    pthread_mutex_unlock(&db->mu);
    if (k != NULL)
        PQfreeCancel(k);
    berth_log_warn("database round trip exceeded database.deadline_ms (%d ms); connection dropped", db->deadline_ms);
    set_down(db);
    return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database round trip exceeded its deadline");
}

/*
 * Finish a round trip that PQsend* started: flush, then read every result, all before the deadline. Returns
 * the result as PQexec would (the first error, else the last result), NULL with err set when the connection
 * failed or the deadline passed.
 */
static PGresult *round_trip(berth_dbconn_t *c, int sent, berth_err_t *err, int *failed)
{
    int ms = c->db != NULL ? c->db->deadline_ms : 0;
    int64_t until = ms > 0 ? now_ms() + ms : -1;
    *failed = 1; /* 1: the connection failed; 2: the deadline passed (err set, c->pg dropped) */
    if (!sent)
        return NULL; /* the caller maps PQerrorMessage */
    int f;
    while ((f = PQflush(c->pg)) == 1) {
        if (!wait_socket(c->pg, POLLOUT | POLLIN, until)) {
            *failed = 2;
            timed_out(c, err);
            return NULL;
        }
        if (!PQconsumeInput(c->pg))
            return NULL;
    }
    if (f < 0)
        return NULL;
    PGresult *res = NULL;
    for (;;) {
        while (PQisBusy(c->pg)) {
            if (!wait_socket(c->pg, POLLIN, until)) {
                PQclear(res);
                *failed = 2;
                timed_out(c, err);
                return NULL;
            }
            if (!PQconsumeInput(c->pg)) {
                PQclear(res);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(c->pg);
        if (r == NULL)
            break;
        ExecStatusType s = PQresultStatus(res);
        if (res != NULL && s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
            PQclear(r); /* keep the first error */
        } else {
            PQclear(res);
            res = r;
        }
    }
    *failed = 0;
    return res;
}

/* Expected SQL outcomes that callers branch on; if one reaches a client it is a 500. */
static int with_code(berth_err_t *err, int code, const char *msg)
{
    berth_err_set(err, BERTH_OCI_INTERNAL, "%s", msg);
    if (err != NULL)
        err->code = code;
    return code;
}

static int map_error(berth_dbconn_t *c, PGresult *res, berth_err_t *err)
{
    if (PQstatus(c->pg) != CONNECTION_OK) {
        berth_log_warn("database connection lost");
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database connection lost");
    }
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c->pg);
    if (state != NULL && strcmp(state, "23505") == 0)
        return with_code(err, BERTH_EEXISTS, "unique violation");
    if (state != NULL && strcmp(state, "23503") == 0)
        return with_code(err, BERTH_ECONFLICT, "foreign key violation");
    if (state != NULL && strcmp(state, "55P03") == 0) /* NOWAIT met a lock: the row is another request's */
        return with_code(err, BERTH_ECONFLICT, "row locked by another request");
    if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        return with_code(err, BERTH_ERETRY, "transaction conflict");
    if (state != NULL && (strncmp(state, "57P", 3) == 0 || strncmp(state, "08", 2) == 0))
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database unavailable");
    berth_log_err("sql error %s: %.200s", state != NULL ? state : "-", msg);
    return berth_err_set(err, BERTH_OCI_INTERNAL, "database error");
}

/* Send, then wait under the deadline. NULL with err set on any failure (a timeout has already dropped c->pg). */
static PGresult *run_checked(berth_dbconn_t *c, int sent, berth_err_t *err)
{
    int failed;
    PGresult *res = round_trip(c, sent, err, &failed);
    if (failed == 1 && c->pg != NULL)
        map_error(c, NULL, err);
    else if (failed == 1) /* an earlier deadline on this request dropped the connection */
        berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database connection dropped");
    if (failed)
        return NULL;
    ExecStatusType s = PQresultStatus(res);
    if (res == NULL || (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)) {
        map_error(c, res, err);
        PQclear(res);
        return NULL;
    }
    return res;
}

PGresult *berth_db__run(berth_dbconn_t *c, berth_sql_id_t id, const char *const *values, const int *lengths, const int *formats,
                        int binary_result, berth_err_t *err)
{
    const berth_db__stmt_t *st = berth_db__stmt(id);
    if (st == NULL) {
        berth_log_err("sql: no statement with id %d (%s)", (int)id, berth_sql_name(id));
        berth_err_set(err, BERTH_OCI_INTERNAL, "unknown statement %d", (int)id);
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof(name), "s%d", st->id);
    if (!c->prepared[st->id]) {
        PGresult *p = run_checked(c, PQsendPrepare(c->pg, name, st->sql, st->nparams, NULL), err);
        if (p == NULL)
            return NULL;
        PQclear(p);
        c->prepared[st->id] = 1;
    }
    return run_checked(c, PQsendQueryPrepared(c->pg, name, st->nparams, values, lengths, formats, binary_result), err);
}

int berth_db_exec(berth_dbconn_t *c, const char *sql, berth_err_t *err)
{
    berth_err_t local;
    berth_err_clear(&local);
    PGresult *res = run_checked(c, PQsendQuery(c->pg, sql), err != NULL ? err : &local);
    if (res == NULL)
        return err != NULL ? err->code : local.code;
    PQclear(res);
    return 0;
}

int berth_db_begin(berth_dbconn_t *c, berth_err_t *err)
{
    int rc = berth_db_exec(c, "BEGIN", err);
    if (rc == 0)
        c->in_tx = 1;
    return rc;
}

int berth_db_commit(berth_dbconn_t *c, berth_err_t *err)
{
    c->in_tx = 0;
    return berth_db_exec(c, "COMMIT", err);
}

void berth_db_rollback(berth_dbconn_t *c)
{
    c->in_tx = 0;
    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK)
        berth_db_exec(c, "ROLLBACK", NULL);
}

void berth_db_set_actor(berth_dbconn_t *c, const char *actor)
{
    snprintf(c->actor, sizeof(c->actor), "%s", actor != NULL ? actor : "");
}
