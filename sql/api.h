/*
 * The REST API's queries. PostgreSQL shapes Harbor's JSON (json_build_object/json_agg), so one generic call
 * serves every endpoint: a query returns at most one row whose first column is JSON text (or NULL) and whose
 * optional second column is the total for pagination. Parameters are text, NULL for SQL NULL; their meaning
 * is listed next to each query in sql/api.c (replication's in sql/replication.c, GC's in sql/gc.c).
 */
#ifndef BERTH_SQL_API_H
#define BERTH_SQL_API_H

#include "sql/db.h"
#include "sql/statements.h"

/* a REST query: one of the BERTH_Q_* ids of sql/statements.h */
typedef berth_sql_id_t berth_q_t;

typedef struct st_berth_db_json_t {
    char *json;      /* malloc'd JSON text, NULL when the query returned no row or NULL */
    long long total; /* second column, -1 when absent */
    long affected;   /* rows the statement changed (PQcmdTuples), 0 for queries */
} berth_db_json_t;

/** Run query `q` with its parameters. 0 with *out filled (free out->json), or a negative code with err set. */
int berth_db_api(berth_dbconn_t *c, berth_q_t q, const char *const *params, berth_db_json_t *out, berth_err_t *err);

#endif
