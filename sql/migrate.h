/* Applies the embedded migrations under an advisory lock (several berthd may start at once). */
#ifndef BERTH_SQL_MIGRATE_H
#define BERTH_SQL_MIGRATE_H

#include "sql/db.h"

/**
 * Bring the schema up to date. Each migration runs in its own transaction and is recorded with its sha256.
 * Refuses (BERTH_ECONFLICT) a database whose recorded checksum differs from ours or that is newer than us.
 */
int berth_db_migrate(berth_db_t *db, berth_err_t *err);

#endif
