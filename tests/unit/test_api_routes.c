/*
 * registry/api route tables against registry/api/openapi.yaml (argv[1]): every row has a permission, a handler and
 * an operationId that the document has for the same method and path (with the same x-berth-permission); every
 * operation in the document has its row; no row hides behind an earlier one; and the dispatcher's permission
 * check answers as the table says (deny by default). Prints the tables as TAP comments.
 */
#include "registry/api/routes.h"
#include "tap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_OPS 256

typedef struct {
    char method[8], path[256], op_id[128], perm[128];
    int seen; /* rows that name it */
} doc_op_t;

static doc_op_t ops[MAX_OPS];
static size_t nops;

static const char *scalar(yaml_document_t *d, yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = scalar(d, yaml_document_get_node(d, p->key));
        if (k != NULL && strcmp(k, key) == 0)
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* The operations under `paths`: method (upper case), path, operationId, x-berth-permission */
static int load_ops(const char *file)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return -1;
    yaml_parser_t parser;
    yaml_document_t d;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    int rc = yaml_parser_load(&parser, &d) ? 0 : -1;
    yaml_parser_delete(&parser);
    fclose(f);
    if (rc != 0)
        return -1;
    yaml_node_t *paths = get(&d, yaml_document_get_root_node(&d), "paths");
    static const char *const methods[] = {"get", "put", "post", "delete", "head", "patch", "options", "trace"};
    for (yaml_node_pair_t *p = paths != NULL && paths->type == YAML_MAPPING_NODE ? paths->data.mapping.pairs.start : NULL;
         p != NULL && p < paths->data.mapping.pairs.top; p++) {
        yaml_node_t *item = yaml_document_get_node(&d, p->value);
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]) && nops < MAX_OPS; m++) {
            yaml_node_t *op = get(&d, item, methods[m]);
            if (op == NULL)
                continue;
            doc_op_t *o = &ops[nops++];
            for (size_t i = 0; methods[m][i] != '\0' && i < sizeof(o->method) - 1; i++)
                o->method[i] = (char)toupper((unsigned char)methods[m][i]);
            snprintf(o->path, sizeof(o->path), "%s", scalar(&d, yaml_document_get_node(&d, p->key)));
            snprintf(o->op_id, sizeof(o->op_id), "%s", scalar(&d, get(&d, op, "operationId")) ?: "");
            snprintf(o->perm, sizeof(o->perm), "%s", scalar(&d, get(&d, op, "x-berth-permission")) ?: "");
        }
    }
    yaml_document_delete(&d);
    return paths != NULL ? 0 : -1;
}

/* 1 if `earlier` matches every request `later` matches (same method; each segment a parameter or equal) */
static int shadows(const berth_api_route_t *earlier, const berth_api_route_t *later)
{
    if (strcmp(earlier->method, later->method) != 0)
        return 0;
    char buf[512], *seg[32], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", later->path);
    for (char *t = strtok_r(buf, "/", &save); t != NULL && n < 32; t = strtok_r(NULL, "/", &save))
        seg[n++] = t;
    return berth_api_route_match(earlier, seg, n); /* a "{x}" of later's matches only a parameter of earlier's */
}

/* A request context for route lookups and permission checks (no database: only the kinds that need none) */
typedef struct {
    berth_api_req_t rq;
    berth_resp_t resp;
    berth_api_t a;
    char buf[256];
} fake_t;

static void fake(fake_t *f, const char *method, const char *path, int authed, int sysadmin)
{
    memset(f, 0, sizeof(*f));
    f->rq.method = method;
    f->rq.path = path;
    f->rq.path_len = strlen(path);
    berth_resp_init(&f->resp);
    f->a.rq = &f->rq;
    f->a.resp = &f->resp;
    f->a.authed = authed;
    f->a.who.sysadmin = sysadmin;
    snprintf(f->a.who.username, sizeof(f->a.who.username), "%s", authed ? "someone" : "");
    berth_api_split(&f->a, path, strlen(path));
}

static void unfake(fake_t *f)
{
    for (int i = 0; i < f->a.nseg; i++)
        free(f->a.seg[i]);
    berth_resp_dispose(&f->resp);
}

static const char *found(const char *method, const char *path)
{
    fake_t f;
    fake(&f, method, path, 0, 0);
    const berth_api_route_t *r = berth_api_route_find(&f.a);
    unfake(&f);
    return r != NULL ? r->operation_id : "(none)";
}

