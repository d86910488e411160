/* Shared by the files of sql/: statement execution with lazy per-connection preparation. */
#ifndef BERTH_SQL_DB_INTERNAL_H
#define BERTH_SQL_DB_INTERNAL_H

#include <libpq-fe.h>

#include "sql/db.h"

#define BERTH_DB__MAX_STMTS 256

/*
 * The join from an isa_variants row `v` to its scan verdict `s`: a verdict belongs to the entry's declaration
 * (digest, level, features), never to the digest alone (migration 0090).
 */
#define ISA_SCAN_OF_ENTRY "s.digest = v.digest AND s.declared_level = v.level AND s.declared_features = v.features"

struct st_berth_dbconn_t {
    berth_db_t *db; /* its pool: the round-trip deadline, and where a timeout reports */
    PGconn *pg;
    int in_tx;
    unsigned char prepared[BERTH_DB__MAX_STMTS];
    struct st_berth_dbconn_t *next_free;
};

typedef struct st_berth_db__stmt_t {
    int id; /* index into prepared[], unique per statement */
    const char *sql;
    int nparams;
} berth_db__stmt_t;

/**
 * Execute a prepared statement (prepared on first use on this connection). Text parameters; a NULL value is
 * SQL NULL; `binary_result` asks for raw bytes instead of text. Returns the result (caller PQclear()s) or NULL with err set:
 * UNAVAILABLE for a lost connection, EEXISTS for unique violations, ECONFLICT for foreign-key violations, INTERNAL otherwise.
 */
PGresult *berth_db__run(berth_dbconn_t *c, const berth_db__stmt_t *st, const char *const *values, const int *lengths,
                        const int *formats, int binary_result, berth_err_t *err);

#endif
