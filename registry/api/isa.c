/*
 * ISA endpoints (issue #4): resolve (one node, a batch, and a GET form for shell scripts), the variant table of
 * an artifact, index assembly from existing tags, and the Kubernetes scheduler-extender verbs (filter,
 * prioritize) plus an affinity helper for the webhook pattern. Authorization is pull on each image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manifest.h"
#include "registry/api/internal.h"
#include "registry/api/routes.h"
#include "registry/service/cache.h"
#include "registry/service/isa.h"
#include "sql/registry.h"

/* May the caller pull this repository? Without the right, the image looks absent. */
static int may_pull(berth_api_t *a, const char *repo)
{
    char project[BERTH_NAME_MAX + 1];
    snprintf(project, sizeof(project), "%.*s", (int)berth_ref_project_len(repo, strlen(repo)), repo);
    berth_authz_t z;
    return berth_authz_project(a->c, a->authed ? &a->who : NULL, project, &z, NULL) == 0 && z.exists &&
           berth_authz_can(&z, BERTH_RES_REPOSITORY, BERTH_ACT_PULL);
}

static json_t *not_found(const char *image)
{
    return json_pack("{s:[{s:s,s:s}]}", "errors", "code", "NAME_UNKNOWN", "message", image != NULL ? image : "image unknown");
}

/* One resolution for a caller; returns the status and the body */
static int resolve_one(berth_api_t *a, const char *image, json_t *node, json_t *policy, json_t **out)
{
    berth_image_ref_t im;
    if (berth_ref_image_parse(&im, image) != 0) {
        *out = json_pack("{s:[{s:s,s:s}]}", "errors", "code", "NAME_INVALID", "message", "image must be [host/]name[:tag|@digest]");
        return 400;
    }
    if (!may_pull(a, im.name)) {
        *out = not_found(image);
        return a->authed ? 404 : 401;
    }
    return berth_isa_resolve(a->reg, a->c, im.host, im.name, im.ref, node, policy, out);
}

static int post_resolve(berth_api_t *a, int batch)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *image = json_string_value(json_object_get(body, "image"));
    json_t *policy = json_object_get(body, "policy"), *out = NULL;
    int status;
    if (!batch) {
        status = resolve_one(a, image, json_object_get(body, "node"), policy, &out);
    } else {
        json_t *nodes = json_object_get(body, "nodes"), *n;
        const char *name;
        out = json_object();
        status = json_is_object(nodes) ? 200 : 400;
        json_object_foreach(nodes, name, n)
        {
            json_t *r = NULL;
            int st = resolve_one(a, image, n, policy, &r);
            if (st == 401 || st == 404) { /* the image itself: one answer for the batch */
                json_decref(out);
                out = r;
                status = st;
                break;
            }
            json_object_set_new(out, name,
                                st == 200 ? json_pack("{s:o?}", "selected", json_incref(json_object_get(r, "selected")))
                                          : json_pack("{s:i,s:o}", "status", st, "error", json_incref(r)));
            json_decref(r);
        }
    }
    json_decref(body);
    if (status == 401 && !a->authed)
        berth_resp_header(a->resp, "www-authenticate", "Basic realm=\"berth\"");
    return berth_api_jsonv(a, status, out);
}

/* GET …/artifacts/{ref}/isa/resolve?arch=&level=&features=&os=&max_level=&prefer= */
static int get_resolve(berth_api_t *a, const char *host, const char *repo, const char *ref)
{
    json_t *node = json_object(), *policy = json_object(), *out = NULL;
    static const char *const keys[][2] = {{"arch", "architecture"}, {"level", "level"}, {"os", "os"}, {"target", "target"}};
    for (size_t i = 0; i < 4; i++) {
        const char *v = berth_api_param(a, keys[i][0]);
        if (v != NULL)
            json_object_set_new(node, keys[i][1], json_string(v));
    }
    const char *f = berth_api_param(a, "features");
    if (f != NULL) {
        json_t *arr = json_array();
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s", f);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
            json_array_append_new(arr, json_string(t));
        json_object_set_new(node, "features", arr);
    }
    const char *v;
    if ((v = berth_api_param(a, "max_level")) != NULL)
        json_object_set_new(policy, "max_level", json_string(v));
    if ((v = berth_api_param(a, "prefer")) != NULL)
        json_object_set_new(policy, "prefer", json_string(v));
    int status = berth_isa_resolve(a->reg, a->c, host, repo, ref, node, policy, &out);
    json_decref(node);
    json_decref(policy);
    return berth_api_jsonv(a, status, out);
}

