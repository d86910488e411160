/* Reading a REST request: path segments, query parameters, filters, paging, sorting and the JSON body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/query.h"
#include "core/ref.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"

const char *berth_api_param(berth_api_t *a, const char *key)
{
    if (a->rq->query == NULL || berth_query_get(a->rq->query, a->rq->query_len, key, a->qbuf, sizeof(a->qbuf)) < 0)
        return NULL;
    return a->qbuf;
}

int berth_api_copy(berth_api_t *a, char *out, size_t outsz, const char *v, const char *what)
{
    size_t n = strlen(v);
    if (n >= outsz) /* never cut: a cut can split a UTF-8 character, which PostgreSQL refuses (a 500) */
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s is longer than %zu bytes", what, outsz - 1);
    memcpy(out, v, n + 1);
    return 0;
}

int berth_api_qterm(berth_api_t *a, const char *key, char *out, size_t outsz)
{
    const char *q = berth_api_param(a, "q");
    return q != NULL ? berth_query_term(q, key, out, outsz) : 0;
}

static long num_param(berth_api_t *a, const char *key, long dflt, long min, long max, int *bad)
{
    const char *v = berth_api_param(a, key);
    if (v == NULL)
        return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min || n > max)
        *bad = 1;
    return n;
}

int berth_api_page(berth_api_t *a, char limit[24], char offset[24])
{
    int bad = 0;
    long page = num_param(a, "page", 1, 1, 1000000, &bad), size = num_param(a, "page_size", 10, 1, 100, &bad);
    if (bad)
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "page must be >= 1 and page_size between 1 and 100");
    snprintf(limit, 24, "%ld", size);
    snprintf(offset, 24, "%ld", (page - 1) * size);
    return 0;
}

int berth_api_sort(berth_api_t *a, const char *const *keys, char out[40])
{
    const char *v = berth_api_param(a, "sort");
    out[0] = '\0';
    if (v == NULL || v[0] == '\0')
        return 0;
    size_t n = strlen(v);
    memcpy(out, v, n < 39 ? n : 39);
    out[n < 39 ? n : 39] = '\0';
    const char *k = out[0] == '-' ? out + 1 : out;
    for (const char *const *p = keys; *p != NULL; p++)
        if (strcmp(k, *p) == 0)
            return 0;
    char allowed[256] = "";
    for (const char *const *p = keys; *p != NULL; p++)
        snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s", p == keys ? "" : ", ", *p);
    return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "sort must be one of %s, optionally with a leading '-'", allowed);
}

json_t *berth_api_body(berth_api_t *a)
{
    json_error_t jerr;
    json_t *v = a->rq->body != NULL ? json_loadb(a->rq->body, a->rq->body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (v == NULL || !json_is_object(v)) {
        json_decref(v);
        berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

int berth_api_id_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 18 && strspn(s, "0123456789") == n;
}

int berth_api_route_match(const berth_api_route_t *r, char *const *seg, int nseg)
{
    int i = 0;
    for (const char *p = r->path + 1; *p != '\0'; i++) {
        const char *end = strchr(p, '/');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (i >= nseg)
            return 0;
        if (p[0] != '{' && (strlen(seg[i]) != len || memcmp(seg[i], p, len) != 0))
            return 0;
        p = end != NULL ? end + 1 : p + len;
    }
    return i == nseg;
}

/* Index of the matched route's "{name}" segment, or -1 */
static int arg_index(const berth_api_route_t *r, const char *name, size_t name_len)
{
    int i = 0;
    for (const char *p = r->path + 1; *p != '\0'; i++) {
        const char *end = strchr(p, '/');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len == name_len + 2 && p[0] == '{' && memcmp(p + 1, name, name_len) == 0)
            return i;
        p = end != NULL ? end + 1 : p + len;
    }
    return -1;
}

const char *berth_api_arg(berth_api_t *a, const char *name)
{
    int i = a->route != NULL ? arg_index(a->route, name, strlen(name)) : -1;
    return i >= 0 && i < a->nseg ? a->seg[i] : NULL;
}

/*
 * The path's typed parameters: database ids ({user_id}, {mid}, …) must be numbers, and {repository_name} must
 * make a valid name under the route's project (into a->repo).
 */
int berth_api_path_check(berth_api_t *a)
{
    static const struct {
        const char *name, *what;
    } ids[] = {{"user_id", "user id"},           {"mid", "member id"},           {"robot_id", "robot id"},
               {"group_id", "group id"},         {"registry_id", "registry id"}, {"policy_id", "policy id"},
               {"execution_id", "execution id"}, {"task_id", "task id"},         {"immutable_rule_id", "immutable rule id"},
               {"id", "retention policy id"},    {"eid", "execution id"},        {"tid", "task id"},
               {"quota_id", "quota id"}};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        const char *v = berth_api_arg(a, ids[i].name);
        if (v != NULL && !berth_api_id_ok(v))
            return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "%s must be a number", ids[i].what);
    }
    const char *r = berth_api_arg(a, "repository_name");
    if (r != NULL) {
        int n = snprintf(a->repo, sizeof(a->repo), "%s/%s", a->project, r);
        if (n < 0 || (size_t)n > BERTH_NAME_MAX || !berth_ref_name_valid(a->repo, (size_t)n))
            return berth_api_fail(a, BERTH_OCI_NAME_INVALID, "invalid repository name");
    }
    return 0;
}

/* Split "/api/v2.0/a/b%252Fc" into decoded segments. Harbor double-encodes '/' inside repository names. */
int berth_api_split(berth_api_t *a, const char *path, size_t len)
{
    for (const char *p = path, *end = path + len; p < end;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        size_t n = slash != NULL ? (size_t)(slash - p) : (size_t)(end - p);
        if (a->nseg == BERTH_API_MAX_SEGS || n > 1024)
            return -1;
        char once[1100], twice[1100];
        if (berth_query_decode(p, n, 0, once, sizeof(once)) < 0 ||
            berth_query_decode(once, strlen(once), 0, twice, sizeof(twice)) < 0)
            return -1;
        a->seg[a->nseg++] = strdup(twice);
        p = slash != NULL ? slash + 1 : end;
    }
    return 0;
}
