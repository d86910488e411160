/*
 * Berth's own artifacts (ISA scan verdicts, squashfs root filesystems): blobs written like an upload and a referrer
 * manifest stored through the ordinary manifest-store path (berth_db_manifest_put), so garbage collection, quotas,
 * replication and the referrers API treat them like anything pushed. Each emits the change events a push would
 * (surface INTERNAL). Blocking: worker or background threads only.
 */
#ifndef BERTH_SERVICE_ARTIFACT_PUSH_H
#define BERTH_SERVICE_ARTIFACT_PUSH_H

#include <jansson.h>
#include <stdint.h>

#include "core/digest.h"
#include "registry/service/registry.h"

/** Store `len` bytes as a blob linked into `repo`. 0 with *d, or BERTH_ERROR. */
int berth_artifact_blob_bytes(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const void *data, size_t len,
                              berth_digest_t *d);
/**
 * Store the file behind `fd` (read from offset 0 to its end; it stays the caller's) as a blob linked into `repo`,
 * through an upload session of the store's driver. *d and *size receive what was stored.
 */
int berth_artifact_blob_file(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, int fd, berth_digest_t *d, int64_t *size,
                             berth_err_t *err);
/**
 * Store an OCI artifact manifest in `repo` whose subject is the manifest `subject` (its size and media type as
 * stored): the empty config, `layers` and `annotations` (borrowed). *digest_out receives its digest.
 */
int berth_artifact_push_referrer(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *artifact_type,
                                 json_t *layers, json_t *annotations, const char *subject, size_t subject_size,
                                 const char *subject_mt, berth_digest_t *digest_out, berth_err_t *err);

#endif
