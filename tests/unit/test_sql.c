/*
 * sql/statements.c: every prepared statement id has exactly one SQL text, in one file's table, under its own id;
 * the check that berth_db_open runs at start refuses a collision, a hole, a misfiled id and a wrong parameter
 * count; an id outside the list is an error, never an index. No database needed.
 */
#include "sql/api.h"
#include "sql/db_internal.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

#define MAXT 16

static berth_db__stmt_t scratch[BERTH_SQL__COUNT], extra[BERTH_SQL__COUNT];

/* The real tables, with table `replace` swapped for a copy in scratch[] (the caller then breaks it). */
static size_t real_tables(const berth_db__stmt_t **out, size_t replace)
{
    size_t n;
    const berth_db__stmt_t *const *t = berth_db__tables(&n);
    for (size_t i = 0; i < n && i < MAXT; i++)
        out[i] = t[i];
    if (replace < n) {
        memcpy(scratch, t[replace], sizeof(scratch));
        out[replace] = scratch;
    }
    return n;
}

/* The table (index) that defines `id`. */
static size_t owner(berth_sql_id_t id)
{
    size_t n;
    const berth_db__stmt_t *const *t = berth_db__tables(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i][id].sql != NULL)
            return i;
    return n;
}

int main(void)
{
    berth_err_t err;
    const berth_db__stmt_t *t[MAXT + 1];
    size_t n;

    berth_err_clear(&err);
    int rc = berth_db_statements_check(&err);
    ok(rc == 0, "the real tables: every id defined once, under its own id, parameters matching (%s)", rc == 0 ? "ok" : err.msg);

    int all = 1, named = 1;
    for (int id = 0; id < BERTH_SQL__COUNT; id++) {
        const berth_db__stmt_t *st = berth_db__stmt(id);
        if (st == NULL || st->id != id || st->sql == NULL || st->sql[0] == '\0') {
            all = 0;
            printf("# %d (%s): no statement\n", id, berth_sql_name(id));
        }
        if (strncmp(berth_sql_name(id), "BERTH_", 6) != 0)
            named = 0;
    }
    ok(all, "every one of the %d ids finds its statement", (int)BERTH_SQL__COUNT);
    ok(named, "every id has its name");
    ok(berth_db__stmt(-1) == NULL && berth_db__stmt(BERTH_SQL__COUNT) == NULL && berth_db__stmt(1 << 20) == NULL,
       "ids outside the list find nothing");
    ok(strcmp(berth_sql_name(BERTH_SQL__COUNT), "?") == 0 && strcmp(berth_sql_name(-1), "?") == 0, "and have no name");
    ok(strcmp(berth_sql_name(BERTH_SQL_REPO_ID), "BERTH_SQL_REPO_ID") == 0 &&
           strcmp(berth_sql_name(BERTH_Q_PING), "BERTH_Q_PING") == 0,
       "names are the ids' spelling");

    /* a collision: a second table defines an id the registry already has */
    n = real_tables(t, (size_t)-1);
    memset(extra, 0, sizeof(extra));
    extra[BERTH_SQL_REPO_ID] = (berth_db__stmt_t){BERTH_SQL_REPO_ID, "SELECT 1", 0};
    t[n] = extra;
    berth_err_clear(&err);
    ok(berth_db__check(t, n + 1, &err) == BERTH_ERROR && strstr(err.msg, "BERTH_SQL_REPO_ID is defined twice") != NULL,
       "a statement defined in two files is refused (%s)", err.msg);

    /* a hole: an id whose text was removed */
    size_t o = owner(BERTH_Q_PING);
    n = real_tables(t, o);
    memset(&scratch[BERTH_Q_PING], 0, sizeof(scratch[0]));
    berth_err_clear(&err);
    ok(o < n && berth_db__check(t, n, &err) == BERTH_ERROR && strstr(err.msg, "BERTH_Q_PING has no SQL text") != NULL,
       "an id without SQL is refused (%s)", err.msg);

    /* an entry filed under one id that says another (written by hand instead of BERTH_DB__STMT) */
    o = owner(BERTH_SQL_CATALOG);
    n = real_tables(t, o);
    scratch[BERTH_SQL_CATALOG].id = BERTH_SQL_TAGS_LIST;
    berth_err_clear(&err);
    ok(o < n && berth_db__check(t, n, &err) == BERTH_ERROR && strstr(err.msg, "BERTH_SQL_CATALOG") != NULL &&
           strstr(err.msg, "carries id") != NULL,
       "an entry carrying another slot's id is refused (%s)", err.msg);

    /* a parameter count the text disagrees with: PostgreSQL would refuse every execution */
    o = owner(BERTH_SQL_TAGS_LIST);
    n = real_tables(t, o);
    scratch[BERTH_SQL_TAGS_LIST].nparams = 2;
    berth_err_clear(&err);
    ok(o < n && berth_db__check(t, n, &err) == BERTH_ERROR && strstr(err.msg, "declares 2 parameters, its text uses 3") != NULL,
       "a wrong parameter count is refused (%s)", err.msg);

    /* the unmodified copies pass, so the failures above are the breakages' doing */
    n = real_tables(t, owner(BERTH_SQL_TAGS_LIST));
    berth_err_clear(&err);
    ok(berth_db__check(t, n, &err) == 0, "an unmodified copy passes");

    /* run with an id outside the list: an error before the connection is touched (it has none here) */
    berth_dbconn_t c;
    memset(&c, 0, sizeof(c));
    berth_err_clear(&err);
    PGresult *res = berth_db__run(&c, (berth_sql_id_t)(BERTH_SQL__COUNT + 7), NULL, NULL, NULL, 0, &err);
    ok(res == NULL && err.code == BERTH_ERROR && err.oci == BERTH_OCI_INTERNAL, "berth_db__run(unknown id): INTERNAL, no call");
    berth_err_clear(&err);
    res = berth_db__run(&c, (berth_sql_id_t)-3, NULL, NULL, NULL, 0, &err);
    ok(res == NULL && err.code == BERTH_ERROR, "berth_db__run(negative id): INTERNAL, no call");

    /* berth_db_api runs the JSON-shaped queries only: every BERTH_Q_ id is one, no other id is */
    int shaped = 1;
    for (int id = 0; id < BERTH_SQL__COUNT; id++) {
        int rest = strncmp(berth_sql_name(id), "BERTH_Q_", 8) == 0;
        int json = berth_db__api_stmts[id].sql != NULL || berth_db__replication_stmts[id].sql != NULL ||
                   berth_db__gc_stmts[id].sql != NULL || berth_db__gateway_stmts[id].sql != NULL ||
                   (berth_db__webhook_stmts[id].sql != NULL && id != BERTH_SQL_WEBHOOK_ENQUEUE);
        if (rest != json) {
            shaped = 0;
            printf("# %s: %s\n", berth_sql_name(id),
                   rest ? "not in sql/api.c, sql/replication.c, sql/gc.c, sql/gateway.c or sql/webhook.c"
                        : "a JSON query without BERTH_Q_");
        }
    }
    ok(shaped,
       "the BERTH_Q_ ids are exactly the JSON statements of sql/api.c, sql/replication.c, sql/gc.c, sql/gateway.c and sql/webhook.c");
    berth_db_json_t out;
    berth_err_clear(&err);
    ok(berth_db_api(&c, BERTH_SQL_REPO_ID, NULL, &out, &err) == BERTH_ERROR && out.json == NULL,
       "berth_db_api refuses a statement of another shape, without a call");
    berth_err_clear(&err);
    ok(berth_db_api(&c, (berth_q_t)BERTH_SQL__COUNT, NULL, &out, &err) == BERTH_ERROR, "and an id past the list");

    return tap_done();
}
