#include "sql/listen.h"

#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "sql/db.h"

/* A connection that dies silently (a partition, a dropped NAT entry: no FIN, no RST) would otherwise look like a
 * quiet one and leave the cache on while notifications are lost: a round trip every HEARTBEAT_S seconds that is not
 * answered within ANSWER_S ends it, so the cache is off at most HEARTBEAT_S + ANSWER_S + 1 s after such a loss. */
#define HEARTBEAT_S 2
#define ANSWER_S 3

struct st_berth_db_listener_t {
    char *conninfo;
    void (*on_change)(const char *);
    void (*on_state)(int);
    atomic_int stop; /* written by berth_db_listen_stop, read by the listener thread: atomic, not volatile (TSan) */
    pthread_t tid;
    atomic_int up;           /* listening now: a sync waits only then */
    char id[32];             /* this listener's markers: "!sync:<id>:<n>" */
    atomic_ulong sync_sent;  /* markers sent */
    unsigned long sync_seen; /* the highest seen, under sync_mu */
    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
};

#define SYNC_PREFIX "!sync:"

static berth_db_listener_t *local; /* __atomic: the one berth_db_listen_sync waits on */

/* A marker of berth_db_listen_sync: ours moves sync_seen, any other instance's is not for us. 1 if it was one. */
static int sync_marker(berth_db_listener_t *l, const char *payload)
{
    if (strncmp(payload, SYNC_PREFIX, sizeof(SYNC_PREFIX) - 1) != 0)
        return 0;
    const char *p = payload + sizeof(SYNC_PREFIX) - 1;
    size_t n = strlen(l->id);
    if (strncmp(p, l->id, n) == 0 && p[n] == ':') {
        unsigned long seq = strtoul(p + n + 1, NULL, 10);
        pthread_mutex_lock(&l->sync_mu);
        if (seq > l->sync_seen)
            l->sync_seen = seq;
        pthread_cond_broadcast(&l->sync_cv);
        pthread_mutex_unlock(&l->sync_mu);
    }
    return 1;
}

int berth_db_listen_sync(struct st_berth_dbconn_t *c, int timeout_ms)
{
    berth_db_listener_t *l = __atomic_load_n(&local, __ATOMIC_ACQUIRE);
    if (l == NULL || c == NULL || !atomic_load(&l->up))
        return -1;
    unsigned long seq = atomic_fetch_add(&l->sync_sent, 1) + 1;
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT pg_notify('" BERTH_DB_CHANNEL "', '" SYNC_PREFIX "%s:%lu')", l->id, seq);
    if (berth_db_exec(c, sql, NULL) != 0)
        return -1;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)timeout_ms * 1000000L;
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&l->sync_mu);
    int rc = 0;
    while (l->sync_seen < seq && rc == 0)
        rc = pthread_cond_timedwait(&l->sync_cv, &l->sync_mu, &until);
    int seen = l->sync_seen >= seq;
    pthread_mutex_unlock(&l->sync_mu);
    return seen ? 0 : -1;
}

static PGconn *open_listening(const char *conninfo)
{
    const char *keys[] = {"connect_timeout", "application_name", "keepalives_idle", "keepalives_interval", "dbname", NULL};
    const char *vals[] = {"5", "berthd-listen", "5", "2", conninfo, NULL};
    PGconn *pg = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(pg) == CONNECTION_OK) {
        PGresult *r = PQexec(pg, "LISTEN " BERTH_DB_CHANNEL);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok)
            return pg;
    }
    PQfinish(pg);
    return NULL;
}

static void *main_loop(void *arg)
{
    berth_db_listener_t *l = arg;
    while (!l->stop) {
        PGconn *pg = open_listening(l->conninfo);
        if (pg == NULL) {
            sleep(1);
            continue;
        }
        l->on_state(1);
        atomic_store(&l->up, 1);
        PQsetnonblocking(pg, 1);
        time_t last_ping = time(NULL), ping_sent = 0;
        while (!l->stop) {
            struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN};
            if (poll(&pfd, 1, 500) < 0)
                continue;
            time_t now = time(NULL);
            if (ping_sent != 0 && now - ping_sent > ANSWER_S) {
                berth_log_warn("invalidation channel: no answer from PostgreSQL within %d s", ANSWER_S);
                break;
            }
            if (ping_sent == 0 && now - last_ping >= HEARTBEAT_S) {
                if (!PQsendQuery(pg, "SELECT 1") || PQflush(pg) < 0)
                    break;
                ping_sent = last_ping = now;
            }
            if (pfd.revents == 0)
                continue;
            if (!PQconsumeInput(pg))
                break;
            while (ping_sent != 0 && !PQisBusy(pg)) { /* the heartbeat's answer (then NULL: it is complete) */
                PGresult *r = PQgetResult(pg);
                if (r == NULL) {
                    ping_sent = 0;
                    break;
                }
                PQclear(r);
            }
            PGnotify *n;
            while ((n = PQnotifies(pg)) != NULL) {
                if (!sync_marker(l, n->extra))
                    l->on_change(n->extra);
                PQfreemem(n);
            }
        }
        atomic_store(&l->up, 0);
        l->on_state(0);
        if (!l->stop)
            berth_log_warn(
                "invalidation channel lost; the read cache keeps what it holds for 30 s and takes nothing new until it is back");
        PQfinish(pg);
    }
    return NULL;
}

berth_db_listener_t *berth_db_listen_start(const char *conninfo, void (*on_change)(const char *), void (*on_state)(int))
{
    berth_db_listener_t *l = calloc(1, sizeof(*l));
    l->conninfo = strdup(conninfo);
    l->on_change = on_change;
    l->on_state = on_state;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(l->id, sizeof(l->id), "%ld.%ld", (long)getpid(), (long)t.tv_nsec);
    pthread_mutex_init(&l->sync_mu, NULL);
    pthread_cond_init(&l->sync_cv, NULL);
    if (pthread_create(&l->tid, NULL, main_loop, l) != 0) {
        free(l->conninfo);
        free(l);
        return NULL;
    }
    __atomic_store_n(&local, l, __ATOMIC_RELEASE);
    return l;
}

void berth_db_listen_stop(berth_db_listener_t *l)
{
    if (l == NULL)
        return;
    berth_db_listener_t *expected = l;
    __atomic_compare_exchange_n(&local, &expected, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    l->stop = 1;
    pthread_join(l->tid, NULL);
    free(l->conninfo);
    free(l);
}
