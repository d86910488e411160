/* Answers of the REST API: JSON bodies, empty answers, 201 Location, and the one error path ({"errors":[...]}). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/offload.h"
#include "core/log.h"
#include "registry/api/internal.h"

int berth_api_json(berth_api_t *a, int status, char *json)
{
    berth_resp_body(a->resp, status, json, json != NULL ? strlen(json) : 0, "application/json");
    return 0;
}

int berth_api_jsonv(berth_api_t *a, int status, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    return berth_api_json(a, status, s);
}

int berth_api_empty(berth_api_t *a, int status)
{
    berth_resp_body(a->resp, status, NULL, 0, NULL);
    return 0;
}

int berth_api_created(berth_api_t *a, char *json, const char *key, const char *prefix)
{
    json_t *v = json_loads(json, 0, NULL);
    berth_resp_header(a->resp, "location", "%s/%lld", prefix, (long long)json_integer_value(json_object_get(v, key)));
    json_decref(v);
    free(json);
    return berth_api_empty(a, 201);
}

int berth_api_err(berth_api_t *a, const berth_err_t *err)
{
    if (berth_offload_moving()) /* not an answer: the request runs again on an auth worker */
        return -1;
    if (berth_err_status(err->oci) >= 500)
        berth_log_err("%s %.*s: %s", a->rq->method, (int)a->rq->path_len, a->rq->path, err->msg);
    berth_err_t pre;
    if (err->oci == BERTH_OCI_IMMUTABLE) { /* Harbor's REST code for it; /v2 says DENIED */
        memcpy(&pre, err, sizeof(pre));
        pre.oci = BERTH_OCI_PRECONDITION;
        err = &pre;
    }
    berth_resp_error(a->resp, err);
    return -1;
}

int berth_api_fail(berth_api_t *a, berth_oci_t oci, const char *fmt, ...)
{
    berth_err_t err;
    berth_err_set(&err, oci, NULL);
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
        va_end(ap);
    }
    return berth_api_err(a, &err);
}

int berth_api_text(berth_api_t *a, char *json, const char *what)
{
    json_t *v = json != NULL ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
    free(json);
    if (!json_is_string(v)) {
        json_decref(v);
        berth_err_t err;
        berth_err_set(&err, BERTH_OCI_NOT_FOUND, "%s", what);
        return berth_api_err(a, &err);
    }
    berth_resp_body(a->resp, 200, strdup(json_string_value(v)), strlen(json_string_value(v)), "text/plain");
    json_decref(v);
    return 0;
}
