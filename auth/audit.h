/*
 * The audit log: who did what, when, from where, with what result. Events are queued in memory and written
 * to PostgreSQL in batches by a thread of their own, so recording a pull costs the event loop a mutex and a
 * copy, never a round trip. Events before berth_audit_start or past a full queue are dropped and counted.
 */
#ifndef BERTH_AUTH_AUDIT_H
#define BERTH_AUTH_AUDIT_H

#include "sql/db.h"

int berth_audit_start(berth_db_t *db);
/** Write what is queued and stop the writer. */
void berth_audit_stop(void);
/**
 * Record one event. `operation`: push, pull, delete, create, update, login...; `resource_type`: artifact, tag,
 * repository, project, member, robot, user, session, token. `project` may be NULL. Strings are copied.
 */
void berth_audit(const char *username, const char *remote, const char *operation, const char *resource_type, const char *resource,
                 const char *project, int ok, const char *detail);
/**
 * A pull of repo@digest (requested as `ref`): also bumps pull counts when written. Repeats by the same caller
 * from the same address within 10 s are one row with a count (flushed when the window closes).
 */
void berth_audit_pull(const char *username, const char *remote, const char *repo, const char *ref, const char *digest);
/** Events dropped since start (queue full or database unreachable). */
unsigned long berth_audit_dropped(void);

#endif
