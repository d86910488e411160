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
#include "core/resp.h"
#include "core/route.h"

#define BERTH_GATE_WHO_MAX 256

typedef enum { BERTH_GATE_ALLOW = 0, BERTH_GATE_REFUSE = 1, BERTH_GATE_UNKNOWN = 2 } berth_gate_t;

/**
 * Decide without blocking (event loop): ALLOW or REFUSE (resp filled) when a remembered Bearer token settles it,
 * UNKNOWN when berth_gate_check must run on a worker. `need` may be NULL (the base endpoint: any valid caller).
 * On ALLOW, `who` (BERTH_GATE_WHO_MAX bytes, may be NULL) names the caller ("" for anonymous).
 */
berth_gate_t berth_gate_fast(const char *authorization, size_t len, const berth_scope_t *need, char *who);
/**
 * Decide, blocking if needed (SQL, argon2, ECDSA). ALLOW (with `who` as above), or REFUSE with the 401/403
 * answer in resp. `remote` is the client address for the audit log of failures.
 */
berth_gate_t berth_gate_check(berth_authsvc_t *a, const char *authorization, size_t len, const berth_scope_t *need,
                              const char *remote, berth_resp_t *resp, char *who);
#define BERTH_GATE_SCOPES_MAX 4
/**
 * berth_gate_check for a request that needs several scopes at once (a mount: push here, pull on `from`); the
 * 401 challenge names all of them. n = 0 is the base endpoint.
 */
berth_gate_t berth_gate_check_all(berth_authsvc_t *a, const char *authorization, size_t len, const berth_scope_t *need, size_t n,
                                  const char *remote, berth_resp_t *resp, char *who);
/**
 * Who an API caller is, from Basic credentials (users and robots; remembered like /v2 decisions). 0 with *out,
 * BERTH_ENOTFOUND without credentials, BERTH_EUNAUTH for bad ones, BERTH_ERETRY while throttled, BERTH_EINVAL
 * for a malformed header or a Bearer token (registry tokens are not API credentials).
 */
int berth_gate_identity(berth_authsvc_t *a, const char *authorization, size_t len, const char *remote, berth_db_user_t *out);
/**
 * Forget every remembered decision (any thread): a change that can take a right away committed, here or on another
 * instance (the NOTIFY "!auth", sql/migrations/0191), or notifications may have been missed (the channel was down).
 */
void berth_gate_forget_all(void);
/**
 * The scope a routed /v2 request needs, from its row of the route table (core/route.h); returns 0 when it needs
 * none beyond a valid caller (base endpoint).
 */
int berth_gate_required(berth_scope_t *out, const berth_route_t *route);

#endif
