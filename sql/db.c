#include "sql/db_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "registry/core/log.h"

struct st_berth_db_t {
    char *conninfo;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    berth_dbconn_t *conns;
    berth_dbconn_t *free_list;
    int size, in_use;
    unsigned long waits, errors;
};

/* server NOTICEs ("relation exists, skipping") are not for stdout */
static void on_notice(void *arg, const char *msg)
{
    berth_log_debug("postgres: %.*s", (int)strcspn(msg, "\n"), msg);
}

/* connect_timeout comes first so that a value in the user's conninfo overrides it */
static PGconn *connect_pg(const char *conninfo)
{
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"5", "berthd", conninfo, NULL};
    return PQconnectdbParams(keys, vals, 1);
}

static int ensure_connected(berth_db_t *db, berth_dbconn_t *c, berth_err_t *err)
{
    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK)
        return 0;
    if (c->pg != NULL)
        PQfinish(c->pg);
    memset(c->prepared, 0, sizeof(c->prepared));
    c->in_tx = 0;
    c->pg = connect_pg(db->conninfo);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        /* PQerrorMessage never contains the password */
        char msg[200];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c->pg));
        msg[strcspn(msg, "\n")] = '\0';
        PQfinish(c->pg);
        c->pg = NULL;
        berth_log_warn("database unreachable: %s", msg);
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database unreachable: %s", msg);
    }
    PQsetNoticeProcessor(c->pg, on_notice, NULL);
    return 0;
}

int berth_db_open(berth_db_t **out, const char *conninfo, int size, berth_err_t *err)
{
    berth_db_t *db = calloc(1, sizeof(*db));
    db->conninfo = strdup(conninfo);
    db->size = size < 1 ? 1 : size;
    db->conns = calloc((size_t)db->size, sizeof(*db->conns));
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cv, NULL);
    for (int i = db->size - 1; i >= 0; i--) {
        db->conns[i].next_free = db->free_list;
        db->free_list = &db->conns[i];
    }
    int rc = ensure_connected(db, &db->conns[0], err);
    if (rc != 0) {
        berth_db_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

void berth_db_close(berth_db_t *db)
{
    if (db == NULL)
        return;
    for (int i = 0; i < db->size; i++)
        if (db->conns[i].pg != NULL)
            PQfinish(db->conns[i].pg);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cv);
    free(db->conns);
    free(db->conninfo);
    free(db);
}

berth_dbconn_t *berth_db_acquire(berth_db_t *db, berth_err_t *err)
{
    pthread_mutex_lock(&db->mu);
    if (db->free_list == NULL)
        db->waits++;
    while (db->free_list == NULL)
        pthread_cond_wait(&db->cv, &db->mu);
    berth_dbconn_t *c = db->free_list;
    db->free_list = c->next_free;
    db->in_use++;
    pthread_mutex_unlock(&db->mu);
    if (ensure_connected(db, c, err) != 0) {
        berth_db_release(db, c);
        pthread_mutex_lock(&db->mu);
        db->errors++;
        pthread_mutex_unlock(&db->mu);
        return NULL;
    }
    return c;
}

void berth_db_release(berth_db_t *db, berth_dbconn_t *c)
{
    if (c->in_tx)
        berth_db_rollback(c);
    pthread_mutex_lock(&db->mu);
    c->next_free = db->free_list;
    db->free_list = c;
    db->in_use--;
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

void berth_db_stats(berth_db_t *db, int *size, int *in_use, unsigned long *waits, unsigned long *errors)
{
    pthread_mutex_lock(&db->mu);
    *size = db->size;
    *in_use = db->in_use;
    *waits = db->waits;
    *errors = db->errors;
    pthread_mutex_unlock(&db->mu);
}

/* Expected SQL outcomes that callers branch on; if one reaches a client it is a 500. */
static int with_code(berth_err_t *err, int code, const char *msg)
{
    berth_err_set(err, BERTH_OCI_INTERNAL, "%s", msg);
    if (err != NULL)
        err->code = code;
    return code;
}

static int map_error(berth_dbconn_t *c, PGresult *res, berth_err_t *err)
{
    if (PQstatus(c->pg) != CONNECTION_OK) {
        berth_log_warn("database connection lost");
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database connection lost");
    }
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c->pg);
    if (state != NULL && strcmp(state, "23505") == 0)
        return with_code(err, BERTH_EEXISTS, "unique violation");
    if (state != NULL && strcmp(state, "23503") == 0)
        return with_code(err, BERTH_ECONFLICT, "foreign key violation");
    if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        return with_code(err, BERTH_ERETRY, "transaction conflict");
    if (state != NULL && (strncmp(state, "57P", 3) == 0 || strncmp(state, "08", 2) == 0))
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "database unavailable");
    berth_log_err("sql error %s: %.200s", state != NULL ? state : "-", msg);
    return berth_err_set(err, BERTH_OCI_INTERNAL, "database error");
}

PGresult *berth_db__run(berth_dbconn_t *c, const berth_db__stmt_t *st, const char *const *values, const int *lengths,
                        const int *formats, int binary_result, berth_err_t *err)
{
    char name[16];
    snprintf(name, sizeof(name), "s%d", st->id);
    if (!c->prepared[st->id]) {
        PGresult *p = PQprepare(c->pg, name, st->sql, st->nparams, NULL);
        if (PQresultStatus(p) != PGRES_COMMAND_OK) {
            map_error(c, p, err);
            PQclear(p);
            return NULL;
        }
        PQclear(p);
        c->prepared[st->id] = 1;
    }
    PGresult *res = PQexecPrepared(c->pg, name, st->nparams, values, lengths, formats, binary_result);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        map_error(c, res, err);
        PQclear(res);
        return NULL;
    }
    return res;
}

int berth_db_exec(berth_dbconn_t *c, const char *sql, berth_err_t *err)
{
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType s = PQresultStatus(res);
    int rc = 0;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
        rc = map_error(c, res, err);
    PQclear(res);
    return rc;
}

int berth_db_begin(berth_dbconn_t *c, berth_err_t *err)
{
    int rc = berth_db_exec(c, "BEGIN", err);
    if (rc == 0)
        c->in_tx = 1;
    return rc;
}

int berth_db_commit(berth_dbconn_t *c, berth_err_t *err)
{
    c->in_tx = 0;
    return berth_db_exec(c, "COMMIT", err);
}

void berth_db_rollback(berth_dbconn_t *c)
{
    c->in_tx = 0;
    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK)
        berth_db_exec(c, "ROLLBACK", NULL);
}
