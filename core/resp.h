/* A response independent of the HTTP library: services fill it, registry/http/ sends it (h2o or libmicrohttpd). */
#ifndef BERTH_CORE_RESP_H
#define BERTH_CORE_RESP_H

#include <stddef.h>

#include "core/err.h"

#define BERTH_RESP_MAX_HEADERS 12

typedef struct st_berth_resp_t {
    int status;
    struct {
        const char *name; /* lowercase static string (HTTP/2 needs lowercase) */
        char *value;      /* owned */
    } hdrs[BERTH_RESP_MAX_HEADERS];
    size_t nhdrs;
    const char *content_type; /* static or owned by body's lifetime holder; NULL for no body type */
    char *ct_owned;
    char *body;    /* owned, malloc'd */
    size_t len;    /* with body NULL and len > 0: a HEAD answer whose Content-Length is len (no body is sent) */
    int edge_keep; /* a manifest the edge may answer for this caller a while (registry/http/edge_blobs.h) */
} berth_resp_t;

void berth_resp_init(berth_resp_t *r);
/** Add a header; the value is formatted into owned memory. Extra headers past the cap are dropped (logged). */
void berth_resp_header(berth_resp_t *r, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** Take ownership of a malloc'd body. `ctype` is copied. */
void berth_resp_body(berth_resp_t *r, int status, char *body, size_t len, const char *ctype);
/** OCI error JSON for err; the status comes from the error table. */
void berth_resp_error(berth_resp_t *r, const berth_err_t *err);
/** Value of a header previously added, or NULL. */
const char *berth_resp_get(const berth_resp_t *r, const char *name);
void berth_resp_dispose(berth_resp_t *r);

#endif
