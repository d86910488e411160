/* The event thread (events.c): berth_repl_event's queue and the once-a-minute check of scheduled policies. */
#ifndef BERTH_REPLICATION_EVENTS_H
#define BERTH_REPLICATION_EVENTS_H

#include "core/err.h"

/** Start the thread; from then on berth_repl_event queues events. 0, or BERTH_ERROR when no thread starts. */
int berth_repl_events_start(void);
/** Stop and join it. Events still queued are dropped, as before a restart. */
void berth_repl_events_stop(void);

#endif
