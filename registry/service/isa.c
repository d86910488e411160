#include "registry/service/isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "core/manifest.h"
#include "registry/service/image_config.h"
#include "sql/isa.h"
#include "sql/registry.h"

typedef struct {
    berth_registry_t *reg;
    berth_dbconn_t *c;
    const char *repo;
} cfg_ctx_t;

int berth_isa_config_platform(berth_registry_t *reg, const char *manifest, size_t mlen, char arch[32], char os[32],
                              char variant[32])
{
    json_t *man = json_loadb(manifest, mlen, 0, NULL);
    const char *cd = json_string_value(json_object_get(json_object_get(man, "config"), "digest"));
    size_t len = 0;
    char *cfg = cd != NULL ? berth_image_config_blob(reg, cd, &len) : NULL;
    json_decref(man);
    json_t *c = cfg != NULL ? json_loadb(cfg, len, 0, NULL) : NULL;
    free(cfg);
    if (!json_is_object(c)) {
        json_decref(c);
        return -1;
    }
    snprintf(arch, 32, "%s", json_string_value(json_object_get(c, "architecture")) ?: "");
    snprintf(os, 32, "%s", json_string_value(json_object_get(c, "os")) ?: "");
    snprintf(variant, 32, "%s", json_string_value(json_object_get(c, "variant")) ?: "");
    json_decref(c);
    return 0;
}

/* The config platform of a child manifest in the same repository (the index check's callback) */
static int config_of(void *ctx, const char *digest, char arch[32], char os[32], char variant[32])
{
    cfg_ctx_t *x = ctx;
    berth_db_manifest_t m = {0};
    if (berth_db_manifest_get(x->c, x->repo, digest, 1, &m, NULL) != 0)
        return -1;
    int rc = berth_isa_config_platform(x->reg, m.content, m.len, arch, os, variant);
    berth_db_manifest_dispose(&m);
    return rc;
}

static void project_of(const char *repo, char *out, size_t outsz)
{
    snprintf(out, outsz, "%.*s", (int)berth_ref_project_len(repo, strlen(repo)), repo);
}

int berth_isa_push_check(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *body, size_t len, char **rows_out,
                         berth_resp_t *resp, berth_err_t *err)
{
    *rows_out = NULL;
    char project[BERTH_NAME_MAX + 1], policy[32];
    project_of(repo, project, sizeof(project));
    int rc = berth_db_isa_policy(c, project, policy, sizeof(policy), err);
    if (rc != 0)
        return rc;
    berth_isa_policy_mode_t mode = strncmp(policy, "off", 3) == 0      ? BERTH_ISA_POLICY_OFF
                                   : strncmp(policy, "strict", 6) == 0 ? BERTH_ISA_POLICY_STRICT
                                                                       : BERTH_ISA_POLICY_WARN;
    cfg_ctx_t ctx = {.reg = reg, .c = c, .repo = repo};
    berth_isa_report_t r;
    if (berth_isa_index_check(body, len, mode, config_of, &ctx, &r) != 0)
        return 0; /* not an index: nothing to check */
    if (r.nerrors > 0) {
        char msg[256];
        size_t o = (size_t)snprintf(msg, sizeof(msg), "isa: %s", r.errors[0]);
        for (int i = 1; i < r.nerrors && o < sizeof(msg); i++) /* every error, as far as the message holds them */
            o += (size_t)snprintf(msg + o, sizeof(msg) - o, "; %s", r.errors[i]);
        for (int i = 0; i < r.nerrors; i++)
            berth_log_info("manifest for %s refused: isa: %s", repo, r.errors[i]);
        berth_isa_report_dispose(&r);
        return berth_err_set(err, BERTH_OCI_MANIFEST_INVALID, "%s", msg);
    }
    for (int i = 0; i < r.nwarnings && i < 6; i++) {
        for (char *q = r.warnings[i]; *q; q++)
            if (*q == '"' || *q == '\\')
                *q = '\''; /* a quoted-string in the header */
        berth_resp_header(resp, "warning", "299 - \"isa: %s\"", r.warnings[i]);
    }
    if (r.nvariants > 0)
        *rows_out = berth_isa_variants_json(r.variants, r.nvariants);
    berth_isa_report_dispose(&r);
    return 0;
}

