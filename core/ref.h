/* The OCI grammar for repository names, tags and references (the /v2 routes are in core/route.h). */
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

#endif
