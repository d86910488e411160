#include "core/ref.h"

#include "core/digest.h"

#include <string.h>

static int is_alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static int component_valid(const char *s, size_t len)
{
    size_t i = 0;
    if (len == 0 || !is_alnum_lower(s[0]))
        return 0;
    while (i < len) {
        while (i < len && is_alnum_lower(s[i]))
            i++;
        if (i == len)
            return 1;
        /* separator */
        if (s[i] == '.') {
            i++;
        } else if (s[i] == '_') {
            i++;
            if (i < len && s[i] == '_')
                i++;
        } else if (s[i] == '-') {
            while (i < len && s[i] == '-')
                i++;
        } else {
            return 0;
        }
        if (i == len || !is_alnum_lower(s[i]))
            return 0;
    }
    return 1;
}

int berth_ref_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > BERTH_NAME_MAX)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/') {
            if (!component_valid(name + start, i - start))
                return 0;
            start = i + 1;
        }
    }
    return 1;
}

int berth_ref_tag_valid(const char *tag, size_t len)
{
    if (len == 0 || len > BERTH_TAG_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = tag[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 (i > 0 && (c == '.' || c == '-'));
        if (!ok)
            return 0;
    }
    return 1;
}

size_t berth_ref_project_len(const char *name, size_t len)
{
    const char *slash = memchr(name, '/', len);
    return slash != NULL ? (size_t)(slash - name) : len;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t sl = strlen(suffix);
    return len >= sl && memcmp(s + len - sl, suffix, sl) == 0;
}

static int set_name(berth_route_t *out, const char *s, size_t len, berth_err_t *err)
{
    if (!berth_ref_name_valid(s, len))
        return berth_err_set(err, BERTH_OCI_NAME_INVALID, "invalid repository name");
    memcpy(out->name, s, len);
    out->name[len] = '\0';
    return 0;
}

/* Upload ids are ours (UUIDs), so anything else is simply unknown. */
static int upload_id_valid(const char *s, size_t len)
{
    if (len == 0 || len > 64)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

int berth_route_parse(berth_route_t *out, const char *path, size_t len, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    if (len < 3 || memcmp(path, "/v2", 3) != 0)
        return BERTH_ENOTFOUND;
    if (len == 3 || (len == 4 && path[3] == '/')) {
        out->kind = BERTH_ROUTE_BASE;
        return 0;
    }
    if (path[3] != '/')
        return BERTH_ENOTFOUND;
    const char *rest = path + 4;
    size_t rlen = len - 4;
    if (rlen == 8 && memcmp(rest, "_catalog", 8) == 0) {
        out->kind = BERTH_ROUTE_CATALOG;
        return 0;
    }
    if (memchr(rest, '%', rlen) != NULL)
        return berth_err_set(err, BERTH_OCI_NAME_INVALID, "percent-encoding is not allowed in repository paths");

    if (ends_with(rest, rlen, "/tags/list")) {
        out->kind = BERTH_ROUTE_TAGS;
        return set_name(out, rest, rlen - 10, err);
    }
    if (ends_with(rest, rlen, "/blobs/uploads/") || ends_with(rest, rlen, "/blobs/uploads")) {
        out->kind = BERTH_ROUTE_UPLOAD;
        return set_name(out, rest, rlen - (rest[rlen - 1] == '/' ? 15 : 14), err);
    }
    const char *slash = NULL;
    for (size_t i = rlen; i > 0; i--) {
        if (rest[i - 1] == '/') {
            slash = rest + i - 1;
            break;
        }
    }
    if (slash == NULL)
        return BERTH_ENOTFOUND;
    const char *last = slash + 1;
    size_t last_len = rlen - (size_t)(last - rest), head_len = (size_t)(slash - rest);

    if (ends_with(rest, head_len, "/blobs/uploads")) {
        out->kind = BERTH_ROUTE_UPLOAD;
        if (!upload_id_valid(last, last_len))
            return berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, "upload id is not valid");
        memcpy(out->ref, last, last_len);
        return set_name(out, rest, head_len - 14, err);
    }
    static const struct {
        const char *seg;
        berth_route_kind_t kind;
    } kinds[] = {{"/manifests", BERTH_ROUTE_MANIFEST}, {"/blobs", BERTH_ROUTE_BLOB}, {"/referrers", BERTH_ROUTE_REFERRERS}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (!ends_with(rest, head_len, kinds[k].seg))
            continue;
        out->kind = kinds[k].kind;
        int rc = set_name(out, rest, head_len - strlen(kinds[k].seg), err);
        if (rc != 0)
            return rc;
        if (last_len == 0 || last_len > BERTH_REF_MAX)
            return berth_err_set(err, kinds[k].kind == BERTH_ROUTE_MANIFEST ? BERTH_OCI_MANIFEST_INVALID : BERTH_OCI_DIGEST_INVALID,
                                 "reference is empty or too long");
        memcpy(out->ref, last, last_len);
        out->ref[last_len] = '\0';
        if (memchr(last, ':', last_len) != NULL) {
            berth_digest_t d;
            out->ref_is_digest = 1;
            return berth_digest_parse(&d, last, last_len, err);
        }
        if (kinds[k].kind != BERTH_ROUTE_MANIFEST)
            return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "a digest is required here");
        if (!berth_ref_tag_valid(last, last_len))
            return berth_err_set(err, BERTH_OCI_TAG_INVALID, "invalid tag");
        return 0;
    }
    return BERTH_ENOTFOUND;
}

int berth_ref_image_parse(berth_image_ref_t *out, const char *s)
{
    memset(out, 0, sizeof(*out));
    if (s == NULL)
        return -1;
    const char *slash = strchr(s, '/');
    if (slash != NULL && (memchr(s, '.', (size_t)(slash - s)) != NULL || memchr(s, ':', (size_t)(slash - s)) != NULL ||
                          (slash - s == 9 && memcmp(s, "localhost", 9) == 0))) {
        if ((size_t)(slash - s) >= sizeof(out->host))
            return -1;
        memcpy(out->host, s, (size_t)(slash - s));
        s = slash + 1;
    }
    const char *at = strchr(s, '@'), *last = strrchr(s, '/'), *colon = strrchr(s, ':');
    size_t nlen = strlen(s);
    const char *ref = "latest";
    if (at != NULL) {
        nlen = (size_t)(at - s);
        ref = at + 1;
        out->ref_is_digest = 1;
    } else if (colon != NULL && (last == NULL || colon > last)) {
        nlen = (size_t)(colon - s);
        ref = colon + 1;
    }
    size_t rlen = strlen(ref);
    if (nlen == 0 || nlen > BERTH_NAME_MAX || !berth_ref_name_valid(s, nlen) || rlen > BERTH_REF_MAX)
        return -1;
    berth_digest_t d;
    if (out->ref_is_digest ? berth_digest_parse(&d, ref, rlen, NULL) != 0 : !berth_ref_tag_valid(ref, rlen))
        return -1;
    memcpy(out->name, s, nlen);
    memcpy(out->ref, ref, rlen + 1);
    return 0;
}

const char *berth_route_label(berth_route_kind_t kind)
{
    static const char *labels[BERTH_ROUTE__COUNT] = {"other", "base", "catalog", "manifest", "blob", "upload", "tags", "referrers"};
    return kind < BERTH_ROUTE__COUNT ? labels[kind] : "other";
}
