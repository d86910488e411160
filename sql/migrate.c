#include "sql/migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "sql/db_internal.h"
#include "sql/migrations.h"

/* 0x6265727468 = "berth": the key of the migration advisory lock */
#define LOCK_SQL "SELECT pg_advisory_lock(6650229960)"
#define UNLOCK_SQL "SELECT pg_advisory_unlock(6650229960)"

static int applied(berth_dbconn_t *c, int version, const char *sum, int *found, berth_err_t *err)
{
    char v[16];
    snprintf(v, sizeof(v), "%d", version);
    const char *params[] = {v};
    PGresult *res = PQexecParams(c->pg, "SELECT sha256 FROM schema_migrations WHERE version = $1", 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        PQclear(res);
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "cannot read schema_migrations");
    }
    *found = PQntuples(res) == 1;
    int rc = 0;
    if (*found && strcmp(PQgetvalue(res, 0, 0), sum) != 0)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "migration %d was changed after it was applied", version);
    PQclear(res);
    if (rc != 0 && err != NULL)
        err->code = BERTH_ECONFLICT;
    return rc;
}

/*
 * Databases made before versions were decimal recorded 0010 as 8 (octal), so 0050 sat on 40, which is 0040's
 * number now: the file name decides. Mismatched rows are parked at -version first, so no renumbering collides.
 */
static int renumber(berth_dbconn_t *c, berth_err_t *err)
{
    static const char *const steps[] = {
        "UPDATE schema_migrations SET version = -version WHERE name = $2 AND version <> $1::int AND version > 0",
        "UPDATE schema_migrations SET version = $1::int WHERE name = $2 AND version < 0",
    };
    int rc = berth_db_begin(c, err);
    for (size_t s = 0; rc == 0 && s < 2; s++)
        for (size_t i = 0; rc == 0 && i < berth_migrations_count; i++) {
            char v[16];
            snprintf(v, sizeof(v), "%d", berth_migrations[i].version);
            const char *params[] = {v, berth_migrations[i].name};
            PGresult *res = PQexecParams(c->pg, steps[s], 2, NULL, params, NULL, NULL, 0);
            if (PQresultStatus(res) != PGRES_COMMAND_OK)
                rc = berth_err_set(err, BERTH_OCI_INTERNAL, "cannot renumber migration %s", berth_migrations[i].name);
            PQclear(res);
        }
    if (rc != 0) {
        berth_db_rollback(c);
        return rc;
    }
    return berth_db_commit(c, err);
}

static int apply_all(berth_dbconn_t *c, berth_err_t *err)
{
    int rc = berth_db_exec(c,
                           "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text NOT NULL, "
                           "sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                           err);
    if (rc != 0 || (rc = renumber(c, err)) != 0)
        return rc;
    int newest = 0;
    for (size_t i = 0; i < berth_migrations_count; i++) {
        const berth_migration_t *m = &berth_migrations[i];
        berth_digest_t sum;
        berth_digest_of(&sum, BERTH_DIGEST_SHA256, m->sql, strlen(m->sql));
        int found = 0;
        if ((rc = applied(c, m->version, sum.str, &found, err)) != 0)
            return rc;
        newest = m->version;
        if (found)
            continue;
        berth_log_info("applying migration %s", m->name);
        if ((rc = berth_db_begin(c, err)) != 0 || (rc = berth_db_exec(c, m->sql, err)) != 0)
            goto Fail;
        char v[16];
        snprintf(v, sizeof(v), "%d", m->version);
        const char *params[] = {v, m->name, sum.str};
        PGresult *res = PQexecParams(c->pg, "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)", 3, NULL,
                                     params, NULL, NULL, 0);
        int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        if (!ok) {
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "cannot record migration %s", m->name);
            goto Fail;
        }
        if ((rc = berth_db_commit(c, err)) != 0)
            return rc;
        continue;
    Fail:
        berth_log_err("migration %s failed: %s", m->name, err != NULL ? err->msg : "");
        berth_db_rollback(c);
        return rc;
    }
    PGresult *res = PQexec(c->pg, "SELECT coalesce(max(version), 0) FROM schema_migrations");
    int db_newest = PQresultStatus(res) == PGRES_TUPLES_OK ? (int)strtol(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    PQclear(res);
    if (db_newest > newest) {
        berth_err_set(err, BERTH_OCI_INTERNAL, "database schema %d is newer than this berthd (%d)", db_newest, newest);
        if (err != NULL)
            err->code = BERTH_ECONFLICT;
        return BERTH_ECONFLICT;
    }
    return 0;
}

int berth_db_migrate(berth_db_t *db, berth_err_t *err)
{
    berth_dbconn_t *c = berth_db_acquire(db, err);
    if (c == NULL)
        return err != NULL ? err->code : BERTH_EUNAVAIL;
    int rc = berth_db_exec(c, LOCK_SQL, err);
    if (rc == 0) {
        rc = apply_all(c, err);
        berth_db_exec(c, UNLOCK_SQL, NULL);
    }
    berth_db_release(db, c);
    return rc;
}
