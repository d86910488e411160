/* Garbage collection's SQL (sql/gc.c): its statements run through berth_db_api (sql/api.h); this is the rest. */
#ifndef BERTH_SQL_GC_H
#define BERTH_SQL_GC_H

#include "sql/db.h"

/**
 * Refresh the planner's statistics of gc_marks after a mark phase filled it: with the statistics of the empty
 * table the sweep's window query scans every mark per batch (a 1M-row benchmark spent 233 s so). 0 or a code.
 */
int berth_db_gc_analyze(berth_dbconn_t *c, berth_err_t *err);

#endif