/* ---- assemble --------------------------------------------------------------------------------------------- */

/* POST …/repositories/{r}/isa/assemble {"tag", "variants":[{"reference","level"?}]}: the canonical index, pushed */
static int assemble(berth_api_t *a)
{
    const char *repo = a->repo;
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    const char *tag = json_string_value(json_object_get(body, "tag"));
    json_t *vars = json_object_get(body, "variants"), *e;
    size_t i, n = json_array_size(vars);
    if (tag == NULL || !berth_ref_tag_valid(tag, strlen(tag)) || n == 0 || n > 64) {
        json_decref(body);
        return berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "tag and 1-64 variants are required");
    }
    typedef struct {
        json_t *desc;
        int arch, rank, nfeat;
    } entry_t;
    entry_t *ents = calloc(n, sizeof(*ents));
    int rc = 0;
    json_array_foreach(vars, i, e)
    {
        const char *ref = json_string_value(json_object_get(e, "reference"));
        const char *level = json_string_value(json_object_get(e, "level"));
        berth_db_manifest_t m = {0};
        berth_err_t err;
        if (ref == NULL || berth_db_manifest_get(a->c, repo, ref, strchr(ref, ':') != NULL, &m, &err) != 0) {
            rc = berth_api_fail(a, BERTH_OCI_MANIFEST_UNKNOWN, "variant %s not found in %s", ref != NULL ? ref : "?", repo);
            break;
        }
        /* the config says the platform; the level comes from the request or the config's variant */
        char carch[32] = "", cos[32] = "", cvar[32] = "";
        berth_isa_arch_t arch = berth_isa_config_platform(a->reg, m.content, m.len, carch, cos, cvar) == 0
                                    ? berth_isa_arch_parse(carch)
                                    : BERTH_ISA_ARCH_UNKNOWN;
        berth_isa_level_t l;
        int ok = arch != BERTH_ISA_ARCH_UNKNOWN &&
                 (level != NULL ? berth_isa_level_parse(arch, level, &l) : berth_isa_variant_parse(arch, cvar, &l)) == 0;
        if (ok) {
            char variant[16];
            berth_isa_level_variant(&l, variant, sizeof(variant));
            json_t *plat = json_pack("{s:s,s:s}", "architecture", berth_isa_arch_name(arch), "os", cos[0] ? cos : "linux");
            if (variant[0])
                json_object_set_new(plat, "variant", json_string(variant));
            ents[i].desc = json_pack("{s:s,s:s,s:I,s:o}", "mediaType", m.media_type, "digest", m.digest, "size", (json_int_t)m.len,
                                     "platform", plat);
            const char *feats = json_string_value(json_object_get(e, "features"));
            if (feats != NULL && feats[0]) {
                berth_isa_features_t f;
                berth_isa_features_clear(&f);
                berth_isa_features_add_list(&f, feats);
                char joined[1024];
                berth_isa_features_join(&f, joined, sizeof(joined));
                json_object_set_new(ents[i].desc, "annotations", json_pack("{s:s}", "io.berth.isa.features", joined));
                ents[i].nfeat = f.n;
            }
            ents[i].arch = arch;
            ents[i].rank = berth_isa_level_rank(&l);
        }
        berth_db_manifest_dispose(&m);
        if (!ok) {
            rc = berth_api_fail(a, BERTH_OCI_BAD_REQUEST, "variant %s: no platform in its config, or level %s unknown", ref,
                                level != NULL ? level : "(none)");
            break;
        }
    }
    if (rc == 0) {
        /* the ordering rule: by arch as first seen, then ascending level, fewer extra features first (stable) */
        for (size_t x = 1; x < n; x++)
            for (size_t y = x; y > 0; y--) {
                entry_t *p = &ents[y - 1], *q = &ents[y];
                int swap = p->arch == q->arch && (q->rank < p->rank || (q->rank == p->rank && q->nfeat < p->nfeat));
                if (!swap)
                    break;
                entry_t t = *p;
                *p = *q;
                *q = t;
            }
        json_t *mans = json_array();
        for (size_t x = 0; x < n; x++)
            json_array_append(mans, ents[x].desc);
        json_t *idx = json_pack("{s:i,s:s,s:o}", "schemaVersion", 2, "mediaType", BERTH_MT_OCI_INDEX, "manifests", mans);
        char *bytes = json_dumps(idx, JSON_COMPACT);
        json_decref(idx);
        berth_v2_req_t put = {.method = "PUT",
                              .content_type = BERTH_MT_OCI_INDEX,
                              .body = bytes,
                              .body_len = strlen(bytes),
                              .who = a->who.username,
                              .remote = a->rq->remote};
        put.route.kind = BERTH_ROUTE_MANIFEST;
        put.route.id = BERTH_V2_MANIFEST_PUT;
        snprintf(put.route.name, sizeof(put.route.name), "%.*s", BERTH_NAME_MAX, repo); /* checked: at most that long */
        snprintf(put.route.ref, sizeof(put.route.ref), "%s", tag);
        berth_resp_t r;
        berth_v2_handle(a->reg, &put, &r); /* the same checks and transaction as a client's PUT */
        if (r.status == 201) {
            json_t *ok = json_pack("{s:s,s:s}", "digest", berth_resp_get(&r, "docker-content-digest"), "tag", tag);
            const char *w = berth_resp_get(&r, "warning");
            if (w != NULL)
                berth_resp_header(a->resp, "warning", "%s", w);
            berth_api_jsonv(a, 201, ok);
            berth_resp_dispose(&r);
        } else {
            berth_resp_dispose(a->resp);
            *a->resp = r; /* the registry's own error */
            rc = -1;
        }
        free(bytes);
    }
    for (size_t x = 0; x < n; x++)
        json_decref(ents[x].desc);
    free(ents);
    json_decref(body);
    return rc;
}