/* The status berth_api_permit answers for `kind`, or 0 when it lets the request through */
static int permit(berth_api_perm_kind_t kind, int authed, int sysadmin)
{
    berth_api_route_t row = {"GET", "/x", {kind, 0, 0}, NULL, "x"};
    fake_t f;
    fake(&f, "GET", "x", authed, sysadmin);
    f.a.route = &row;
    int rc = berth_api_permit(&f.a), status = rc == 0 ? 0 : f.resp.status;
    unfake(&f);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2 || load_ops(argv[1]) != 0) {
        ok(0, "read the OpenAPI document %s", argc > 1 ? argv[1] : "(none given)");
        return tap_done();
    }
    ok(nops > 40, "the document has %zu operations", nops);

    size_t nrows = 0, bad_perm = 0, missing = 0, dup_ids = 0, shadowed = 0, not_project = 0;
    char name[160];
    for (const berth_api_route_t *const *t = berth_api_route_tables; *t != NULL; t++)
        for (const berth_api_route_t *r = *t; r->method != NULL; r++) {
            nrows++;
            berth_api_perm_name(&r->perm, name, sizeof(name));
            printf("# %-6s %-95s %-28s %s\n", r->method, r->path, name, r->operation_id);
            if (r->perm.kind == BERTH_API_DENY || r->handler == NULL) {
                bad_perm++;
                printf("# ^ no permission or no handler\n");
            }
            if (r->perm.kind == BERTH_API_PROJECT && strncmp(r->path, "/projects/{", 11) != 0) {
                not_project++;
                printf("# ^ a project permission on a path that names no project\n");
            }
            doc_op_t *o = NULL;
            for (size_t i = 0; i < nops && o == NULL; i++)
                if (strcmp(ops[i].method, r->method) == 0 && strcmp(ops[i].path, r->path) == 0)
                    o = &ops[i];
            if (o == NULL || strcmp(o->op_id, r->operation_id) != 0 || strcmp(o->perm, name) != 0) {
                missing++;
                printf("# ^ the document has %s\n", o == NULL                                ? "no such operation"
                                                    : strcmp(o->op_id, r->operation_id) != 0 ? o->op_id
                                                                                             : o->perm);
            }
            if (o != NULL)
                o->seen++;
            for (const berth_api_route_t *const *t2 = berth_api_route_tables; *t2 != NULL && t2 <= t; t2++)
                for (const berth_api_route_t *e = *t2; e->method != NULL && !(t2 == t && e >= r); e++) {
                    if (strcmp(e->operation_id, r->operation_id) == 0) {
                        dup_ids++;
                        printf("# ^ operationId also on %s %s\n", e->method, e->path);
                    }
                    if (shadows(e, r)) {
                        shadowed++;
                        printf("# ^ unreachable: %s %s comes first\n", e->method, e->path);
                    }
                }
        }
    ok(nrows == nops, "%zu rows for %zu operations", nrows, nops);
    ok(bad_perm == 0, "every row has a permission and a handler (%zu do not)", bad_perm);
    ok(not_project == 0, "project permissions only on /projects/{...} paths (%zu others)", not_project);
    ok(missing == 0, "every row is an operation of the document with its operationId and x-berth-permission (%zu not)", missing);
    ok(dup_ids == 0, "operationIds are unique (%zu repeated)", dup_ids);
    ok(shadowed == 0, "no row is hidden behind an earlier one (%zu are)", shadowed);
    size_t unrouted = 0;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].seen != 1) {
            unrouted++;
            printf("# %s %s (%s) has %d rows\n", ops[i].method, ops[i].path, ops[i].op_id, ops[i].seen);
        }
    ok(unrouted == 0, "every operation of the document has exactly one row (%zu do not)", unrouted);

    /* the lookup the dispatcher does */
    ok(strcmp(found("GET", "users/current"), "getCurrentUserInfo") == 0, "GET users/current is not a user id");
    ok(strcmp(found("GET", "users/7"), "getUser") == 0, "GET users/7");
    ok(strcmp(found("HEAD", "projects"), "headProject") == 0, "HEAD projects has its own row");
    ok(strcmp(found("HEAD", "projects/team"), "getProject") == 0, "HEAD on a GET row answers it");
    ok(strcmp(found("POST", "isa/resolve:batch"), "isaResolveBatch") == 0, "a ':' inside a literal segment");
    ok(strcmp(found("GET", "projects/team/repositories/app%252Fsub/artifacts/v1/tags"), "listTags") == 0,
       "a repository name with an encoded '/' is one segment");
    ok(strcmp(found("PATCH", "projects/team"), "(none)") == 0, "no row for PATCH projects/{p}");
    ok(strcmp(found("GET", "projects/team/members/1/extra"), "(none)") == 0, "no row for a longer path");
    fake_t f;
    fake(&f, "DELETE", "projects/team/repositories/app/artifacts/v1/tags/latest", 0, 0);
    f.a.route = berth_api_route_find(&f.a);
    ok(f.a.route != NULL && strcmp(berth_api_arg(&f.a, "tag_name"), "latest") == 0 &&
           strcmp(berth_api_arg(&f.a, "reference"), "v1") == 0 && berth_api_arg(&f.a, "mid") == NULL,
       "berth_api_arg reads the matched row's parameters by name");
    unfake(&f);

    /* the permission check, from the table */
    ok(permit(BERTH_API_DENY, 1, 1) == 403, "a row without a permission is refused, even to a system admin");
    ok(permit(BERTH_API_ANYONE, 0, 0) == 0, "anyone: anonymous passes");
    ok(permit(BERTH_API_LOGIN, 0, 0) == 401, "login: anonymous 401");
    ok(permit(BERTH_API_LOGIN, 1, 0) == 0, "login: a user passes");
    ok(permit(BERTH_API_ADMIN, 0, 0) == 401, "system admin: anonymous 401");
    ok(permit(BERTH_API_ADMIN, 1, 0) == 403, "system admin: a user 403");
    ok(permit(BERTH_API_ADMIN, 1, 1) == 0, "system admin: an admin passes");
    return tap_done();
}
