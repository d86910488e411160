#include "core/route.h"

#include <string.h>

#include "core/digest.h"

#define GET_HEAD (BERTH_METHOD_GET | BERTH_METHOD_HEAD)
#define MANIFEST "/v2/<name>/manifests/<reference>"
#define BLOB "/v2/<name>/blobs/<digest>"
#define UPLOAD "/v2/<name>/blobs/uploads/<uuid>"

/*
 * Writes ask pull,push as Distribution and Harbor do: a client that takes the challenge literally must be able to
 * read back what it pushed (its manifest, a blob's status) with the same token. The base endpoint answers any
 * method, as Distribution's does.
 */
const berth_route_def_t berth_routes[BERTH_V2__COUNT] = {
    [BERTH_V2_BASE] = {"/v2/", BERTH_METHOD_ANY, NULL, BERTH_ROUTE_BASE},
    [BERTH_V2_CATALOG] = {"/v2/_catalog", GET_HEAD, "registry:catalog:*", BERTH_ROUTE_CATALOG},
    [BERTH_V2_TAGS] = {"/v2/<name>/tags/list", GET_HEAD, "repository:<name>:pull", BERTH_ROUTE_TAGS},
    [BERTH_V2_MANIFEST_GET] = {MANIFEST, GET_HEAD, "repository:<name>:pull", BERTH_ROUTE_MANIFEST},
    [BERTH_V2_MANIFEST_PUT] = {MANIFEST, BERTH_METHOD_PUT, "repository:<name>:pull,push", BERTH_ROUTE_MANIFEST},
    [BERTH_V2_MANIFEST_DELETE] = {MANIFEST, BERTH_METHOD_DELETE, "repository:<name>:delete", BERTH_ROUTE_MANIFEST},
    [BERTH_V2_BLOB_GET] = {BLOB, GET_HEAD, "repository:<name>:pull", BERTH_ROUTE_BLOB},
    [BERTH_V2_BLOB_DELETE] = {BLOB, BERTH_METHOD_DELETE, "repository:<name>:delete", BERTH_ROUTE_BLOB},
    [BERTH_V2_REFERRERS] = {"/v2/<name>/referrers/<digest>", GET_HEAD, "repository:<name>:pull", BERTH_ROUTE_REFERRERS},
    [BERTH_V2_UPLOAD_START] = {"/v2/<name>/blobs/uploads/", BERTH_METHOD_POST, "repository:<name>:pull,push", BERTH_ROUTE_UPLOAD},
    [BERTH_V2_UPLOAD_STATUS] = {UPLOAD, GET_HEAD, "repository:<name>:push", BERTH_ROUTE_UPLOAD},
    [BERTH_V2_UPLOAD_CHUNK] = {UPLOAD, BERTH_METHOD_PATCH, "repository:<name>:pull,push", BERTH_ROUTE_UPLOAD},
    [BERTH_V2_UPLOAD_FINISH] = {UPLOAD, BERTH_METHOD_PUT, "repository:<name>:pull,push", BERTH_ROUTE_UPLOAD},
    [BERTH_V2_UPLOAD_CANCEL] = {UPLOAD, BERTH_METHOD_DELETE, "repository:<name>:push", BERTH_ROUTE_UPLOAD},
};

#define NAMED "/v2/<name>" /* the patterns with a repository: the rest of the pattern follows the name */

unsigned berth_route_method(const char *method)
{
    static const struct {
        const char *name;
        unsigned bit;
    } methods[] = {{"GET", BERTH_METHOD_GET},   {"HEAD", BERTH_METHOD_HEAD},   {"PUT", BERTH_METHOD_PUT},
                   {"POST", BERTH_METHOD_POST}, {"PATCH", BERTH_METHOD_PATCH}, {"DELETE", BERTH_METHOD_DELETE}};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(method, methods[i].name) == 0)
            return methods[i].bit;
    return BERTH_METHOD_OTHER;
}

static int ends_with(const char *s, size_t len, const char *suffix, size_t sl)
{
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

/* A pattern's last part when it is a variable ("reference" for ".../<reference>"), else NULL */
static const char *variable(const char *pattern, size_t *lit_len)
{
    size_t len = strlen(pattern);
    const char *slash = strrchr(pattern, '/');
    if (len == 0 || pattern[len - 1] != '>' || slash == NULL || slash[1] != '<')
        return NULL;
    *lit_len = (size_t)(slash - pattern);
    return slash + 2;
}

static int is_var(const char *var, const char *name)
{
    size_t n = strlen(name);
    return strncmp(var, name, n) == 0 && var[n] == '>';
}

/* The variable after the name: an upload id is ours and checked first (a bad one names no upload, whatever the
 * name); a reference or digest is checked after the name */
static int set_variable(berth_route_t *out, const char *var, const char *s, size_t len, berth_err_t *err)
{
    int is_ref = is_var(var, "reference");
    if (len == 0 || len > BERTH_REF_MAX)
        return berth_err_set(err, is_ref ? BERTH_OCI_MANIFEST_INVALID : BERTH_OCI_DIGEST_INVALID, "reference is empty or too long");
    memcpy(out->ref, s, len);
    out->ref[len] = '\0';
    if (memchr(s, ':', len) != NULL) {
        berth_digest_t d;
        out->ref_is_digest = 1;
        return berth_digest_parse(&d, s, len, err);
    }
    if (!is_ref)
        return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "a digest is required here");
    if (!berth_ref_tag_valid(s, len))
        return berth_err_set(err, BERTH_OCI_TAG_INVALID, "invalid tag");
    return 0;
}

