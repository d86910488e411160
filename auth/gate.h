/*
 * The gatekeeper: one decision for every /v2 request (h2o routes and uploads alike). A request names the
 * scopes it needs; the caller presents a Bearer token, Basic credentials (robots, CI) or nothing. Tokens and
 * credentials that verified once are remembered briefly, so the hot pull path decides without SQL, argon2 or
 * an ECDSA verification (berth_gate_fast). Anonymous requests for a private or absent repository get the same
 * challenge, so existence does not leak.
 */
#ifndef BERTH_AUTH_GATE_H
#define BERTH_AUTH_GATE_H

#include <stddef.h>

#include "auth/scope.h"
#include "auth/service.h"
#include "registry/core/resp.h"

typedef enum { BERTH_GATE_ALLOW = 0, BERTH_GATE_REFUSE = 1, BERTH_GATE_UNKNOWN = 2 } berth_gate_t;

/**
 * Decide without blocking (event loop): ALLOW or REFUSE (resp filled) when a remembered Bearer token settles it,
 * UNKNOWN when berth_gate_check must run on a worker. `need` may be NULL (the base endpoint: any valid caller).
 */
berth_gate_t berth_gate_fast(berth_authsvc_t *a, const char *authorization, size_t len, const berth_scope_t *need,
                             berth_resp_t *resp);
/** Decide, blocking if needed (SQL, argon2, ECDSA). ALLOW, or REFUSE with the 401/403 answer in resp. */
berth_gate_t berth_gate_check(berth_authsvc_t *a, const char *authorization, size_t len, const berth_scope_t *need,
                              berth_resp_t *resp);
/** The scope a /v2 request needs; returns 0 when it needs none beyond a valid caller (base endpoint). */
int berth_gate_required(berth_scope_t *out, int route_kind, const char *name, const char *method);

#endif
