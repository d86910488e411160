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

struct st_berth_dbconn_t;

/**
 * Return once every notification committed before now has been handed to on_change on this instance's listener
 * (the one started last), or after `timeout_ms`: sends its own marker through `c` (outside a transaction) and waits
 * for the listener to see it, as notifications arrive in commit order. An API write answers after it, so what its
 * triggers made this instance forget is forgotten before the caller hears back. 0 when seen, -1 otherwise.
 */
int berth_db_listen_sync(struct st_berth_dbconn_t *c, int timeout_ms);

#endif
