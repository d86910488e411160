#include "registry/isa/index.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note(char (*list)[BERTH_ISA_NOTE_LEN], int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char (*list)[BERTH_ISA_NOTE_LEN], int *n, const char *fmt, ...)
{
    if (*n == BERTH_ISA_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list[*n], BERTH_ISA_NOTE_LEN, fmt, ap);
    va_end(ap);
    (*n)++;
}

#define ERR(...) note(out->errors, &out->nerrors, __VA_ARGS__)
#define WARN(...) note(out->warnings, &out->nwarnings, __VA_ARGS__)
/* a rule that policy decides: a warning under warn, an error under strict */
#define POLICY(...)                                                                                                                \
    do {                                                                                                                           \
        if (mode == BERTH_ISA_POLICY_STRICT)                                                                                       \
            ERR(__VA_ARGS__);                                                                                                      \
        else                                                                                                                       \
            WARN(__VA_ARGS__);                                                                                                     \
    } while (0)

static const char *annotation(json_t *desc, const char *suffix)
{
    char key[64];
    snprintf(key, sizeof(key), "%s%s", BERTH_ISA_ANNOTATION_PREFIX, suffix);
    return json_string_value(json_object_get(json_object_get(desc, "annotations"), key));
}

static int has_isa_annotation(json_t *desc)
{
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(desc, "annotations"), key,
                        v) if (strncmp(key, BERTH_ISA_ANNOTATION_PREFIX, strlen(BERTH_ISA_ANNOTATION_PREFIX)) == 0) return 1;
    return 0;
}

/*
 * ISA data on one descriptor: a level above the baseline (arm64 "v8" and amd64 "v1" are how plain multi-arch images
 * spell the baseline), platform.features, or an io.berth.isa.* annotation. An index none of whose entries carries
 * any declares no ISA intent and is never refused for ISA reasons.
 */
static int carries_isa(json_t *desc)
{
    json_t *plat = json_object_get(desc, "platform");
    berth_isa_arch_t arch = berth_isa_arch_parse(json_string_value(json_object_get(plat, "architecture")));
    const char *variant = json_string_value(json_object_get(plat, "variant"));
    berth_isa_level_t l;
    if (arch == BERTH_ISA_ARCH_UNKNOWN)
        return 0;
    if (has_isa_annotation(desc) || json_object_get(plat, "features") != NULL)
        return 1;
    return variant != NULL && variant[0] != '\0' &&
           (berth_isa_variant_parse(arch, variant, &l) != 0 || !berth_isa_level_is_baseline(&l));
}

/* The entry's annotations without Berth's own: what else tells two copies apart (podman's compression marker) */
static json_t *other_annotations(json_t *desc)
{
    json_t *o = json_object(), *v;
    const char *key;
    json_object_foreach(json_object_get(desc, "annotations"), key,
                        v) if (strncmp(key, BERTH_ISA_ANNOTATION_PREFIX, strlen(BERTH_ISA_ANNOTATION_PREFIX)) != 0)
        json_object_set(o, key, v);
    return o;
}

/*
 * Two entries are ambiguous duplicates only when nothing a client matches on tells them apart: the full platform
 * (os.version and os.features too: Windows images list one build per os.version), the media type, the ISA
 * declaration, and annotations (podman --add-compression lists gzip and zstd copies marked by an annotation).
 */
static int same_build(const berth_isa_variant_t *a, json_t *da, const berth_isa_variant_t *b, json_t *db)
{
    if (strcmp(a->os, b->os) != 0 || a->level.arch != b->level.arch ||
        berth_isa_level_rank(&a->level) != berth_isa_level_rank(&b->level) || strcmp(a->target, b->target) != 0 ||
        a->features.n != b->features.n)
        return 0;
    for (int i = 0; i < a->features.n; i++)
        if (strcmp(a->features.names[i], b->features.names[i]) != 0)
            return 0;
    json_t *pa = json_object_get(da, "platform"), *pb = json_object_get(db, "platform");
    static const char *const keys[] = {"os.version", "os.features"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *x = json_object_get(pa, keys[i]), *y = json_object_get(pb, keys[i]);
        if ((x != NULL || y != NULL) && !json_equal(x, y))
            return 0;
    }
    json_t *ma = json_object_get(da, "mediaType"), *mb = json_object_get(db, "mediaType");
    if ((ma != NULL || mb != NULL) && !json_equal(ma, mb))
        return 0;
    json_t *aa = other_annotations(da), *ab = other_annotations(db);
    int same = json_equal(aa, ab);
    json_decref(aa);
    json_decref(ab);
    return same;
}