/* ---- Kubernetes ------------------------------------------------------------------------------------------- */

/* Berth images of a pod (containers and init containers whose repository Berth holds and the caller may pull) */
static size_t pod_images(berth_api_t *a, json_t *pod, berth_image_ref_t *out, size_t max)
{
    size_t n = 0;
    static const char *const lists[] = {"containers", "initContainers"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), lists[l]), i, c)
        {
            berth_image_ref_t im;
            if (n < max && berth_ref_image_parse(&im, json_string_value(json_object_get(c, "image"))) == 0 &&
                may_pull(a, im.name) && berth_db_repo_exists(a->c, im.name, NULL) == 1)
                out[n++] = im;
        }
    }
    return n;
}

/* the node's labels as a resolve "node" object */
static json_t *node_of(json_t *node)
{
    json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    return json_pack("{s:O}", "labels", json_is_object(labels) ? labels : json_object());
}

static const char *node_name(json_t *node)
{
    return json_string_value(json_object_get(json_object_get(node, "metadata"), "name")) ?: "";
}

/* Score in [0, 10] for one image: 10 * (position of the selected level among the index's distinct levels of the
 * node's arch, counted from the bottom) / (number of those levels); -1 when nothing fits */
static int image_score(json_t *r)
{
    json_t *sel = json_object_get(r, "selected"), *c;
    if (sel == NULL)
        return -1;
    berth_isa_arch_t arch = berth_isa_arch_parse(json_string_value(json_object_get(json_object_get(r, "node"), "architecture")));
    berth_isa_level_t mine, l;
    if (berth_isa_level_parse(arch, json_string_value(json_object_get(sel, "level")), &mine) != 0)
        return 10;
    int ranks[64], n = 0, below = 0;
    size_t i;
    json_array_foreach(json_object_get(r, "candidates"), i, c)
    {
        if (berth_isa_arch_parse(json_string_value(json_object_get(c, "architecture"))) != arch ||
            berth_isa_level_parse(arch, json_string_value(json_object_get(c, "level")), &l) != 0)
            continue;
        int rk = berth_isa_level_rank(&l), dup = 0;
        for (int k = 0; k < n; k++)
            dup |= ranks[k] == rk;
        if (!dup && n < 64) {
            ranks[n++] = rk;
            below += rk <= berth_isa_level_rank(&mine);
        }
    }
    return n == 0 ? 10 : (10 * below + n / 2) / n;
}

