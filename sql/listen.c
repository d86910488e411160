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
};

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
                l->on_change(n->extra);
                PQfreemem(n);
            }
        }
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
    if (pthread_create(&l->tid, NULL, main_loop, l) != 0) {
        free(l->conninfo);
        free(l);
        return NULL;
    }
    return l;
}

void berth_db_listen_stop(berth_db_listener_t *l)
{
    if (l == NULL)
        return;
    l->stop = 1;
    pthread_join(l->tid, NULL);
    free(l->conninfo);
    free(l);
}
