/* A dedicated connection that LISTENs for cache invalidations sent by any berthd sharing the database. */
#ifndef BERTH_SQL_LISTEN_H
#define BERTH_SQL_LISTEN_H

#define BERTH_DB_CHANNEL "berth_invalidate"

typedef struct st_berth_db_listener_t berth_db_listener_t;

/**
 * Start a thread that calls on_change(payload) for every notification, and on_state(1) once listening /
 * on_state(0) whenever the connection is lost (it reconnects by itself). Callbacks run on that thread.
 * NULL if the thread cannot be created.
 */
berth_db_listener_t *berth_db_listen_start(const char *conninfo, void (*on_change)(const char *payload), void (*on_state)(int up));
void berth_db_listen_stop(berth_db_listener_t *l);

#endif
