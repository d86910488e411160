#include "core/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static int known_type(const char *t)
{
    return strcmp(t, BERTH_MT_OCI_MANIFEST) == 0 || strcmp(t, BERTH_MT_OCI_INDEX) == 0 ||
           strcmp(t, BERTH_MT_DOCKER_MANIFEST) == 0 || strcmp(t, BERTH_MT_DOCKER_LIST) == 0;
}

/* Check one descriptor and optionally record it as a reference. */
static int descriptor(berth_manifest_info_t *out, json_t *d, berth_ref_kind_t kind, int record, const char *what, berth_err_t *err)
{
    if (!json_is_object(d))
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s is not a descriptor object", what);
    json_t *mt = json_object_get(d, "mediaType"), *dg = json_object_get(d, "digest"), *sz = json_object_get(d, "size");
    if (!json_is_string(mt) || json_string_length(mt) == 0)
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s has no mediaType", what);
    if (!json_is_string(dg))
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s has no digest", what);
    if (!json_is_integer(sz) || json_integer_value(sz) < 0)
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s has no valid size", what);
    berth_digest_t parsed;
    if (berth_digest_parse(&parsed, json_string_value(dg), json_string_length(dg), err) != 0)
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s has an invalid digest", what);
    /* foreign layers live elsewhere (urls); the registry need not hold them */
    json_t *urls = json_object_get(d, "urls");
    if (!record || (json_is_array(urls) && json_array_size(urls) > 0))
        return 0;
    for (size_t i = 0; i < out->nrefs; i++)
        if (strcmp(out->refs[i].digest, parsed.str) == 0)
            return 0;
    out->refs = realloc(out->refs, (out->nrefs + 1) * sizeof(*out->refs));
    if (out->refs == NULL)
        abort();
    berth_manifest_ref_t *r = &out->refs[out->nrefs++];
    r->kind = kind;
    snprintf(r->digest, sizeof(r->digest), "%s", parsed.str);
    r->size = json_integer_value(sz);
    return 0;
}

int berth_manifest_parse(berth_manifest_info_t *out, const char *body, size_t len, const char *content_type, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    if (len > BERTH_MANIFEST_MAX)
        return berth_err_set(err, BERTH_OCI_SIZE_INVALID, "manifest exceeds %u bytes", BERTH_MANIFEST_MAX);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "manifest is not valid JSON: %s", jerr.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "manifest is not a JSON object");
        goto Exit;
    }
    json_t *sv = json_object_get(root, "schemaVersion");
    if (!json_is_integer(sv) || json_integer_value(sv) != 2) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "schemaVersion must be 2");
        goto Exit;
    }
    json_t *mt = json_object_get(root, "mediaType");
    const char *body_type = json_is_string(mt) ? json_string_value(mt) : NULL;
    if (mt != NULL && body_type == NULL) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "mediaType is not a string");
        goto Exit;
    }
    /* Content-Type may carry parameters; compare the bare type */
    char ct[128] = "";
    if (content_type != NULL) {
        size_t n = strcspn(content_type, ";");
        while (n > 0 && content_type[n - 1] == ' ')
            n--;
        if (n < sizeof(ct)) {
            memcpy(ct, content_type, n);
            ct[n] = '\0';
        }
    }
    int ct_known = ct[0] != '\0' && known_type(ct);
    if (body_type != NULL && ct_known && strcmp(body_type, ct) != 0) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "mediaType %s does not match Content-Type %s", body_type, ct);
        goto Exit;
    }
    const char *type = body_type != NULL ? body_type : ct_known ? ct : NULL;
    json_t *manifests = json_object_get(root, "manifests"), *config = json_object_get(root, "config");
    if (type == NULL) /* OCI allows an absent mediaType; infer from the shape */
        type = manifests != NULL ? BERTH_MT_OCI_INDEX : BERTH_MT_OCI_MANIFEST;
    if (!known_type(type)) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "unsupported manifest media type %s", type);
        goto Exit;
    }
    out->media_type = strdup(type);
    out->is_index = strcmp(type, BERTH_MT_OCI_INDEX) == 0 || strcmp(type, BERTH_MT_DOCKER_LIST) == 0;
    if (out->is_index) {
        if (!json_is_array(manifests)) {
            rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "index has no manifests array");
            goto Exit;
        }
        size_t i;
        json_t *d;
        json_array_foreach(manifests, i, d)
        {
            if ((rc = descriptor(out, d, BERTH_REF_MANIFEST, 1, "manifests entry", err)) != 0)
                goto Exit;
        }
    } else {
        json_t *layers = json_object_get(root, "layers");
        if ((rc = descriptor(out, config, BERTH_REF_BLOB, 1, "config", err)) != 0)
            goto Exit;
        if (!json_is_array(layers)) {
            rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "manifest has no layers array");
            goto Exit;
        }
        size_t i;
        json_t *d;
        json_array_foreach(layers, i, d)
        {
            if ((rc = descriptor(out, d, BERTH_REF_BLOB, 1, "layer", err)) != 0)
                goto Exit;
        }
    }
    json_t *at = json_object_get(root, "artifactType");
    if (at != NULL && !json_is_string(at)) {
        rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "artifactType is not a string");
        goto Exit;
    }
    if (at != NULL)
        out->artifact_type = strdup(json_string_value(at));
    else if (!out->is_index && json_is_object(config))
        out->artifact_type = dup_or_null(json_string_value(json_object_get(config, "mediaType")));
    json_t *subject = json_object_get(root, "subject");
    if (subject != NULL) {
        if ((rc = descriptor(out, subject, BERTH_REF_MANIFEST, 0, "subject", err)) != 0)
            goto Exit;
        out->subject = strdup(json_string_value(json_object_get(subject, "digest")));
    }
    json_t *ann = json_object_get(root, "annotations");
    if (ann != NULL) {
        if (!json_is_object(ann)) {
            rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "annotations is not an object");
            goto Exit;
        }
        const char *k;
        json_t *v;
        json_object_foreach(ann, k, v)
        {
            if (!json_is_string(v)) {
                rc = berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "annotation %s is not a string", k);
                goto Exit;
            }
        }
        out->annotations = json_dumps(ann, JSON_COMPACT | JSON_SORT_KEYS);
    }
Exit:
    json_decref(root);
    if (rc != 0)
        berth_manifest_info_dispose(out);
    return rc;
}

void berth_manifest_info_dispose(berth_manifest_info_t *info)
{
    free(info->media_type);
    free(info->artifact_type);
    free(info->subject);
    free(info->annotations);
    free(info->refs);
    memset(info, 0, sizeof(*info));
}

int berth_manifest_accepts(const char *accept, size_t len, const char *media_type)
{
    if (accept == NULL || len == 0)
        return 1;
    size_t mlen = strlen(media_type);
    const char *p = accept, *end = accept + len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma != NULL ? comma : end;
        while (p < item_end && (*p == ' ' || *p == '\t'))
            p++;
        if (p >= item_end) {
            p = item_end + 1;
            continue;
        }
        const char *semi = memchr(p, ';', (size_t)(item_end - p));
        const char *t_end = semi != NULL ? semi : item_end;
        while (t_end > p && (t_end[-1] == ' ' || t_end[-1] == '\t'))
            t_end--;
        size_t tl = (size_t)(t_end - p);
        if ((tl == mlen && memcmp(p, media_type, mlen) == 0) || (tl == 3 && memcmp(p, "*/*", 3) == 0) ||
            (tl == 13 && memcmp(p, "application/*", 13) == 0))
            return 1;
        p = item_end + 1;
    }
    return 0;
}
