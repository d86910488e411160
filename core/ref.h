/* The OCI grammar for repository names, tags and references, and the /v2 route parser. */
#ifndef BERTH_CORE_REF_H
#define BERTH_CORE_REF_H

#include <stddef.h>

#include "core/err.h"

#define BERTH_NAME_MAX 255
#define BERTH_TAG_MAX 128
#define BERTH_REF_MAX 140

/** 1 if `name` matches [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)* and is ≤ 255 bytes. */
int berth_ref_name_valid(const char *name, size_t len);
/** 1 if `tag` matches [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}. */
int berth_ref_tag_valid(const char *tag, size_t len);
/** Length of the first path component (the project) of a valid name. */
size_t berth_ref_project_len(const char *name, size_t len);

/** An image reference as people write it: "[host/]name[:tag|@digest]". */
typedef struct {
    char host[256]; /* empty when the reference names no registry */
    char name[BERTH_NAME_MAX + 1];
    char ref[BERTH_REF_MAX + 1]; /* "latest" when none was given */
    int ref_is_digest;
} berth_image_ref_t;

/**
 * Parse an image reference. A first component containing '.' or ':' (or exactly "localhost") is the registry
 * host, as docker reads it. The name, tag and digest are held to the OCI grammar. Returns 0 or -1.
 */
int berth_ref_image_parse(berth_image_ref_t *out, const char *s);

typedef enum {
    BERTH_ROUTE_NONE = 0,
    BERTH_ROUTE_BASE,      /* /v2/ */
    BERTH_ROUTE_CATALOG,   /* /v2/_catalog */
    BERTH_ROUTE_MANIFEST,  /* /v2/<name>/manifests/<ref> */
    BERTH_ROUTE_BLOB,      /* /v2/<name>/blobs/<digest> */
    BERTH_ROUTE_UPLOAD,    /* /v2/<name>/blobs/uploads/[<id>] */
    BERTH_ROUTE_TAGS,      /* /v2/<name>/tags/list */
    BERTH_ROUTE_REFERRERS, /* /v2/<name>/referrers/<digest> */
    BERTH_ROUTE__COUNT
} berth_route_kind_t;

typedef struct st_berth_route_t {
    berth_route_kind_t kind;
    char name[BERTH_NAME_MAX + 1];
    char ref[BERTH_REF_MAX + 1]; /* tag or digest; the upload id for UPLOAD (empty: new session) */
    int ref_is_digest;
} berth_route_t;

/**
 * Parse a raw request path (no query string, not percent-decoded) under /v2.
 * Names are matched from the right so that a repository may itself contain "blobs" or "manifests".
 * Any '%' in the path is refused: no valid name needs encoding, and decoding would let "%2e%2e" through.
 * Returns 0; BERTH_ENOTFOUND for a path that is no route; BERTH_EINVAL with NAME_INVALID, TAG_INVALID or
 * DIGEST_INVALID for a route whose parts break the grammar.
 */
int berth_route_parse(berth_route_t *out, const char *path, size_t len, berth_err_t *err);
/** Short label for metrics and logs. */
const char *berth_route_label(berth_route_kind_t kind);

#endif
