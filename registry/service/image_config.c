#include "registry/service/image_config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/err.h"

char *berth_image_config_blob(berth_registry_t *reg, const char *digest, size_t *len)
{
    berth_digest_t d;
    if (berth_digest_parse(&d, digest, strlen(digest), NULL) != 0)
        return NULL;
    return berth_store_blob_slurp(reg->store, &d, BERTH_IMAGE_CONFIG_MAX, len);
}

/* The config media types of images; other artifacts (signatures, SBOMs, Helm charts) carry other configs */
static int image_config_type(const char *mt)
{
    return mt != NULL && (strcmp(mt, "application/vnd.oci.image.config.v1+json") == 0 ||
                          strcmp(mt, "application/vnd.docker.container.image.v1+json") == 0);
}

int berth_image_config(berth_registry_t *reg, const char *manifest, size_t len, json_t **out)
{
    *out = NULL;
    json_t *man = json_loadb(manifest, len, 0, NULL);
    json_t *desc = json_object_get(man, "config");
    const char *digest = json_string_value(json_object_get(desc, "digest"));
    if (digest == NULL || !image_config_type(json_string_value(json_object_get(desc, "mediaType")))) {
        json_decref(man);
        return BERTH_ENOTFOUND;
    }
    size_t n = 0;
    char *raw = berth_image_config_blob(reg, digest, &n);
    json_decref(man);
    json_t *cfg = raw != NULL ? json_loadb(raw, n, 0, NULL) : NULL;
    free(raw);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return BERTH_ERROR;
    }
    *out = cfg;
    return 0;
}

json_t *berth_image_config_attrs(json_t *cfg)
{
    json_t *attrs = json_object();
    static const char *const keys[] = {"architecture", "os", "variant", "author", "created"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(cfg, keys[i]);
        if (json_is_string(v))
            json_object_set(attrs, keys[i], v);
        else if (strcmp(keys[i], "variant") != 0) /* Harbor always names these, "" when the config does not */
            json_object_set_new(attrs, keys[i], json_string(""));
    }
    json_t *rt = json_object_get(cfg, "config");
    json_object_set_new(attrs, "config", json_is_object(rt) ? json_incref(rt) : json_object());
    return attrs;
}
