/* One error type for all of Berth: a stable negative code, the OCI/HTTP mapping and a message. */
#ifndef BERTH_CORE_ERR_H
#define BERTH_CORE_ERR_H

#include <stddef.h>

/* Generic codes returned by every function (0 = success). Never renumber. */
enum {
    BERTH_OK = 0,
    BERTH_ERROR = -1, /* internal fault */
    BERTH_ENOTFOUND = -2,
    BERTH_EEXISTS = -3,
    BERTH_EINVAL = -4,
    BERTH_EUNAUTH = -5,
    BERTH_EDENIED = -6,
    BERTH_ETOOBIG = -7,
    BERTH_ECONFLICT = -8,
    BERTH_ERETRY = -9,
    BERTH_EUNAVAIL = -10,
    BERTH_EDIGEST = -11,
};

/* Error kinds as clients see them: the distribution-spec codes plus a few of ours. */
typedef enum {
    BERTH_OCI_NONE = 0,
    BERTH_OCI_BLOB_UNKNOWN,
    BERTH_OCI_BLOB_UPLOAD_INVALID,
    BERTH_OCI_BLOB_UPLOAD_UNKNOWN,
    BERTH_OCI_DIGEST_INVALID,
    BERTH_OCI_MANIFEST_BLOB_UNKNOWN,
    BERTH_OCI_MANIFEST_INVALID,
    BERTH_OCI_MANIFEST_UNKNOWN,
    BERTH_OCI_NAME_INVALID,
    BERTH_OCI_NAME_UNKNOWN,
    BERTH_OCI_SIZE_INVALID,
    BERTH_OCI_UNAUTHORIZED,
    BERTH_OCI_DENIED,
    BERTH_OCI_UNSUPPORTED,
    BERTH_OCI_TOOMANYREQUESTS,
    BERTH_OCI_RANGE_INVALID,    /* BLOB_UPLOAD_INVALID answered with 416 */
    BERTH_OCI_TAG_INVALID,      /* a tag outside the grammar: MANIFEST_INVALID with its own text */
    BERTH_OCI_MANIFEST_TOO_BIG, /* 413 */
    BERTH_OCI_UNAVAILABLE,      /* metadata database or storage unreachable: 503 */
    BERTH_OCI_INTERNAL,         /* 500; detail only in the log */
    BERTH_OCI_NOT_FOUND,        /* plain 404 for unknown routes */
    BERTH_OCI_METHOD,           /* 405 */
    BERTH_OCI_BAD_REQUEST,      /* REST API: 400 */
    BERTH_OCI_CONFLICT,         /* REST API: 409, already exists */
    BERTH_OCI_PRECONDITION,     /* REST API: 412, e.g. deleting a project that still has repositories */
    BERTH_OCI_ENCODING,         /* 415: a Content-Encoding the server does not decode */
    BERTH_OCI_AUTH_UNAVAILABLE, /* 503: the database or LDAP behind a login cannot be asked */
    BERTH_OCI_STORAGE_FULL,     /* 507: no space for blob bytes (ENOSPC, or below storage.min_free_bytes) */
    BERTH_OCI_PARAM_INVALID,    /* /v2: 400 for a query parameter that is malformed, not UTF-8 or out of range */
    BERTH_OCI_IMMUTABLE,        /* 412 as Harbor: an immutable tag rule protects the tag; DENIED on /v2, PRECONDITION on REST */
    BERTH_OCI__COUNT
} berth_oci_t;

typedef struct st_berth_err_t {
    int code;        /* BERTH_E* */
    berth_oci_t oci; /* what the client is told */
    char msg[256];   /* one impersonal line */
} berth_err_t;

/** Fill *err (may be NULL) and return the generic code that belongs to `oci`. */
int berth_err_set(berth_err_t *err, berth_oci_t oci, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#if defined(__clang_analyzer__) && !defined(BERTH_ERR_C)
/* clang-analyzer (lint_static) reads one file at a time, so it cannot see that every kind but BERTH_OCI_NONE maps to
 * a negative code; told nothing, it follows "error set, yet 0 returned" paths that cannot happen. Analysis only. */
static inline int berth_err__failed(int code)
{
    return code < 0 ? code : BERTH_ERROR;
}
#define berth_err_set(...) berth_err__failed(berth_err_set(__VA_ARGS__))
#endif
/** Reset to success. */
void berth_err_clear(berth_err_t *err);
/** HTTP status for an OCI kind. */
int berth_err_status(berth_oci_t oci);
/** Code string for the JSON body ("BLOB_UNKNOWN"). */
const char *berth_err_oci_name(berth_oci_t oci);
/** Seconds a client should wait before retrying (Retry-After), 0 when a retry will not help. */
int berth_err_retry_after(berth_oci_t oci);
/**
 * Render {"errors":[{"code":..,"message":..,"detail":..}]} into a malloc'd string (caller frees).
 * Every 5xx message is the table's fixed text: err->msg may carry a library's words (libpq's server address,
 * a path, an LDAP or TLS reason), which belong in the log, never on the wire.
 */
char *berth_err_json(const berth_err_t *err, size_t *len_out);

#endif