/* The (os, os.version, arch) group of a descriptor: the unit the baseline and ordering rules apply to */
static int same_group(const berth_isa_variant_t *a, json_t *da, const berth_isa_variant_t *b, json_t *db)
{
    json_t *x = json_object_get(json_object_get(da, "platform"), "os.version"),
           *y = json_object_get(json_object_get(db, "platform"), "os.version");
    return a->level.arch == b->level.arch && strcmp(a->os, b->os) == 0 && ((x == NULL && y == NULL) || json_equal(x, y));
}

/* One descriptor into a variant; errors for what cannot be a valid variant */
static int read_entry(json_t *desc, int position, berth_isa_policy_mode_t mode, berth_isa_variant_t *v, berth_isa_report_t *out)
{
    json_t *plat = json_object_get(desc, "platform");
    const char *arch_s = json_string_value(json_object_get(plat, "architecture"));
    const char *os = json_string_value(json_object_get(plat, "os"));
    const char *variant = json_string_value(json_object_get(plat, "variant"));
    const char *digest = json_string_value(json_object_get(desc, "digest"));
    berth_isa_arch_t arch = berth_isa_arch_parse(arch_s);
    if (arch == BERTH_ISA_ARCH_UNKNOWN || digest == NULL)
        return 0; /* other architectures, attestations: not ISA variants */
    memset(v, 0, sizeof(*v));
    v->position = position;
    snprintf(v->digest, sizeof(v->digest), "%s", digest);
    snprintf(v->os, sizeof(v->os), "%s", os != NULL ? os : "");
    if (berth_isa_variant_parse(arch, variant, &v->level) != 0) {
        ERR("manifests[%d]: variant \"%s\" is not a known %s level", position, variant, arch_s);
        return -1;
    }
    v->baseline_spelled_v1 = arch == BERTH_ISA_AMD64 && variant != NULL && strcmp(variant, "v1") == 0;
    const char *lvl = annotation(desc, "level");
    if (lvl != NULL) {
        berth_isa_level_t l;
        if (berth_isa_level_parse(arch, lvl, &l) != 0) {
            ERR("manifests[%d]: io.berth.isa.level \"%s\" is not a known %s level", position, lvl, arch_s);
            return -1;
        }
        if (variant != NULL && variant[0] != '\0' && berth_isa_level_rank(&l) != berth_isa_level_rank(&v->level)) {
            ERR("manifests[%d]: io.berth.isa.level %s disagrees with platform.variant %s", position, lvl, variant);
            return -1;
        }
        v->level = l; /* lets arm64 and POWER builds state a level without a non-standard variant */
    }
    berth_isa_features_t implied, given;
    berth_isa_level_features(&v->level, &implied);
    berth_isa_features_clear(&given);
    const char *feats = annotation(desc, "features");
    if (feats != NULL && berth_isa_features_add_list(&given, feats) != 0)
        ERR("manifests[%d]: io.berth.isa.features has a name too long or too many names", position);
    json_t *pf = json_object_get(plat, "features"), *f;
    size_t i;
    if (pf != NULL) {
        WARN("manifests[%d]: platform.features is reserved by OCI and dropped by Go tools; use io.berth.isa.features", position);
        json_array_foreach(pf, i, f) if (json_is_string(f)) berth_isa_features_add(&given, json_string_value(f));
    }
    for (int k = 0; k < given.n; k++) {
        const char *name = given.names[k];
        if (!berth_isa_feature_known(arch, name)) {
            ERR("manifests[%d]: unknown %s feature \"%s\"", position, arch_s, name);
            continue;
        }
        if (berth_isa_features_has(&implied, name)) {
            if (mode == BERTH_ISA_POLICY_STRICT)
                ERR("manifests[%d]: feature %s is implied by the level", position, name);
            else
                WARN("manifests[%d]: feature %s is implied by the level (dropped)", position, name);
            continue;
        }
        berth_isa_features_add(&v->features, name);
    }
    const char *target = annotation(desc, "target");
    snprintf(v->target, sizeof(v->target), "%s", target != NULL ? target : "");
    const char *prio = annotation(desc, "priority");
    if (prio != NULL) {
        char *end;
        long p = strtol(prio, &end, 10);
        if (*prio == '\0' || *end != '\0' || p < -1000000 || p > 1000000)
            ERR("manifests[%d]: io.berth.isa.priority must be an integer", position);
        else
            v->priority = (int)p;
    }
    return 1;
}

