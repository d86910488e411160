#include "sql/listen.h"

#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

struct st_berth_db_listener_t {
    char *conninfo;
    void (*on_change)(const char *);
    void (*on_state)(int);
    atomic_int stop; /* written by berth_db_listen_stop, read by the listener thread: atomic, not volatile (TSan) */
    pthread_t tid;
};

static PGconn *open_listening(const char *conninfo)
{
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"5", "berthd-listen", conninfo, NULL};
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
        while (!l->stop) {
            struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN};
            if (poll(&pfd, 1, 500) < 0)
                continue;
            if (pfd.revents == 0)
                continue;
            if (!PQconsumeInput(pg))
                break;
            PGnotify *n;
            while ((n = PQnotifies(pg)) != NULL) {
                l->on_change(n->extra);
                PQfreemem(n);
            }
        }
        l->on_state(0);
        if (!l->stop)
            berth_log_warn("invalidation channel lost; read cache off until it is back");
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