static int matched(berth_route_t *out, const berth_route_def_t *def)
{
    out->kind = def->kind;
    out->pattern = def->pattern;
    return 0;
}

int berth_route_parse(berth_route_t *out, const char *path, size_t len, berth_err_t *err)
{
    const size_t named_len = sizeof(NAMED) - 1;
    memset(out, 0, sizeof(*out));
    /* patterns without a name match exactly */
    for (int id = 1; id < BERTH_V2__COUNT; id++) {
        const char *p = berth_routes[id].pattern;
        size_t pl = strlen(p);
        if (strncmp(p, NAMED, named_len) == 0)
            continue;
        if ((len == pl || (p[pl - 1] == '/' && len == pl - 1)) && memcmp(path, p, len) == 0)
            return matched(out, &berth_routes[id]);
    }
    if (len < 4 || memcmp(path, "/v2/", 4) != 0)
        return BERTH_ENOTFOUND;
    const char *rest = path + 4; /* "<name>/…" */
    size_t rlen = len - 4;
    if (memchr(rest, '%', rlen) != NULL)
        return berth_err_set(err, BERTH_OCI_NAME_INVALID, "percent-encoding is not allowed in repository paths");

    /* patterns ending in literal text ("/tags/list"), before those ending in a variable: "…/blobs/uploads" is an
     * upload, not the blob "uploads" */
    for (int id = 1; id < BERTH_V2__COUNT; id++) {
        const char *p = berth_routes[id].pattern;
        size_t lit;
        if (strncmp(p, NAMED, named_len) != 0 || variable(p, &lit) != NULL)
            continue;
        const char *suffix = p + named_len;
        size_t sl = strlen(suffix);
        if (ends_with(rest, rlen, suffix, sl) || (suffix[sl - 1] == '/' && ends_with(rest, rlen, suffix, sl - 1))) {
            matched(out, &berth_routes[id]);
            return set_name(out, rest, rlen - (ends_with(rest, rlen, suffix, sl) ? sl : sl - 1), err);
        }
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
    for (int id = 1; id < BERTH_V2__COUNT; id++) {
        const char *p = berth_routes[id].pattern, *var;
        size_t lit;
        if (strncmp(p, NAMED, named_len) != 0 || (var = variable(p, &lit)) == NULL)
            continue;
        const char *seg = p + named_len; /* "/manifests" */
        size_t seg_len = lit - named_len;
        if (!ends_with(rest, head_len, seg, seg_len))
            continue;
        matched(out, &berth_routes[id]);
        if (is_var(var, "uuid")) {
            if (!upload_id_valid(last, last_len))
                return berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, "upload id is not valid");
            memcpy(out->ref, last, last_len);
            return set_name(out, rest, head_len - seg_len, err);
        }
        int rc = set_name(out, rest, head_len - seg_len, err);
        return rc != 0 ? rc : set_variable(out, var, last, last_len, err);
    }
    return BERTH_ENOTFOUND;
}

int berth_route_select(berth_route_t *r, const char *method, berth_err_t *err)
{
    unsigned m = berth_route_method(method);
    r->id = BERTH_V2_NONE;
    if (r->pattern == NULL)
        return berth_err_set(err, BERTH_OCI_NOT_FOUND, NULL);
    for (int id = 1; id < BERTH_V2__COUNT; id++)
        if (strcmp(berth_routes[id].pattern, r->pattern) == 0 && (berth_routes[id].methods & m) != 0) {
            r->id = (berth_route_id_t)id;
            return 0;
        }
    return berth_err_set(err, BERTH_OCI_METHOD, NULL);
}

const char *berth_route_label(berth_route_kind_t kind)
{
    static const char *labels[] = {"other", "base", "catalog", "manifest", "blob", "upload", "tags", "referrers"};
    _Static_assert(sizeof(labels) / sizeof(labels[0]) == BERTH_ROUTE__COUNT, "a label per route kind");
    return kind < BERTH_ROUTE__COUNT ? labels[kind] : "other";
}
