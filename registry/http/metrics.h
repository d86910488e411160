/* Process-wide counters rendered as Prometheus text at /metrics. Lock-free (relaxed atomics). */
#ifndef BERTH_HTTP_METRICS_H
#define BERTH_HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/route.h"
#include "registry/storage/store.h"
#include "sql/db.h"

/** Count one finished request; bytes_in/out are body bytes handled by berthd itself. */
void berth_metrics_request(berth_route_kind_t route, const char *method, int status, uint64_t bytes_in, uint64_t bytes_out);
/** Render everything (caller frees). `db`, `store` and the queue length add gauges. */
char *berth_metrics_render(berth_db_t *db, berth_store_t *store, long worker_queue, long auth_queue, size_t *len_out);
/** Count a request shed because the auth workers' queue was full. */
void berth_metrics_auth_shed(void);

#endif
