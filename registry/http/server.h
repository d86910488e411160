/* h2o event loops serving everything except upload bodies (JSON, manifests, blob-send decisions, /metrics). */
#ifndef BERTH_HTTP_SERVER_H
#define BERTH_HTTP_SERVER_H

#include "registry/http/worker.h"
#include "registry/service/registry.h"

typedef struct st_berth_server_t berth_server_t;

#define BERTH_SERVER_LISTENERS_MAX 2

/**
 * Start `nloops` event-loop threads, each accepting on every one of the `nfds` listening descriptors (the server
 * owns them from here; registry/http/internal_listen.h makes them). Blocking work goes to `workers`; results come
 * back through each loop's h2o_multithread queue.
 */
int berth_server_start(berth_server_t **out, berth_registry_t *reg, berth_workers_t *workers, berth_workers_t *auth_workers,
                       int auth_queue, int nloops, const int *fds, int nfds);
/** Stop accepting, let the loops finish, join them. */
void berth_server_stop(berth_server_t *s);

#endif