int berth_isa_index_check(const char *json, size_t len, berth_isa_policy_mode_t mode, berth_isa_config_fn config_of, void *ctx,
                          berth_isa_report_t *out)
{
    memset(out, 0, sizeof(*out));
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *mans = json_object_get(root, "manifests");
    if (!json_is_array(mans)) {
        json_decref(root);
        return -1;
    }
    size_t n = json_array_size(mans), i;
    out->variants = calloc(n + 1, sizeof(berth_isa_variant_t));
    json_t **descs = calloc(n + 1, sizeof(json_t *)); /* descs[k]: the descriptor of variants[k] */
    int *isa = calloc(n + 1, sizeof(int));            /* isa[k]: its (os, os.version, arch) group carries ISA data */
    json_t *desc;
    json_array_foreach(mans, i, desc) if (carries_isa(desc)) out->is_isa = 1;
    json_array_foreach(mans, i, desc)
    {
        berth_isa_variant_t *v = &out->variants[out->nvariants];
        /* without ISA intent an entry is only recorded: its variant is not Berth's to judge */
        int r = read_entry(desc, (int)i, out->is_isa ? mode : BERTH_ISA_POLICY_OFF, v, out);
        if (r > 0) {
            descs[out->nvariants] = desc;
            isa[out->nvariants] = carries_isa(desc);
            out->nvariants++;
        }
    }
    for (size_t a = 0; a < out->nvariants; a++)
        for (size_t b = 0; b < out->nvariants; b++)
            if (isa[b] == 1 && same_group(&out->variants[a], descs[a], &out->variants[b], descs[b]) && !isa[a])
                isa[a] = 2; /* in a group with ISA data: the group's rules cover it */
    if (out->is_isa && mode != BERTH_ISA_POLICY_OFF) {
        /* ambiguous duplicates, within groups that carry ISA data */
        for (size_t a = 0; a < out->nvariants; a++)
            for (size_t b = a + 1; b < out->nvariants; b++)
                if (isa[a] && same_build(&out->variants[a], descs[a], &out->variants[b], descs[b]) &&
                    strcmp(out->variants[a].digest, out->variants[b].digest) != 0)
                    ERR("manifests[%d] and manifests[%d] describe the same build with different digests", out->variants[a].position,
                        out->variants[b].position);
        /* per (os, os.version, arch) group with ISA data: baseline present, not spelled v1, first, then ascending level */
        for (size_t a = 0; a < out->nvariants; a++) {
            const berth_isa_variant_t *v = &out->variants[a];
            int seen_before = 0, has_base = 0;
            for (size_t b = 0; b < a; b++)
                seen_before |= same_group(&out->variants[b], descs[b], v, descs[a]);
            if (seen_before || !isa[a])
                continue; /* each group is checked once, from its first entry; groups without ISA data not at all */
            const berth_isa_variant_t *prev = NULL;
            int ordered = 1;
            for (size_t b = a; b < out->nvariants; b++) {
                const berth_isa_variant_t *w = &out->variants[b];
                if (!same_group(w, descs[b], v, descs[a]))
                    continue;
                if (berth_isa_level_is_baseline(&w->level) && w->features.n == 0) {
                    has_base = 1;
                    if (w->baseline_spelled_v1)
                        POLICY("manifests[%d]: the baseline is spelled \"v1\"; skopeo and podman will not match it (omit variant)",
                               w->position);
                }
                if (prev != NULL &&
                    (berth_isa_level_rank(&w->level) < berth_isa_level_rank(&prev->level) ||
                     (berth_isa_level_rank(&w->level) == berth_isa_level_rank(&prev->level) && w->features.n < prev->features.n)))
                    ordered = 0;
                prev = w;
            }
            const char *arch = berth_isa_arch_name(v->level.arch);
            if (!has_base)
                POLICY("%s/%s has variants but no baseline entry: plain containerd and podman nodes find no match", v->os, arch);
            else if (!(berth_isa_level_is_baseline(&v->level) && v->features.n == 0))
                POLICY("%s/%s: the baseline must come first (first-match clients such as enroot take the first entry)", v->os,
                       arch);
            if (!ordered)
                POLICY("%s/%s: entries must ascend by level, fewer extra features first", v->os, arch);
        }
        /* child configs must agree with their descriptors */
        for (size_t a = 0; config_of != NULL && a < out->nvariants; a++) {
            const berth_isa_variant_t *v = &out->variants[a];
            char carch[32] = "", cos[32] = "", cvar[32] = "";
            if (!isa[a] || config_of(ctx, v->digest, carch, cos, cvar) != 0)
                continue;
            berth_isa_level_t cl;
            if ((carch[0] && berth_isa_arch_parse(carch) != v->level.arch) || (cos[0] && v->os[0] && strcmp(cos, v->os) != 0))
                ERR("manifests[%d]: its config says %s/%s", v->position, cos, carch);
            else if (cvar[0] && (berth_isa_variant_parse(v->level.arch, cvar, &cl) != 0 ||
                                 berth_isa_level_rank(&cl) != berth_isa_level_rank(&v->level)))
                ERR("manifests[%d]: its config variant %s disagrees with the descriptor", v->position, cvar);
        }
    }
    free(descs);
    free(isa);
    json_decref(root);
    return 0;
}