/* ---- node descriptions ------------------------------------------------------------------------------------ */

static int node_from_json(json_t *j, berth_isa_node_t *n, char *why, size_t whysz)
{
    memset(n, 0, sizeof(*n));
    json_t *labels = json_object_get(j, "labels");
    const char *arch_s = json_string_value(json_object_get(j, "architecture"));
    const char *level = json_string_value(json_object_get(j, "level"));
    json_t *flags = json_object_get(j, "flags");
    if (json_is_object(labels) && arch_s == NULL && !json_is_array(flags) && level == NULL) {
        const char *keys[256], *vals[256], *k;
        size_t cnt = 0;
        json_t *v;
        json_object_foreach(labels, k, v) if (cnt < 256 && json_is_string(v))
        {
            keys[cnt] = k;
            vals[cnt++] = json_string_value(v);
        }
        if (berth_isa_node_from_labels(keys, vals, cnt, n) != 0) {
            snprintf(why, whysz, "labels name no kubernetes.io/arch");
            return -1;
        }
        return 0;
    }
    berth_isa_arch_t arch = berth_isa_arch_parse(arch_s);
    if (arch == BERTH_ISA_ARCH_UNKNOWN) {
        snprintf(why, whysz, "node.architecture must be amd64, arm64 or ppc64le");
        return -1;
    }
    snprintf(n->os, sizeof(n->os), "%s", json_string_value(json_object_get(j, "os")) ?: "linux");
    snprintf(n->target, sizeof(n->target), "%s", json_string_value(json_object_get(j, "target")) ?: "");
    berth_isa_variant_parse(arch, NULL, &n->level);
    berth_isa_features_t extra;
    berth_isa_features_clear(&extra);
    size_t i;
    json_t *f;
    json_array_foreach(flags, i, f) if (json_is_string(f)) berth_isa_features_add(&extra, json_string_value(f));
    json_array_foreach(json_object_get(j, "features"), i, f) if (json_is_string(f))
        berth_isa_features_add(&extra, json_string_value(f));
    berth_isa_level_t given;
    if (level != NULL && berth_isa_level_parse(arch, level, &given) != 0) {
        snprintf(why, whysz, "unknown %s level %s", arch_s, level);
        return -1;
    }
    if (json_is_array(flags)) {
        n->level = berth_isa_level_from_flags(arch, &extra);
        n->level_source = "flags";
        if (level != NULL && berth_isa_level_rank(&given) != berth_isa_level_rank(&n->level) && arch == BERTH_ISA_AMD64) {
            char name[24];
            berth_isa_level_name(&n->level, name, sizeof(name));
            snprintf(why, whysz, "node.level %s disagrees with its flags (%s)", level, name);
            return -1;
        }
        if (level != NULL)
            n->level = given; /* arm64/POWER: the version is not in the flags */
    } else if (level != NULL) {
        n->level = given;
        n->level_source = "level";
    } else {
        n->level_source = "default";
    }
    berth_isa_level_features(&n->level, &n->features);
    for (int k = 0; k < extra.n; k++)
        berth_isa_features_add(&n->features, extra.names[k]);
    return 0;
}

static json_t *features_json(const berth_isa_features_t *f)
{
    json_t *a = json_array();
    for (int i = 0; i < f->n; i++)
        json_array_append_new(a, json_string(f->names[i]));
    return a;
}

static json_t *oci_error(const char *code, const char *msg)
{
    return json_pack("{s:[{s:s,s:s}]}", "errors", "code", code, "message", msg);
}

