/*
 * ISA variants in the registry (issue #4): push-time checks of indexes, resolution of an image for a node,
 * the variant table of an artifact, and the derived single-variant index the ISA view path serves.
 * Blocking (SQL, storage): worker threads only.
 */
#ifndef BERTH_SERVICE_ISA_H
#define BERTH_SERVICE_ISA_H

#include <jansson.h>

#include "core/resp.h"
#include "registry/isa/index.h"
#include "registry/service/registry.h"

/**
 * Check an index being pushed to `repo` under its project's ISA policy. 0 with *rows_out (JSON rows to store,
 * malloc'd, NULL when the index is not ISA-tagged) and up to BERTH_ISA_MAX_NOTES warnings added to resp as
 * `Warning: 299 - "isa: …"`; or BERTH_EINVAL with MANIFEST_INVALID in err.
 */
int berth_isa_push_check(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *body, size_t len, char **rows_out,
                         berth_resp_t *resp, berth_err_t *err);

/**
 * Resolve `repo`:`ref` for one node description (JSON object: os, architecture, level, flags, labels, target)
 * and policy (JSON object or NULL: max_level, prefer, allow_unverified). Fills *result with the response body
 * described in the design brief and returns the HTTP status (200, 400, 404, 409).
 */
int berth_isa_resolve(berth_registry_t *reg, berth_dbconn_t *c, const char *host, const char *repo, const char *ref, json_t *node,
                      json_t *policy, json_t **result);

/** The variant table of an artifact as JSON (with scan status); 404 / MANIFEST_UNKNOWN in err when absent. */
/** The platform (architecture, os, variant; "" when absent) in the config blob of an image manifest. Returns 0 or -1. */
int berth_isa_config_platform(berth_registry_t *reg, const char *manifest, size_t mlen, char arch[32], char os[32],
                              char variant[32]);
int berth_isa_table(berth_dbconn_t *c, const char *repo, const char *ref, json_t **out, berth_err_t *err);

/** /v2/_isa/<view>/<name>/manifests/<ref>: a derived index keeping, per arch, the best variant for `view`. */
void berth_isa_view(berth_registry_t *reg, const char *view, const berth_v2_req_t *rq, berth_resp_t *resp);

#endif
