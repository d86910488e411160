#include "core/resp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

void berth_resp_init(berth_resp_t *r)
{
    memset(r, 0, sizeof(*r));
    r->status = 200;
}

void berth_resp_header(berth_resp_t *r, const char *name, const char *fmt, ...)
{
    if (r->nhdrs == BERTH_RESP_MAX_HEADERS) {
        berth_log_err("response header %s dropped: too many headers", name);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *v = NULL;
    if (vasprintf(&v, fmt, ap) < 0)
        abort();
    va_end(ap);
    r->hdrs[r->nhdrs].name = name;
    r->hdrs[r->nhdrs].value = v;
    r->nhdrs++;
}

void berth_resp_body(berth_resp_t *r, int status, char *body, size_t len, const char *ctype)
{
    free(r->body);
    free(r->ct_owned);
    r->status = status;
    r->body = body;
    r->len = len;
    r->ct_owned = ctype != NULL ? strdup(ctype) : NULL;
    r->content_type = r->ct_owned;
}

void berth_resp_error(berth_resp_t *r, const berth_err_t *err)
{
    size_t len;
    char *json = berth_err_json(err, &len);
    berth_oci_t oci = err->oci == BERTH_OCI_NONE ? BERTH_OCI_INTERNAL : err->oci;
    if (berth_err_retry_after(oci) > 0 && berth_resp_get(r, "retry-after") == NULL)
        berth_resp_header(r, "retry-after", "%d", berth_err_retry_after(oci));
    berth_resp_body(r, berth_err_status(oci), json, len, "application/json");
}

const char *berth_resp_get(const berth_resp_t *r, const char *name)
{
    for (size_t i = 0; i < r->nhdrs; i++)
        if (strcmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].value;
    return NULL;
}

void berth_resp_dispose(berth_resp_t *r)
{
    for (size_t i = 0; i < r->nhdrs; i++)
        free(r->hdrs[i].value);
    free(r->body);
    free(r->ct_owned);
    memset(r, 0, sizeof(*r));
}