/* select for one node over rows already loaded; the response object and status */
static int resolve_rows(const char *host, const char *repo, const char *index_digest, berth_isa_variant_t *v, size_t n,
                        json_t *nodej, json_t *policy, int project_scan, json_t **result)
{
    berth_isa_node_t node;
    char why[160];
    if (!json_is_object(nodej) || node_from_json(nodej, &node, why, sizeof(why)) != 0) {
        *result = oci_error("ISA_NODE_INVALID", json_is_object(nodej) ? why : "node must be an object");
        return 400;
    }
    berth_isa_policy_t pol = {0};
    const char *maxl = json_string_value(json_object_get(policy, "max_level"));
    if (maxl != NULL) {
        if (berth_isa_level_parse(node.level.arch, maxl, &pol.max_level) != 0) {
            *result = oci_error("ISA_NODE_INVALID", "policy.max_level is not a level of the node's architecture");
            return 400;
        }
        pol.has_max_level = 1;
    }
    const char *prefer = json_string_value(json_object_get(policy, "prefer"));
    pol.prefer_lowest = prefer != NULL && strcmp(prefer, "lowest") == 0;
    json_t *au = json_object_get(policy, "allow_unverified");
    pol.require_scan_pass = project_scan ? !json_is_true(au) : json_is_false(au);
    berth_isa_choice_t *ch = calloc(n + 1, sizeof(*ch));
    int best = berth_isa_select(v, n, &node, &pol, ch);
    char lname[24], ref[600];
    berth_isa_level_name(&node.level, lname, sizeof(lname));
    json_t *cands = json_array();
    for (size_t i = 0; i < n; i++) {
        char vl[24];
        berth_isa_level_name(&v[i].level, vl, sizeof(vl));
        json_t *c = json_pack("{s:s,s:s,s:s,s:o,s:i,s:b}", "digest", v[i].digest, "architecture",
                              berth_isa_arch_name(v[i].level.arch), "level", vl, "features", features_json(&v[i].features),
                              "position", v[i].position, "compatible", ch[i].compatible);
        if (ch[i].compatible)
            json_object_set_new(c, "rank", json_integer(ch[i].rank));
        else {
            json_object_set_new(c, "missing", features_json(&ch[i].missing));
            json_object_set_new(c, "reason", json_string(ch[i].why));
        }
        if (v[i].target[0])
            json_object_set_new(c, "target", json_string(v[i].target));
        json_object_set_new(c, "scan", json_pack("{s:s}", "status", v[i].scan_status[0] ? v[i].scan_status : "none"));
        json_array_append_new(cands, c);
    }
    json_t *nodeout = json_pack("{s:s,s:s,s:s,s:o,s:s}", "os", node.os, "architecture", berth_isa_arch_name(node.level.arch),
                                "level", lname, "features", features_json(&node.features), "level_source", node.level_source);
    *result = json_pack("{s:s,s:o,s:o}", "index_digest", index_digest, "node", nodeout, "candidates", cands);
    int status = 200;
    if (best < 0) {
        json_object_set_new(*result, "errors",
                            json_pack("[{s:s,s:s}]", "code", "ISA_NO_COMPATIBLE_VARIANT", "message", "no variant fits this node"));
        status = 409;
    } else {
        char vl[24];
        berth_isa_level_name(&v[best].level, vl, sizeof(vl));
        snprintf(ref, sizeof(ref), "%s%s%s@%s", host != NULL ? host : "", host != NULL && host[0] ? "/" : "", repo, v[best].digest);
        json_object_set_new(*result, "selected",
                            json_pack("{s:s,s:s,s:s,s:o,s:s?,s:i,s:{s:s}}", "digest", v[best].digest, "reference", ref, "level", vl,
                                      "features", features_json(&v[best].features), "target",
                                      v[best].target[0] ? v[best].target : NULL, "position", v[best].position, "scan", "status",
                                      v[best].scan_status[0] ? v[best].scan_status : "none"));
    }
    free(ch);
    return status;
}

/* the variants of repo:ref; a plain manifest is one variant of itself (level from its config) */
static int load_variants(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *ref, char digest[BERTH_DIGEST_MAX],
                         berth_isa_variant_t **v, size_t *n, berth_err_t *err)
{
    char *rows = NULL, *mt = NULL;
    int rc = berth_db_isa_variants(c, repo, ref, digest, &rows, &mt, err);
    if (rc != 0)
        return rc;
    rc = berth_isa_variants_parse(rows, v, n);
    if (rc == 0 && *n == 0 && mt != NULL && strstr(mt, "index") == NULL && strstr(mt, "list") == NULL) {
        cfg_ctx_t ctx = {.reg = reg, .c = c, .repo = repo};
        char arch[32], os[32], variant[32];
        berth_isa_arch_t a;
        if (config_of(&ctx, digest, arch, os, variant) == 0 && (a = berth_isa_arch_parse(arch)) != BERTH_ISA_ARCH_UNKNOWN &&
            berth_isa_variant_parse(a, variant, &(*v)[0].level) == 0) {
            snprintf((*v)[0].digest, sizeof((*v)[0].digest), "%s", digest);
            snprintf((*v)[0].os, sizeof((*v)[0].os), "%.15s", os);
            *n = 1;
        }
    }
    free(rows);
    free(mt);
    if (rc != 0)
        berth_err_set(err, BERTH_OCI_INTERNAL, "bad variant rows");
    return rc;
}