void berth_isa_report_dispose(berth_isa_report_t *r)
{
    free(r->variants);
    r->variants = NULL;
    r->nvariants = 0;
}

char *berth_isa_variants_json(const berth_isa_variant_t *v, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char level[24], variant[16], feats[BERTH_ISA_MAX_FEATURES * BERTH_ISA_FEATURE_LEN];
        berth_isa_level_name(&v[i].level, level, sizeof(level));
        berth_isa_level_variant(&v[i].level, variant, sizeof(variant));
        berth_isa_features_join(&v[i].features, feats, sizeof(feats));
        json_array_append_new(arr, json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "position", v[i].position, "digest",
                                             v[i].digest, "os", v[i].os, "architecture", berth_isa_arch_name(v[i].level.arch),
                                             "variant", variant, "level", level, "features", feats, "target", v[i].target,
                                             "priority", v[i].priority, "scan_status", v[i].scan_status));
    }
    char *s = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return s;
}

int berth_isa_variants_parse(const char *json, berth_isa_variant_t **out, size_t *n_out)
{
    json_t *arr = json_loads(json, 0, NULL);
    if (!json_is_array(arr)) {
        json_decref(arr);
        return -1;
    }
    size_t n = json_array_size(arr), i;
    berth_isa_variant_t *v = calloc(n + 1, sizeof(*v));
    json_t *e;
    size_t k = 0;
    json_array_foreach(arr, i, e)
    {
        berth_isa_arch_t arch = berth_isa_arch_parse(json_string_value(json_object_get(e, "architecture")));
        if (arch == BERTH_ISA_ARCH_UNKNOWN ||
            berth_isa_level_parse(arch, json_string_value(json_object_get(e, "level")), &v[k].level) != 0)
            continue;
        v[k].position = (int)json_integer_value(json_object_get(e, "position"));
        snprintf(v[k].digest, sizeof(v[k].digest), "%s", json_string_value(json_object_get(e, "digest")) ?: "");
        snprintf(v[k].os, sizeof(v[k].os), "%s", json_string_value(json_object_get(e, "os")) ?: "");
        snprintf(v[k].target, sizeof(v[k].target), "%s", json_string_value(json_object_get(e, "target")) ?: "");
        snprintf(v[k].scan_status, sizeof(v[k].scan_status), "%s", json_string_value(json_object_get(e, "scan_status")) ?: "");
        v[k].priority = (int)json_integer_value(json_object_get(e, "priority"));
        berth_isa_features_add_list(&v[k].features, json_string_value(json_object_get(e, "features")) ?: "");
        k++;
    }
    json_decref(arr);
    *out = v;
    *n_out = k;
    return 0;
}