/* The scheduler extender: filter (nodes where every image has a fitting variant) or prioritize (score them) */
static int k8s(berth_api_t *a, int filter)
{
    json_t *args = berth_api_body(a);
    if (args == NULL)
        return -1;
    json_t *pod = json_object_get(args, "Pod"), *items = json_object_get(json_object_get(args, "Nodes"), "items");
    berth_image_ref_t imgs[16];
    size_t nimg = pod_images(a, pod, imgs, 16), i;
    json_t *node, *out;
    if (filter) {
        json_t *pass = json_array(), *failed = json_object();
        json_array_foreach(items, i, node)
        {
            char reason[700] = "";
            json_t *nd = node_of(node);
            for (size_t k = 0; k < nimg && reason[0] == '\0'; k++) {
                json_t *r = NULL;
                int st = berth_isa_resolve(a->reg, a->c, imgs[k].host, imgs[k].name, imgs[k].ref, nd, NULL, &r);
                if (st == 409 || st == 400)
                    snprintf(reason, sizeof(reason), "berth: %s:%s has no variant for this node (%s)", imgs[k].name, imgs[k].ref,
                             st == 400 ? "node labels unusable" : "level or features missing");
                json_decref(r);
            }
            json_decref(nd);
            if (reason[0])
                json_object_set_new(failed, node_name(node), json_string(reason));
            else
                json_array_append(pass, node);
        }
        /* a CPU does not change by preempting pods: every refusal is unresolvable */
        out = json_pack("{s:{s:o},s:n,s:{},s:o,s:s}", "Nodes", "items", pass, "NodeNames", "FailedNodes",
                        "FailedAndUnresolvableNodes", failed, "Error", "");
    } else {
        out = json_array();
        json_array_foreach(items, i, node)
        {
            int score = 10;
            json_t *nd = node_of(node);
            for (size_t k = 0; k < nimg; k++) {
                json_t *r = NULL;
                berth_isa_resolve(a->reg, a->c, imgs[k].host, imgs[k].name, imgs[k].ref, nd, NULL, &r);
                int s = image_score(r);
                json_decref(r);
                if (s < score)
                    score = s < 0 ? 0 : s;
            }
            json_decref(nd);
            json_array_append_new(out, json_pack("{s:s,s:i}", "Host", node_name(node), "Score", nimg > 0 ? score : 0));
        }
    }
    json_decref(args);
    return berth_api_jsonv(a, 200, out);
}