int berth_isa_resolve(berth_registry_t *reg, berth_dbconn_t *c, const char *host, const char *repo, const char *ref, json_t *node,
                      json_t *policy, json_t **result)
{
    berth_err_t err;
    berth_err_clear(&err);
    char digest[BERTH_DIGEST_MAX], project[BERTH_NAME_MAX + 1], pol[32] = "";
    berth_isa_variant_t *v = NULL;
    size_t n = 0;
    if (load_variants(reg, c, repo, ref, digest, &v, &n, &err) != 0) {
        *result = oci_error(berth_err_oci_name(err.oci), err.msg[0] ? err.msg : "manifest unknown");
        return berth_err_status(err.oci);
    }
    project_of(repo, project, sizeof(project));
    berth_db_isa_policy(c, project, pol, sizeof(pol), NULL);
    int status = resolve_rows(host, repo, digest, v, n, node, policy, strstr(pol, "+scan") != NULL, result);
    json_object_set_new(*result, "image",
                        json_sprintf("%s%s%s%s%s", host != NULL ? host : "", host != NULL && host[0] ? "/" : "", repo,
                                     strchr(ref, ':') != NULL ? "@" : ":", ref));
    free(v);
    return status;
}

int berth_isa_table(berth_dbconn_t *c, const char *repo, const char *ref, json_t **out, berth_err_t *err)
{
    char digest[BERTH_DIGEST_MAX], *rows = NULL;
    int rc = berth_db_isa_variants(c, repo, ref, digest, &rows, NULL, err);
    if (rc != 0)
        return rc;
    *out = json_pack("{s:s,s:o}", "index_digest", digest, "variants", json_loads(rows, 0, NULL));
    free(rows);
    return 0;
}

/* ---- the ISA view ----------------------------------------------------------------------------------------- */

/* "x86-64-v3", "armv8.2-a+sve+i8mm", "power9" into a node */
static int view_node(const char *view, berth_isa_node_t *n)
{
    memset(n, 0, sizeof(*n));
    char lvl[64];
    size_t len = strcspn(view, "+");
    if (len >= sizeof(lvl))
        return -1;
    memcpy(lvl, view, len);
    lvl[len] = '\0';
    berth_isa_arch_t arch = strncmp(lvl, "x86-64", 6) == 0  ? BERTH_ISA_AMD64
                            : strncmp(lvl, "armv", 4) == 0  ? BERTH_ISA_ARM64
                            : strncmp(lvl, "power", 5) == 0 ? BERTH_ISA_PPC64LE
                                                            : BERTH_ISA_ARCH_UNKNOWN;
    if (berth_isa_level_parse(arch, lvl, &n->level) != 0)
        return -1;
    snprintf(n->os, sizeof(n->os), "linux");
    berth_isa_level_features(&n->level, &n->features);
    for (const char *p = view + len; *p == '+';) {
        p++;
        size_t l = strcspn(p, "+");
        char f[BERTH_ISA_FEATURE_LEN];
        if (l == 0 || l >= sizeof(f))
            return -1;
        memcpy(f, p, l);
        f[l] = '\0';
        if (!berth_isa_feature_known(arch, f))
            return -1;
        berth_isa_features_add(&n->features, f);
        p += l;
    }
    n->level_source = "view";
    return 0;
}

/*
 * The derived index: per (os, arch) of the view, only the best variant, its platform reduced to {architecture,
 * os} so containerd's default matcher takes it; other entries unchanged. Deterministic bytes.
 */
