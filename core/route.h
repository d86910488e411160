/*
 * The /v2 surface as data: one row per route — the methods, the path pattern and the token scope it needs. The
 * parser matches paths against the patterns, the gate (auth/gate.c) asks for the scope, and the dispatcher
 * (registry/service/v2.c) runs the handler kept at the same index in its own table, so core never includes the
 * service that answers. Adding a route is one row here and one handler there.
 */
#ifndef BERTH_CORE_ROUTE_H
#define BERTH_CORE_ROUTE_H

#include <stddef.h>

#include "core/err.h"
#include "core/ref.h"

/* What a path looks like, whatever the method: the label metrics and logs use, and what the read cache keys on */
typedef enum {
    BERTH_ROUTE_NONE = 0,
    BERTH_ROUTE_BASE,      /* /v2/ */
    BERTH_ROUTE_CATALOG,   /* /v2/_catalog */
    BERTH_ROUTE_MANIFEST,  /* /v2/<name>/manifests/<ref> */
    BERTH_ROUTE_BLOB,      /* /v2/<name>/blobs/<digest> */
    BERTH_ROUTE_UPLOAD,    /* /v2/<name>/blobs/uploads/[<id>]: the upload listener's, never h2o's */
    BERTH_ROUTE_TAGS,      /* /v2/<name>/tags/list */
    BERTH_ROUTE_REFERRERS, /* /v2/<name>/referrers/<digest> */
    BERTH_ROUTE__COUNT
} berth_route_kind_t;

/* One id per row of berth_routes */
typedef enum {
    BERTH_V2_NONE = 0, /* not (yet) a route: no path matched, or no method chosen */
    BERTH_V2_BASE,
    BERTH_V2_CATALOG,
    BERTH_V2_TAGS,
    BERTH_V2_MANIFEST_GET,
    BERTH_V2_MANIFEST_PUT,
    BERTH_V2_MANIFEST_DELETE,
    BERTH_V2_BLOB_GET,
    BERTH_V2_BLOB_DELETE,
    BERTH_V2_REFERRERS,
    BERTH_V2_UPLOAD_START,
    BERTH_V2_UPLOAD_STATUS,
    BERTH_V2_UPLOAD_CHUNK,
    BERTH_V2_UPLOAD_FINISH,
    BERTH_V2_UPLOAD_CANCEL,
    BERTH_V2__COUNT
} berth_route_id_t;

enum {
    BERTH_METHOD_GET = 1 << 0,
    BERTH_METHOD_HEAD = 1 << 1,
    BERTH_METHOD_PUT = 1 << 2,
    BERTH_METHOD_POST = 1 << 3,
    BERTH_METHOD_PATCH = 1 << 4,
    BERTH_METHOD_DELETE = 1 << 5,
    BERTH_METHOD_OTHER = 1 << 6, /* any method not named above */
    BERTH_METHOD_ANY = (1 << 7) - 1,
};

typedef struct st_berth_route_def_t {
    /* "/v2/<name>/manifests/<reference>": literal text, <name> (a repository), and at most one variable at the
     * end — <reference> (tag or digest), <digest> or <uuid> (an upload id). A trailing '/' is optional. */
    const char *pattern;
    unsigned methods; /* BERTH_METHOD_* */
    /* the token scope the route needs, as a challenge names it, <name> standing for the repository;
     * NULL: none beyond a valid caller (the base endpoint) */
    const char *scope;
    berth_route_kind_t kind;
} berth_route_def_t;

/** The table, indexed by berth_route_id_t; row BERTH_V2_NONE is empty. */
extern const berth_route_def_t berth_routes[BERTH_V2__COUNT];

typedef struct st_berth_route_t {
    berth_route_kind_t kind;
    berth_route_id_t id; /* set by berth_route_select */
    const char *pattern; /* the matched row's pattern (static); NULL when none matched */
    char name[BERTH_NAME_MAX + 1];
    char ref[BERTH_REF_MAX + 1]; /* tag or digest; the upload id for UPLOAD (empty: new session) */
    int ref_is_digest;
} berth_route_t;

/**
 * Match a raw request path (no query string, not percent-decoded) against the table's patterns.
 * Names are matched from the right so that a repository may itself contain "blobs" or "manifests".
 * Any '%' in the path is refused: no valid name needs encoding, and decoding would let "%2e%2e" through.
 * Returns 0; BERTH_ENOTFOUND for a path that is no route; BERTH_EINVAL with NAME_INVALID, TAG_INVALID or
 * DIGEST_INVALID for a route whose parts break the grammar (kind is set as soon as a pattern matched).
 */
int berth_route_parse(berth_route_t *out, const char *path, size_t len, berth_err_t *err);
/**
 * Choose the row for `method` among those of the parsed path's pattern and set r->id.
 * Returns 0, or BERTH_EINVAL with BERTH_OCI_METHOD (405) when the pattern has no row for the method.
 */
int berth_route_select(berth_route_t *r, const char *method, berth_err_t *err);
/** The BERTH_METHOD_* bit of a method name (BERTH_METHOD_OTHER for any other). */
unsigned berth_route_method(const char *method);
/** Short label for metrics and logs. */
const char *berth_route_label(berth_route_kind_t kind);

#endif
