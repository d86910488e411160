/* Manifest and index validation: what a PUT may store, and which blobs/manifests it references. */
#ifndef BERTH_CORE_MANIFEST_H
#define BERTH_CORE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/err.h"

#define BERTH_MANIFEST_MAX (4u << 20) /* distribution-spec: registries SHOULD accept at least 4 MiB */

#define BERTH_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define BERTH_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define BERTH_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define BERTH_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

typedef enum { BERTH_REF_BLOB = 0, BERTH_REF_MANIFEST = 1 } berth_ref_kind_t;

typedef struct st_berth_manifest_ref_t {
    berth_ref_kind_t kind;
    char digest[BERTH_DIGEST_MAX];
    int64_t size;
} berth_manifest_ref_t;

typedef struct st_berth_manifest_info_t {
    char *media_type;    /* as stored and served */
    char *artifact_type; /* artifactType, else config.mediaType of an image manifest; may be NULL */
    char *subject;       /* subject digest, or NULL */
    char *annotations;   /* compact JSON object, or NULL */
    int is_index;
    berth_manifest_ref_t *refs; /* blobs and child manifests that must exist (foreign layers excluded) */
    size_t nrefs;
} berth_manifest_info_t;

/**
 * Validate `body` against its Content-Type (`content_type` may be NULL) and fill `out`.
 * Returns 0, or BERTH_EINVAL / BERTH_ETOOBIG with MANIFEST_INVALID, SIZE_INVALID or DIGEST_INVALID in err.
 * On success the caller owns `out` and releases it with berth_manifest_info_dispose().
 */
int berth_manifest_parse(berth_manifest_info_t *out, const char *body, size_t len, const char *content_type, berth_err_t *err);
void berth_manifest_info_dispose(berth_manifest_info_t *info);
/** 1 when a client's Accept header admits `media_type` (NULL/empty Accept admits everything). */
int berth_manifest_accepts(const char *accept, size_t accept_len, const char *media_type);

#endif