static char *derive(const char *content, size_t len, const char *view, const berth_isa_node_t *node, const char *source,
                    size_t *out_len)
{
    berth_isa_report_t r;
    if (berth_isa_index_check(content, len, BERTH_ISA_POLICY_OFF, NULL, NULL, &r) != 0)
        return NULL;
    berth_isa_choice_t *ch = calloc(r.nvariants + 1, sizeof(*ch));
    int best = berth_isa_select(r.variants, r.nvariants, node, NULL, ch);
    json_t *root = json_loadb(content, len, 0, NULL), *mans = json_object_get(root, "manifests"), *out = json_array(), *d;
    size_t i;
    json_array_foreach(mans, i, d)
    {
        int is_variant = -1;
        for (size_t k = 0; k < r.nvariants; k++)
            if (r.variants[k].position == (int)i)
                is_variant = (int)k;
        int same_arch = is_variant >= 0 && r.variants[is_variant].level.arch == node->level.arch;
        if (!same_arch) {
            json_array_append(out, d);
            continue;
        }
        if (is_variant != best)
            continue;
        json_t *copy = json_deep_copy(d), *plat = json_object_get(copy, "platform");
        json_object_del(plat, "variant");
        json_object_del(plat, "features");
        json_t *ann = json_object_get(copy, "annotations");
        if (!json_is_object(ann)) {
            ann = json_object();
            json_object_set_new(copy, "annotations", ann);
        }
        json_object_set_new(ann, "io.berth.isa.view.level", json_string(view));
        json_object_set_new(ann, "io.berth.isa.view.source", json_string(source));
        json_array_append_new(out, copy);
    }
    json_object_set_new(root, "manifests", out);
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    free(ch);
    berth_isa_report_dispose(&r);
    *out_len = strlen(s);
    return s;
}

void berth_isa_view(berth_registry_t *reg, const char *view, const berth_v2_req_t *rq, berth_resp_t *resp)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_resp_init(resp);
    berth_isa_node_t node;
    if (view_node(view, &node) != 0) { /* 404, not 400: containerd then falls back to its next host */
        berth_err_set(&err, BERTH_OCI_NAME_UNKNOWN, "unknown ISA view %s", view);
        return berth_resp_error(resp, &err);
    }
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL)
        return berth_resp_error(resp, &err);
    berth_db_manifest_t m = {0};
    char *body = NULL;
    size_t len = 0;
    const char *mt = BERTH_MT_OCI_INDEX;
    char digest[BERTH_DIGEST_MAX] = "";
    int rc = berth_db_manifest_get(c, rq->route.name, rq->route.ref, rq->route.ref_is_digest, &m, &err);
    if (rc != 0 && rq->route.ref_is_digest && berth_db_isa_view_get(c, rq->route.name, rq->route.ref, &body, &len, NULL) == 0) {
        snprintf(digest, sizeof(digest), "%.135s", rq->route.ref); /* a view index asked for by its digest */
        rc = 0;
    } else if (rc == 0 && (strcmp(m.media_type, BERTH_MT_OCI_INDEX) == 0 || strcmp(m.media_type, BERTH_MT_DOCKER_LIST) == 0)) {
        mt = strcmp(m.media_type, BERTH_MT_DOCKER_LIST) == 0 ? BERTH_MT_DOCKER_LIST : BERTH_MT_OCI_INDEX;
        body = derive(m.content, m.len, view, &node, m.digest, &len);
        berth_digest_t d;
        berth_digest_of(&d, BERTH_DIGEST_SHA256, body, len);
        snprintf(digest, sizeof(digest), "%s", d.str);
        if (berth_db_isa_view_put(c, rq->route.name, digest, m.digest, body, len, &err) != 0)
            rc = err.code;
    } else if (rc == 0) { /* children and single manifests pass through */
        body = m.content;
        len = m.len;
        m.content = NULL;
        mt = m.media_type;
        snprintf(digest, sizeof(digest), "%s", m.digest);
    }
    berth_db_release(reg->db, c);
    if (rc != 0) {
        berth_db_manifest_dispose(&m);
        free(body);
        return berth_resp_error(resp, &err);
    }
    berth_resp_header(resp, "docker-content-digest", "%s", digest);
    berth_resp_body(resp, 200, body, len, mt);
    berth_db_manifest_dispose(&m);
}
