/* Background housekeeping: abandoned upload sessions and their files are purged after a maximum idle age, and
 * whatever else is passed as the hook runs on the same beat (the edge's slices of collected blobs). */
#ifndef BERTH_SERVICE_JANITOR_H
#define BERTH_SERVICE_JANITOR_H

#include "registry/service/registry.h"

typedef struct st_berth_janitor_t berth_janitor_t;

/** More housekeeping, given the janitor's database connection */
typedef void (*berth_janitor_hook_fn)(berth_dbconn_t *c, void *arg);

/**
 * Run a purge every `interval_s` seconds for sessions idle longer than `max_age_s`, then `hook` (NULL: none); NULL
 * if the thread cannot start.
 */
berth_janitor_t *berth_janitor_start(berth_registry_t *reg, long interval_s, long max_age_s, berth_janitor_hook_fn hook,
                                     void *hook_arg);
void berth_janitor_stop(berth_janitor_t *j);
/** One purge pass (also used by tests through the janitor thread); returns the number of files removed. */
int berth_janitor_purge(berth_registry_t *reg, long max_age_s);

#endif
