#include <stdlib.h>
#include <string.h>

#include "sql/db_internal.h"

static const char *const names[BERTH_SQL__COUNT] = {
#define BERTH_SQL__NAME(id) [id] = #id,
    BERTH_SQL_STATEMENTS(BERTH_SQL__NAME)
#undef BERTH_SQL__NAME
};

/* every file's table; a file that adds statements adds its table here */
static const berth_db__stmt_t *const tables[] = {berth_db__registry_stmts,  berth_db__isa_stmts,         berth_db__users_stmts,
                                                 berth_db__api_stmts,       berth_db__replication_stmts, berth_db__proxy_stmts,
                                                 berth_db__immutable_stmts, berth_db__gc_stmts,          berth_db__retention_stmts,
                                                 berth_db__gateway_stmts,   berth_db__webhook_stmts};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

const char *berth_sql_name(int id)
{
    return id >= 0 && id < BERTH_SQL__COUNT ? names[id] : "?";
}

const berth_db__stmt_t *berth_db__stmt(int id)
{
    if (id < 0 || id >= BERTH_SQL__COUNT)
        return NULL;
    for (size_t i = 0; i < NTABLES; i++)
        if (tables[i][id].sql != NULL)
            return &tables[i][id];
    return NULL;
}

/* The highest $n the text uses: PostgreSQL wants exactly that many values for a prepared statement. */
static int max_param(const char *sql)
{
    int max = 0;
    for (const char *p = strchr(sql, '$'); p != NULL; p = strchr(p + 1, '$')) {
        char *end;
        long n = strtol(p + 1, &end, 10);
        if (end != p + 1 && p[1] >= '0' && p[1] <= '9' && n > max)
            max = (int)n;
    }
    return max;
}

int berth_db__check(const berth_db__stmt_t *const *t, size_t ntables, berth_err_t *err)
{
    for (int id = 0; id < BERTH_SQL__COUNT; id++) {
        int defined = 0;
        for (size_t i = 0; i < ntables; i++) {
            const berth_db__stmt_t *st = &t[i][id];
            if (st->sql == NULL)
                continue;
            if (st->id != id)
                return berth_err_set(err, BERTH_OCI_INTERNAL, "statement %s (table %zu) carries id %d", names[id], i, st->id);
            if (++defined > 1)
                return berth_err_set(err, BERTH_OCI_INTERNAL, "statement %s is defined twice (table %zu)", names[id], i);
            if (max_param(st->sql) != st->nparams)
                return berth_err_set(err, BERTH_OCI_INTERNAL, "statement %s declares %d parameters, its text uses %d", names[id],
                                     st->nparams, max_param(st->sql));
        }
        if (defined == 0)
            return berth_err_set(err, BERTH_OCI_INTERNAL, "statement %s has no SQL text", names[id]);
    }
    return 0;
}

const berth_db__stmt_t *const *berth_db__tables(size_t *n)
{
    *n = NTABLES;
    return tables;
}

int berth_db_statements_check(berth_err_t *err)
{
    return berth_db__check(tables, NTABLES, err);
}
