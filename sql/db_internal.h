/* Shared by the files of sql/: statement execution with lazy per-connection preparation. */
#ifndef BERTH_SQL_DB_INTERNAL_H
#define BERTH_SQL_DB_INTERNAL_H

#include <libpq-fe.h>

#include "sql/db.h"
#include "sql/statements.h"

/*
 * The join from an isa_variants row `v` to its scan verdict `s`: a verdict belongs to the entry's declaration
 * (digest, level, features), never to the digest alone (migration 0090).
 */
#define ISA_SCAN_LOCK_CLASS "1769173843" /* advisory locks of ISA scans in progress (two-key form) */
#define ISA_SCAN_OF_ENTRY "s.digest = v.digest AND s.declared_level = v.level AND s.declared_features = v.features"

/* The key space of the blob-file advisory locks (two-key form, so no other lock of the one-key form collides):
 * an upload holds its digest's lock shared from placing the file until its blob row is committed, GC takes it
 * exclusively before it unlinks a file whose row is gone (sql/registry.c, sql/gc.c) */
#define BERTH_DB__BLOB_FILE_LOCK_CLASS "1650815604"

struct st_berth_dbconn_t {
    berth_db_t *db; /* its pool: the round-trip deadline, and where a timeout reports */
    PGconn *pg;
    int in_tx;
    char actor[256];                          /* on whose behalf it runs (berth_db_set_actor): a webhook event's operator */
    unsigned char prepared[BERTH_SQL__COUNT]; /* by statement id: prepared on this connection as s<id> */
    struct st_berth_dbconn_t *next_free;
};

typedef struct st_berth_db__stmt_t {
    int id; /* its own index in the table; 0 with sql NULL for the ids another file defines */
    const char *sql;
    int nparams;
} berth_db__stmt_t;

/*
 * Each file of sql/ keeps its SQL in one table indexed by statement id (sql/statements.h), holding only its own
 * statements: BERTH_DB__STMT(id, sql, n) stores the id in its own slot, so an entry cannot claim another's id.
 */
#define BERTH_DB__STMT(id, text, n) [id] = {id, text, n}
extern const berth_db__stmt_t berth_db__registry_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__isa_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__users_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__api_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__replication_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__proxy_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__immutable_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__gc_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__retention_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__gateway_stmts[BERTH_SQL__COUNT];
extern const berth_db__stmt_t berth_db__webhook_stmts[BERTH_SQL__COUNT];

/** The statement of `id` in whichever table defines it; NULL for an id outside the list or with no text. */
const berth_db__stmt_t *berth_db__stmt(int id);
/** Every file's table, *n of them. */
const berth_db__stmt_t *const *berth_db__tables(size_t *n);
/** berth_db_statements_check() over the given tables (unit_sql feeds it broken ones). */
int berth_db__check(const berth_db__stmt_t *const *tables, size_t ntables, berth_err_t *err);

/**
 * Execute statement `id` (prepared on first use on this connection). An id without a statement is a logged
 * INTERNAL error (BERTH_ERROR), never an index past prepared[]. Text parameters; a NULL value is
 * SQL NULL; `binary_result` asks for raw bytes instead of text. Returns the result (caller PQclear()s) or NULL with err set:
 * UNAVAILABLE for a lost connection, EEXISTS for unique violations, ECONFLICT for foreign-key violations, INTERNAL otherwise.
 */
PGresult *berth_db__run(berth_dbconn_t *c, berth_sql_id_t id, const char *const *values, const int *lengths, const int *formats,
                        int binary_result, berth_err_t *err);

#endif