/* POST isa/k8s/affinity {"images":[…]}: required node affinity (NFD labels) so a pod lands where a variant fits */
static int affinity(berth_api_t *a)
{
    json_t *body = berth_api_body(a);
    if (body == NULL)
        return -1;
    json_t *terms = json_array(), *img;
    size_t i;
    int rc = 0;
    json_array_foreach(json_object_get(body, "images"), i, img)
    {
        berth_image_ref_t im;
        json_t *table = NULL;
        berth_err_t err;
        if (berth_ref_image_parse(&im, json_string_value(img)) != 0 || !may_pull(a, im.name) ||
            berth_isa_table(a->c, im.name, im.ref, &table, &err) != 0) {
            rc = berth_api_fail(a, BERTH_OCI_NAME_UNKNOWN, "%s: unknown image", json_string_value(img) ?: "?");
            break;
        }
        /* per arch: the lowest level any variant needs, as "that arch and at least that level" */
        json_t *v;
        size_t j;
        json_array_foreach(json_object_get(table, "variants"), j, v)
        {
            const char *arch = json_string_value(json_object_get(v, "architecture"));
            berth_isa_level_t l;
            if (berth_isa_level_parse(berth_isa_arch_parse(arch), json_string_value(json_object_get(v, "level")), &l) != 0)
                continue;
            json_t *exprs = json_pack("[{s:s,s:s,s:[s]}]", "key", "kubernetes.io/arch", "operator", "In", "values", arch);
            if (l.arch == BERTH_ISA_AMD64 && l.major > 1) {
                char key[96];
                snprintf(key, sizeof(key), "feature.node.kubernetes.io/cpu-cpuid.X86_64_V%d", l.major);
                json_array_append_new(exprs, json_pack("{s:s,s:s}", "key", key, "operator", "Exists"));
            }
            json_array_append_new(terms, json_pack("{s:o}", "matchExpressions", exprs));
        }
        json_decref(table);
    }
    json_decref(body);
    if (rc != 0) {
        json_decref(terms);
        return rc;
    }
    return berth_api_jsonv(a, 200, json_pack("{s:{s:o}}", "required", "nodeSelectorTerms", terms));
}

static int resolve(berth_api_t *a)
{
    return post_resolve(a, 0);
}

static int resolve_batch(berth_api_t *a)
{
    return post_resolve(a, 1);
}

static int k8s_filter(berth_api_t *a)
{
    return k8s(a, 1);
}

static int k8s_prioritize(berth_api_t *a)
{
    return k8s(a, 0);
}

/* GET …/repositories/{r}/artifacts/{ref}/isa: the artifact's variant table */
static int variants(berth_api_t *a)
{
    json_t *t = NULL;
    berth_err_t err;
    if (berth_isa_table(a->c, a->repo, berth_api_arg(a, "reference"), &t, &err) != 0)
        return berth_api_err(a, &err);
    return berth_api_jsonv(a, 200, t);
}

static int artifact_resolve(berth_api_t *a)
{
    return get_resolve(a, "", a->repo, berth_api_arg(a, "reference"));
}

/* The /isa verbs check pull on each image they are given (absent to whoever may not pull it); the artifact
 * routes check the repository right of the route. */
const berth_api_route_t berth_api_isa_routes[] = {
    BERTH_API_ROUTE("POST", "/isa/resolve", BERTH_API_P_ANYONE, resolve, "isaResolve"),
    BERTH_API_ROUTE("POST", "/isa/resolve:batch", BERTH_API_P_ANYONE, resolve_batch, "isaResolveBatch"),
    BERTH_API_ROUTE("POST", "/isa/k8s/filter", BERTH_API_P_LOGIN, k8s_filter, "isaK8sFilter"),
    BERTH_API_ROUTE("POST", "/isa/k8s/prioritize", BERTH_API_P_LOGIN, k8s_prioritize, "isaK8sPrioritize"),
    BERTH_API_ROUTE("POST", "/isa/k8s/affinity", BERTH_API_P_ANYONE, affinity, "isaK8sAffinity"),
    BERTH_API_ROUTE("GET", "/projects/{project_name}/repositories/{repository_name}/artifacts/{reference}/isa",
                    BERTH_API_P_PROJECT(REPOSITORY, PULL), variants, "getArtifactIsa"),
    BERTH_API_ROUTE("GET", "/projects/{project_name}/repositories/{repository_name}/artifacts/{reference}/isa/resolve",
                    BERTH_API_P_PROJECT(REPOSITORY, PULL), artifact_resolve, "resolveArtifactIsa"),
    BERTH_API_ROUTE("POST", "/projects/{project_name}/repositories/{repository_name}/isa/assemble",
                    BERTH_API_P_PROJECT(REPOSITORY, PUSH), assemble, "assembleIsaIndex"),
    BERTH_API_ROUTES_END,
};
