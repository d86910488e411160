/* The registry's use cases over the metadata database and the blob store. Blocking: call from worker threads. */
#ifndef BERTH_SERVICE_REGISTRY_H
#define BERTH_SERVICE_REGISTRY_H

#include <stddef.h>

#include "core/resp.h"
#include "core/route.h"
#include "registry/storage/store.h"
#include "sql/db.h"

struct st_berth_authsvc_t;

typedef struct st_berth_registry_t {
    berth_db_t *db;
    struct st_berth_authsvc_t *auth; /* token service (auth/service.h) */
    berth_store_t *store;
    int isa_view_disabled; /* isa.view: false — /v2/_isa/… answers 404, so containerd falls back to the plain path */
} berth_registry_t;

/** A parsed /v2 request, already routed. Pointers are borrowed for the duration of the call. */
typedef struct st_berth_v2_req_t {
    const char *method;
    berth_route_t route;
    const char *query; /* without '?', may be NULL */
    size_t query_len;
    const char *accept;
    size_t accept_len;
    const char *content_type;
    const char *body;
    size_t body_len;
    const char *who;    /* the caller as the gate named it ("" anonymous), for the audit log */
    const char *remote; /* client address */
    /* proxy-cache projects (proxy.h): where a GET that needs the upstream says so instead of answering (NULL:
     * answer from what is held); proxy_done once that fetch ran; from_upstream for the proxy's own stores */
    struct st_berth_proxy_need_t *need;
    int proxy_done;
    int from_upstream;
} berth_v2_req_t;

/**
 * Answer a /v2 request routed to any route but the uploads' (see upload.h) by its route id (berth_route_select).
 * Fills `resp`; never fails without a response, except that a pull from a proxy-cache project may instead fill
 * *req->need (kind not BERTH_PROXY_NONE, `resp` empty): fetch it (berth_proxy_fetch), then ask again.
 */
void berth_v2_handle(berth_registry_t *reg, const berth_v2_req_t *req, berth_resp_t *resp);

/** 1 when berth_v2_handle has a handler for the route: every route but the upload listener's. */
int berth_v2_answers(berth_route_id_t id);

/**
 * Answer a manifest or blob GET/HEAD from the read cache without blocking (safe on an event loop).
 * Returns 1 with `resp` filled, or 0: run berth_v2_handle on a worker instead.
 */
int berth_v2_cached(berth_registry_t *reg, const berth_v2_req_t *req, berth_resp_t *resp);

#endif
