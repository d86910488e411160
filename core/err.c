#define BERTH_ERR_C /* the definition below, not the analysis-only wrapper of err.h */
#include "core/err.h"

#include "core/utf8.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table from error kind to wire code, HTTP status and generic code (distribution errcode/register.go). */
static const struct {
    const char *name;
    int status;
    int code;
    const char *text;
    int retry_after; /* seconds, for Retry-After; 0: none */
} table[BERTH_OCI__COUNT] = {
    [BERTH_OCI_NONE] = {"", 200, BERTH_OK, ""},
    [BERTH_OCI_BLOB_UNKNOWN] = {"BLOB_UNKNOWN", 404, BERTH_ENOTFOUND, "blob unknown to registry"},
    [BERTH_OCI_BLOB_UPLOAD_INVALID] = {"BLOB_UPLOAD_INVALID", 400, BERTH_EINVAL, "blob upload invalid"},
    [BERTH_OCI_BLOB_UPLOAD_UNKNOWN] = {"BLOB_UPLOAD_UNKNOWN", 404, BERTH_ENOTFOUND, "blob upload unknown to registry"},
    [BERTH_OCI_DIGEST_INVALID] = {"DIGEST_INVALID", 400, BERTH_EDIGEST, "provided digest did not match uploaded content"},
    [BERTH_OCI_MANIFEST_BLOB_UNKNOWN] = {"MANIFEST_BLOB_UNKNOWN", 400, BERTH_EINVAL,
                                         "manifest references a manifest or blob unknown to registry"},
    [BERTH_OCI_MANIFEST_INVALID] = {"MANIFEST_INVALID", 400, BERTH_EINVAL, "manifest invalid"},
    [BERTH_OCI_MANIFEST_UNKNOWN] = {"MANIFEST_UNKNOWN", 404, BERTH_ENOTFOUND, "manifest unknown to registry"},
    [BERTH_OCI_NAME_INVALID] = {"NAME_INVALID", 400, BERTH_EINVAL, "invalid repository name"},
    [BERTH_OCI_NAME_UNKNOWN] = {"NAME_UNKNOWN", 404, BERTH_ENOTFOUND, "repository name not known to registry"},
    [BERTH_OCI_SIZE_INVALID] = {"SIZE_INVALID", 400, BERTH_ETOOBIG, "provided length did not match content length"},
    [BERTH_OCI_UNAUTHORIZED] = {"UNAUTHORIZED", 401, BERTH_EUNAUTH, "authentication required"},
    [BERTH_OCI_DENIED] = {"DENIED", 403, BERTH_EDENIED, "requested access to the resource is denied"},
    [BERTH_OCI_UNSUPPORTED] = {"UNSUPPORTED", 405, BERTH_EINVAL, "the operation is unsupported"},
    [BERTH_OCI_TOOMANYREQUESTS] = {"TOOMANYREQUESTS", 429, BERTH_ERETRY, "too many requests", 1},
    [BERTH_OCI_RANGE_INVALID] = {"BLOB_UPLOAD_INVALID", 416, BERTH_EINVAL, "requested range not satisfiable"},
    [BERTH_OCI_TAG_INVALID] = {"MANIFEST_INVALID", 400, BERTH_EINVAL, "invalid tag"},
    [BERTH_OCI_MANIFEST_TOO_BIG] = {"SIZE_INVALID", 413, BERTH_ETOOBIG, "manifest too large"},
    [BERTH_OCI_UNAVAILABLE] = {"UNAVAILABLE", 503, BERTH_EUNAVAIL, "service temporarily unavailable", 2},
    [BERTH_OCI_INTERNAL] = {"UNKNOWN", 500, BERTH_ERROR, "internal server error"},
    [BERTH_OCI_NOT_FOUND] = {"NOT_FOUND", 404, BERTH_ENOTFOUND, "not found"},
    [BERTH_OCI_METHOD] = {"UNSUPPORTED", 405, BERTH_EINVAL, "method not allowed"},
    [BERTH_OCI_BAD_REQUEST] = {"BAD_REQUEST", 400, BERTH_EINVAL, "bad request"},
    [BERTH_OCI_CONFLICT] = {"CONFLICT", 409, BERTH_EEXISTS, "already exists"},
    [BERTH_OCI_PRECONDITION] = {"PRECONDITION", 412, BERTH_ECONFLICT, "precondition failed"},
    [BERTH_OCI_ENCODING] = {"UNSUPPORTED", 415, BERTH_EINVAL, "content encoding not supported"},
    [BERTH_OCI_AUTH_UNAVAILABLE] = {"UNAVAILABLE", 503, BERTH_EUNAVAIL, "authentication backend unavailable", 2},
    /* RFC 4918's 507; the spec has no code for it, so the message says it (docs/faults.md) */
    [BERTH_OCI_STORAGE_FULL] = {"UNAVAILABLE", 507, BERTH_EUNAVAIL, "registry storage is full", 60},
    [BERTH_OCI_PARAM_INVALID] = {"UNSUPPORTED", 400, BERTH_EINVAL, "invalid query parameter", 0},
    [BERTH_OCI_IMMUTABLE] = {"DENIED", 412, BERTH_EDENIED, "the tag is immutable"},
};

int berth_err_set(berth_err_t *err, berth_oci_t oci, const char *fmt, ...)
{
    if (err != NULL) {
        err->oci = oci;
        err->code = table[oci].code;
        if (fmt != NULL) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
            va_end(ap);
        } else {
            snprintf(err->msg, sizeof(err->msg), "%s", table[oci].text);
        }
    }
    return table[oci].code;
}

void berth_err_clear(berth_err_t *err)
{
    if (err != NULL)
        memset(err, 0, sizeof(*err));
}

int berth_err_status(berth_oci_t oci)
{
    return table[oci].status;
}

const char *berth_err_oci_name(berth_oci_t oci)
{
    return table[oci].name;
}

int berth_err_retry_after(berth_oci_t oci)
{
    return table[oci].retry_after;
}

char *berth_err_json(const berth_err_t *err, size_t *len_out)
{
    berth_oci_t oci = err->oci == BERTH_OCI_NONE ? BERTH_OCI_INTERNAL : err->oci;
    const char *msg = err->msg[0] != '\0' ? err->msg : table[oci].text;
    if (table[oci].status >= 500) /* the kind says what is wrong; the detail is in the log */
        msg = table[oci].text;
    /* a message may quote client bytes or be cut mid-character by vsnprintf: JSON needs valid UTF-8 */
    char clean[sizeof(err->msg) * 3];
    berth_utf8_scrub(msg, clean, sizeof(clean));
    json_t *e = json_pack("{s:s,s:s,s:{}}", "code", table[oci].name, "message", clean, "detail");
    json_t *root = json_pack("{s:[o]}", "errors", e);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (s == NULL &&
        (s = strdup("{\"errors\":[{\"code\":\"UNKNOWN\",\"message\":\"internal server error\",\"detail\":{}}]}")) == NULL)
        abort();
    if (len_out != NULL)
        *len_out = strlen(s);
    return s;
}
