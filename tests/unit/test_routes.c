/*
 * The /v2 route table (core/route.c) walked row by row: every route has a pattern, methods, a scope the gate can
 * ask for, a handler (or is the upload listener's), and no two rows share a method on one pattern; every pattern
 * parses back to its own row; and sample requests land on the route and the scope they always had.
 */
#include <stdio.h>
#include <string.h>

#include "auth/gate.h"
#include "core/route.h"
#include "registry/service/registry.h"
#include "tests/unit/tap.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const char *method_names[] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OPTIONS"};

/* A path for a pattern: the variables replaced by sample values */
static void instantiate(const char *pattern, char *out, size_t outsz)
{
    static const struct {
        const char *var, *value;
    } vals[] = {{"<name>", "proj/app"}, {"<reference>", "v1"}, {"<digest>", "sha256:" HEX64}, {"<uuid>", "0f-ab"}};
    size_t o = 0;
    for (const char *p = pattern; *p != '\0' && o + 1 < outsz;) {
        size_t i = 0;
        for (; i < sizeof(vals) / sizeof(vals[0]); i++)
            if (strncmp(p, vals[i].var, strlen(vals[i].var)) == 0)
                break;
        if (i < sizeof(vals) / sizeof(vals[0])) {
            o += (size_t)snprintf(out + o, outsz - o, "%s", vals[i].value);
            p += strlen(vals[i].var);
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

static void test_table(void)
{
    for (int id = 1; id < BERTH_V2__COUNT; id++) {
        const berth_route_def_t *d = &berth_routes[id];
        ok(d->pattern != NULL && strncmp(d->pattern, "/v2/", 4) == 0, "route %d has a /v2 pattern", id);
        if (d->pattern == NULL)
            continue;
        ok(d->methods != 0 && d->kind != BERTH_ROUTE_NONE, "%s: methods and a kind", d->pattern);
        /* the handler column (registry/service/v2.c) has every route but the upload listener's */
        ok(berth_v2_answers((berth_route_id_t)id) == (d->kind != BERTH_ROUTE_UPLOAD), "%s (route %d): %s", d->pattern, id,
           d->kind == BERTH_ROUTE_UPLOAD ? "the upload listener's, no /v2 handler" : "has a handler");
        for (int other = id + 1; other < BERTH_V2__COUNT; other++)
            ok(berth_routes[other].pattern == NULL || strcmp(berth_routes[other].pattern, d->pattern) != 0 ||
                   (berth_routes[other].methods & d->methods) == 0,
               "routes %d and %d share no method on %s", id, other, d->pattern);

        /* the pattern parses back to this row for each of its methods, and the gate can ask for its scope */
        char path[512];
        instantiate(d->pattern, path, sizeof(path));
        for (size_t m = 0; m < sizeof(method_names) / sizeof(method_names[0]); m++) {
            if ((d->methods & berth_route_method(method_names[m])) == 0)
                continue;
            berth_route_t r;
            berth_err_t err;
            int rc = berth_route_parse(&r, path, strlen(path), &err);
            ok(rc == 0 && berth_route_select(&r, method_names[m], &err) == 0 && (int)r.id == id && r.kind == d->kind,
               "%s %s -> route %d", method_names[m], path, id);
            berth_scope_t s;
            int need = berth_gate_required(&s, &r);
            if (d->scope == NULL) {
                ok(d->kind == BERTH_ROUTE_BASE && need == 0, "%s needs no scope (only the base endpoint may)", path);
            } else {
                /* a repository's route asks for that repository; the catalog is the only registry-wide scope */
                int named = strstr(d->pattern, "<name>") != NULL;
                int want =
                    named ? strcmp(s.type, "repository") == 0 && strcmp(s.name, "proj/app") == 0
                          : strcmp(s.type, "registry") == 0 && strcmp(s.name, "catalog") == 0 && d->kind == BERTH_ROUTE_CATALOG;
                ok(need == 1 && s.actions != 0 && want, "%s %s needs %s:%s (%u)", method_names[m], path, s.type, s.name, s.actions);
            }
        }
    }
}

/* What clients always got: the route and the scope of sample requests, as the gate asked before the table */
static void test_samples(void)
{
    static const struct {
        const char *method, *path;
        berth_route_id_t id;
        const char *scope; /* as a challenge names it; "" none */
    } cases[] = {
        {"GET", "/v2/", BERTH_V2_BASE, ""},
        {"HEAD", "/v2", BERTH_V2_BASE, ""},
        {"POST", "/v2/", BERTH_V2_BASE, ""},
        {"GET", "/v2/_catalog", BERTH_V2_CATALOG, "registry:catalog:*"},
        {"GET", "/v2/a/b/tags/list", BERTH_V2_TAGS, "repository:a/b:pull"},
        {"HEAD", "/v2/a/manifests/latest", BERTH_V2_MANIFEST_GET, "repository:a:pull"},
        {"GET", "/v2/a/manifests/sha256:" HEX64, BERTH_V2_MANIFEST_GET, "repository:a:pull"},
        {"PUT", "/v2/a/manifests/v1", BERTH_V2_MANIFEST_PUT, "repository:a:pull,push"},
        {"DELETE", "/v2/a/manifests/v1", BERTH_V2_MANIFEST_DELETE, "repository:a:delete"},
        {"GET", "/v2/x/blobs/y/blobs/sha256:" HEX64, BERTH_V2_BLOB_GET, "repository:x/blobs/y:pull"},
        {"DELETE", "/v2/a/blobs/sha256:" HEX64, BERTH_V2_BLOB_DELETE, "repository:a:delete"},
        {"GET", "/v2/a/referrers/sha256:" HEX64, BERTH_V2_REFERRERS, "repository:a:pull"},
        {"POST", "/v2/a/blobs/uploads/", BERTH_V2_UPLOAD_START, "repository:a:pull,push"},
        {"POST", "/v2/a/blobs/uploads", BERTH_V2_UPLOAD_START, "repository:a:pull,push"},
        {"GET", "/v2/a/blobs/uploads/0f-ab", BERTH_V2_UPLOAD_STATUS, "repository:a:push"},
        {"PATCH", "/v2/a/blobs/uploads/0f-ab", BERTH_V2_UPLOAD_CHUNK, "repository:a:pull,push"},
        {"PUT", "/v2/a/blobs/uploads/0f-ab", BERTH_V2_UPLOAD_FINISH, "repository:a:pull,push"},
        {"DELETE", "/v2/a/blobs/uploads/0f-ab", BERTH_V2_UPLOAD_CANCEL, "repository:a:push"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        berth_route_t r;
        berth_err_t err;
        berth_scope_t s;
        char scope[300] = "";
        int rc = berth_route_parse(&r, cases[i].path, strlen(cases[i].path), &err);
        if (rc == 0)
            rc = berth_route_select(&r, cases[i].method, &err);
        if (rc == 0 && berth_gate_required(&s, &r))
            berth_scope_format(&s, scope, sizeof(scope));
        ok(rc == 0 && r.id == cases[i].id && strcmp(scope, cases[i].scope) == 0, "%s %s: route %d, scope '%s'", cases[i].method,
           cases[i].path, (int)r.id, scope);
    }
    /* a method the table has no row for is 405, whatever the repository */
    static const struct {
        const char *method, *path;
    } refused[] = {{"POST", "/v2/_catalog"},
                   {"DELETE", "/v2/a/tags/list"},
                   {"POST", "/v2/a/manifests/v1"},
                   {"PATCH", "/v2/a/blobs/sha256:" HEX64},
                   {"PUT", "/v2/a/referrers/sha256:" HEX64},
                   {"POST", "/v2/a/blobs/uploads/0f-ab"},
                   {"PATCH", "/v2/a/blobs/uploads/"},
                   {"OPTIONS", "/v2/a/manifests/v1"}};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        berth_route_t r;
        berth_err_t err;
        int rc = berth_route_parse(&r, refused[i].path, strlen(refused[i].path), &err);
        ok(rc == 0 && berth_route_select(&r, refused[i].method, &err) == BERTH_EINVAL && err.oci == BERTH_OCI_METHOD &&
               berth_err_status(err.oci) == 405 && r.id == BERTH_V2_NONE,
           "%s %s: 405", refused[i].method, refused[i].path);
    }
    berth_route_t none = {0};
    berth_scope_t s;
    ok(berth_gate_required(&s, &none) == 1 && strcmp(s.type, "registry") == 0 && s.actions == BERTH_ACTION_ALL,
       "an unrouted request needs what only system administrators hold (fails closed)");
}

int main(void)
{
    test_table();
    test_samples();
    return tap_done();
}
