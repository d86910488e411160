/*
 * Starting runs: a manual or scheduled run lists the whole source (berth_repl_trigger in replication.h); an event
 * starts one run with one task per event-based policy that takes it. Either way a delegated policy is checked
 * again first, since its owner's rights may have changed since it was saved.
 */
#ifndef BERTH_REPLICATION_TRIGGER_H
#define BERTH_REPLICATION_TRIGGER_H

#include "sql/db.h"

/** The database the delegation check asks (set by berth_repl_start). */
void berth_repl_trigger_init(berth_db_t *db);
/** A push or delete ("push"/"delete") of `repo:tag` here: a run for every event-based policy it applies to. */
void berth_repl_trigger_event(const char *operation, const char *repo, const char *tag);
/** Wake the workers: new tasks are waiting (engine.c). */
void berth_repl__wake(void);

#endif
