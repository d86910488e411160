/*
 * Tag retention runs (Harbor's /retentions executions): a background thread (core/bgloop) starts the runs of
 * scheduled policies, claims queued executions through PostgreSQL (FOR UPDATE SKIP LOCKED and a lease, so several
 * berthd on one database run each once), decides per repository what goes (retention_plan.h) and deletes it through
 * the same delete as the API (berth_db_manifest_delete: immutable tag rules, change events, audit). A dry run
 * decides the same way, including the immutability check, and deletes nothing.
 */
#ifndef BERTH_SERVICE_RETENTION_H
#define BERTH_SERVICE_RETENTION_H

#include "registry/service/registry.h"

/** Start the thread; 0 or BERTH_ERROR. */
int berth_retention_start(berth_registry_t *reg);
/** Stop it (a run in progress ends at its next repository and is taken up again by the next start). */
void berth_retention_stop(void);
/** Look for queued executions now (after POST …/executions). Safe before start and after stop. */
void berth_retention_wake(void);

#endif
