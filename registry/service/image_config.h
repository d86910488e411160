/*
 * An image manifest's config blob (architecture, os, entrypoint, env, labels, build history), read from storage for
 * the REST API (Harbor's extra_attrs and additions/build_history) and for the ISA push checks.
 * Blocking (storage): worker threads only.
 */
#ifndef BERTH_SERVICE_IMAGE_CONFIG_H
#define BERTH_SERVICE_IMAGE_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "registry/service/registry.h"

#define BERTH_IMAGE_CONFIG_MAX (1 << 20) /* configs are a few KiB; larger blobs are not read */

/** A small blob's bytes (at most BERTH_IMAGE_CONFIG_MAX), NUL-terminated and malloc'd, or NULL when absent. */
char *berth_image_config_blob(berth_registry_t *reg, const char *digest, size_t *len);

/**
 * The image config the image manifest `manifest` names, parsed (*out, a new reference). BERTH_ENOTFOUND when the
 * manifest names no image config (an index, or an artifact such as a signature whose config is something else);
 * BERTH_ERROR when the blob is missing, too large or not a JSON object.
 */
int berth_image_config(berth_registry_t *reg, const char *manifest, size_t len, json_t **out);

/**
 * Harbor's extra_attrs of an image artifact from its config: architecture, os, variant (when set), author,
 * created and config (the runtime part: Entrypoint, Cmd, Env, Labels, WorkingDir, User, ExposedPorts …).
 * A new reference.
 */
json_t *berth_image_config_attrs(json_t *cfg);

#endif
