/* Running an API query and answering with its result: a paged list, one object, or a delete (audited). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/api/internal.h"

/* The request's query without page and page_size, for Link headers */
static void other_params(berth_api_t *a, char *out, size_t outsz)
{
    out[0] = '\0';
    size_t o = 0;
    const char *q = a->rq->query, *end = q != NULL ? q + a->rq->query_len : NULL;
    for (const char *p = q; p != NULL && p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *item_end = amp != NULL ? amp : end;
        if (strncmp(p, "page=", 5) != 0 && strncmp(p, "page_size=", 10) != 0 && item_end > p &&
            o + (size_t)(item_end - p) + 2 < outsz) {
            memcpy(out + o, p, (size_t)(item_end - p));
            o += (size_t)(item_end - p);
            out[o++] = '&';
            out[o] = '\0';
        }
        p = item_end + 1;
    }
}

int berth_api_query(berth_api_t *a, berth_q_t q, const char *const *params, berth_db_json_t *out)
{
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_api(a->c, q, params, out, &err) == 0)
        return 0;
    if (err.code == BERTH_EEXISTS)
        berth_err_set(&err, BERTH_OCI_CONFLICT, "already exists");
    else if (err.code == BERTH_ECONFLICT)
        berth_err_set(&err, BERTH_OCI_NOT_FOUND, "a referenced object does not exist");
    return berth_api_err(a, &err);
}

json_t *berth_api_fetch(berth_api_t *a, berth_q_t q, const char *const *params, const char *what)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return NULL;
    json_t *v = r.json != NULL ? json_loads(r.json, 0, NULL) : NULL;
    free(r.json);
    if (v == NULL)
        berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", what);
    return v;
}

int berth_api_list(berth_api_t *a, berth_q_t q, const char *const *params, const char *limit, const char *offset)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    long size = strtol(limit, NULL, 10), page = strtol(offset, NULL, 10) / size + 1;
    berth_resp_header(a->resp, "x-total-count", "%lld", r.total);
    char rest[1200], links[3000] = "";
    other_params(a, rest, sizeof(rest));
    int n = 0;
    if (page > 1)
        n += snprintf(links, sizeof(links), "<%.*s?%spage=%ld&page_size=%ld>; rel=\"prev\"", (int)a->rq->path_len, a->rq->path,
                      rest, page - 1, size);
    if (page * size < r.total && n >= 0 && (size_t)n < sizeof(links))
        snprintf(links + n, sizeof(links) - (size_t)n, "%s<%.*s?%spage=%ld&page_size=%ld>; rel=\"next\"", n > 0 ? " , " : "",
                 (int)a->rq->path_len, a->rq->path, rest, page + 1, size);
    if (links[0] != '\0')
        berth_resp_header(a->resp, "link", "%s", links);
    return berth_api_json(a, 200, r.json);
}

int berth_api_object(berth_api_t *a, berth_q_t q, const char *const *params, const char *what)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    if (r.json == NULL)
        return berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", what);
    return berth_api_json(a, 200, r.json);
}

int berth_api_delete(berth_api_t *a, berth_q_t q, const char *const *params, const char *rtype, const char *fallback,
                     const char *project)
{
    berth_db_json_t r;
    if (berth_api_query(a, q, params, &r) != 0)
        return -1;
    json_t *v = r.json != NULL ? json_loads(r.json, JSON_DECODE_ANY, NULL) : NULL;
    berth_api_audit(a, "delete", rtype, json_is_string(v) ? json_string_value(v) : fallback, project, r.json != NULL);
    json_decref(v);
    int found = r.json != NULL;
    free(r.json);
    return found ? berth_api_empty(a, 200) : berth_api_fail(a, BERTH_OCI_NOT_FOUND, "%s not found", rtype);
}
