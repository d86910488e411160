/* PostgreSQL connection pool. Only sql/ includes libpq; callers get plain C values back. */
#ifndef BERTH_SQL_DB_H
#define BERTH_SQL_DB_H

#include <stddef.h>

#include "core/err.h"

typedef struct st_berth_db_t berth_db_t;
typedef struct st_berth_dbconn_t berth_dbconn_t;

/**
 * Create a pool of up to `size` connections to `conninfo` (a libpq conninfo string or URI).
 * Connections open lazily; the first one is opened here so that a bad URL fails at start.
 * Returns 0 or BERTH_EUNAVAIL (err says why, without the password); BERTH_ERROR when sql/'s statement tables
 * break the one id space (berth_db_statements_check).
 */
int berth_db_open(berth_db_t **out, const char *conninfo, int size, berth_err_t *err);
void berth_db_close(berth_db_t *db);
/**
 * From now on every round trip (connect, send, each result) must finish within `deadline_ms`: past it the
 * query's connection is dropped (its cancel is sent once the server answers again), the caller gets
 * UNAVAILABLE, and acquire() fails fast with UNAVAILABLE until a background probe reaches the database again.
 * Called after the migrations, which may legitimately take longer. 0 = no deadline.
 * Returns 0, or BERTH_ERROR when the probe thread cannot be created (the deadline is then not set).
 */
int berth_db_set_deadline(berth_db_t *db, int deadline_ms, berth_err_t *err);
/**
 * Borrow a connection, blocking while all are in use. A broken connection is re-established here.
 * Returns NULL with UNAVAILABLE in err when the database cannot be reached.
 */
berth_dbconn_t *berth_db_acquire(berth_db_t *db, berth_err_t *err);
void berth_db_release(berth_db_t *db, berth_dbconn_t *conn);
/** Pool figures for /metrics. */
void berth_db_stats(berth_db_t *db, int *size, int *in_use, unsigned long *waits, unsigned long *errors);
/** 1 in *down while requests fail fast (no answer within the deadline), and round trips that timed out so far. */
void berth_db_health(berth_db_t *db, int *down, unsigned long *timeouts);

/**
 * Name who the changes on `c` are made for (a user, a robot, "" for Berth itself) until the connection is
 * released: the change transactions record it with the events they queue (sql/webhook.h). NULL means "".
 */
void berth_db_set_actor(berth_dbconn_t *c, const char *actor);

int berth_db_begin(berth_dbconn_t *c, berth_err_t *err);
int berth_db_commit(berth_dbconn_t *c, berth_err_t *err);
/** Roll back if a transaction is open; never fails visibly. */
void berth_db_rollback(berth_dbconn_t *c);
/** Run a statement without parameters or results (migrations, locks). */
int berth_db_exec(berth_dbconn_t *c, const char *sql, berth_err_t *err);

#endif
