/* The ISA level algebra, node capabilities (real cpuinfo dumps, NFD labels), selection and index checks. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/isa/index.h"
#include "registry/isa/isa.h"
#include "registry/isa/vocab.h"
#include "tests/unit/tap.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t r = fread(s, 1, (size_t)n, f);
    s[r] = '\0';
    fclose(f);
    return s;
}

static berth_isa_level_t L(berth_isa_arch_t a, const char *name)
{
    berth_isa_level_t l = {0};
    berth_isa_level_parse(a, name, &l);
    return l;
}

static void test_levels(void)
{
    berth_isa_level_t l;
    char name[32], var[16];
    ok(berth_isa_variant_parse(BERTH_ISA_AMD64, NULL, &l) == 0 && berth_isa_level_is_baseline(&l),
       "amd64: no variant is the baseline");
    ok(berth_isa_variant_parse(BERTH_ISA_AMD64, "v3", &l) == 0 && l.major == 3, "amd64 v3");
    ok(berth_isa_variant_parse(BERTH_ISA_AMD64, "v5", &l) != 0 && berth_isa_variant_parse(BERTH_ISA_AMD64, "avx2", &l) != 0 &&
           berth_isa_variant_parse(BERTH_ISA_AMD64, "x86-64-v3", &l) != 0,
       "amd64: v5, avx2, x86-64-v3 are not variants");
    ok(berth_isa_level_parse(BERTH_ISA_AMD64, "x86-64-v4", &l) == 0 &&
           (berth_isa_level_name(&l, name, sizeof(name)), strcmp(name, "x86-64-v4") == 0) &&
           (berth_isa_level_variant(&l, var, sizeof(var)), strcmp(var, "v4") == 0),
       "amd64 names round trip");
    ok(berth_isa_variant_parse(BERTH_ISA_ARM64, "v8.2", &l) == 0 && l.major == 8 && l.minor == 2 &&
           (berth_isa_level_name(&l, name, sizeof(name)), strcmp(name, "armv8.2-a") == 0),
       "arm64 v8.2 is armv8.2-a");
    ok(berth_isa_variant_parse(BERTH_ISA_ARM64, "v9", &l) == 0 && l.major == 9 && l.minor == 0, "arm64 v9");
    ok(berth_isa_variant_parse(BERTH_ISA_PPC64LE, "power9", &l) == 0 && l.major == 9, "ppc64le power9");
    berth_isa_level_t v2 = L(BERTH_ISA_AMD64, "x86-64-v2"), v3 = L(BERTH_ISA_AMD64, "x86-64-v3"),
                      v4 = L(BERTH_ISA_AMD64, "x86-64-v4");
    ok(berth_isa_level_runs(&v4, &v3) && berth_isa_level_runs(&v3, &v3) && !berth_isa_level_runs(&v2, &v3),
       "amd64 levels are cumulative");
    berth_isa_level_t a92 = L(BERTH_ISA_ARM64, "armv9.2-a"), a87 = L(BERTH_ISA_ARM64, "armv8.7-a"),
                      a88 = L(BERTH_ISA_ARM64, "armv8.8-a"), a93 = L(BERTH_ISA_ARM64, "armv9.3-a"),
                      a85 = L(BERTH_ISA_ARM64, "armv8.5-a");
    ok(berth_isa_level_runs(&a92, &a87) && !berth_isa_level_runs(&a92, &a88) && !berth_isa_level_runs(&a92, &a93) &&
           !berth_isa_level_runs(&a85, &a92),
       "arm64: v9.y runs v8.(y+5) and below, not v9.(y+1); v8 never runs v9");
    berth_isa_features_t f;
    berth_isa_features_clear(&f);
    berth_isa_features_add_list(&f, "SSE3, lzcnt avx2,avx2");
    ok(f.n == 3 && berth_isa_features_has(&f, "pni") && berth_isa_features_has(&f, "abm"),
       "features: aliases folded, case, duplicates");
    ok(berth_isa_feature_known(BERTH_ISA_AMD64, "avx512_bf16") && !berth_isa_feature_known(BERTH_ISA_AMD64, "sve") &&
           berth_isa_feature_known(BERTH_ISA_ARM64, "sve") && !berth_isa_feature_known(BERTH_ISA_ARM64, "avx"),
       "feature vocabularies per arch");
}

static void test_cpuinfo(const char *dir)
{
    static const struct {
        const char *file, *level;
        const char *has;
    } cases[] = {
        {"linux-rhel7-ivybridge", "x86-64-v2", NULL},
        {"linux-rhel7-haswell", "x86-64-v3", "avx2"},
        {"linux-rhel7-broadwell", "x86-64-v3", NULL},
        {"linux-rhel7-zen", "x86-64-v3", NULL},
        {"linux-rhel6-piledriver", "x86-64-v2", "fma"},
        {"linux-rhel7-x86_64_v3", "x86-64-v3", NULL},
        {"linux-rhel7-skylake_avx512", "x86-64-v4", "avx512vl"},
        {"linux-centos7-cascadelake", "x86-64-v4", "avx512_vnni"},
        {"linux-rhel9-neoverse_v2", "armv9.1-a", "sve2"},
        {"linux-amazon-neoverse_n1", "armv8.2-a", "asimddp"},
        {"linux-rocky8-a64fx", "armv8.2-a", "sve"},
        {"linux-amazon-cortex_a72", "armv8.0-a", "asimd"},
        {"linux-rhel8-power9", "power9", "altivec"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[512], name[32];
        snprintf(path, sizeof(path), "%s/%s", dir, cases[i].file);
        char *text = slurp(path);
        berth_isa_node_t n;
        int rc = text != NULL ? berth_isa_node_from_cpuinfo(text, &n) : -1;
        if (rc == 0)
            berth_isa_level_name(&n.level, name, sizeof(name));
        ok(rc == 0 && strcmp(name, cases[i].level) == 0 &&
               (cases[i].has == NULL || berth_isa_features_has(&n.features, cases[i].has)),
           "%s: %s", cases[i].file, cases[i].level);
        free(text);
    }
    berth_isa_node_t n;
    char *a64 = NULL;
    char path[512];
    snprintf(path, sizeof(path), "%s/linux-amazon-neoverse_n1", dir);
    a64 = slurp(path);
    ok(a64 != NULL && berth_isa_node_from_cpuinfo(a64, &n) == 0 && !berth_isa_features_has(&n.features, "sve"),
       "neoverse-n1 has no SVE");
    free(a64);
}

static void test_labels(void)
{
    const char *k1[] = {"kubernetes.io/arch", "feature.node.kubernetes.io/cpu-cpuid.X86_64_V3",
                        "feature.node.kubernetes.io/cpu-cpuid.X86_64_V2", "feature.node.kubernetes.io/cpu-cpuid.AVX512VNNI"};
    const char *v1[] = {"amd64", "true", "true", "true"};
    berth_isa_node_t n;
    ok(berth_isa_node_from_labels(k1, v1, 4, &n) == 0 && n.level.major == 3 && strcmp(n.level_source, "labels") == 0 &&
           berth_isa_features_has(&n.features, "avx512_vnni") && berth_isa_features_has(&n.features, "bmi2"),
       "NFD >= 0.19: X86_64_V3 label gives v3 and its features");
    const char *k2[] = {"kubernetes.io/arch", "feature.node.kubernetes.io/cpu-cpuid.AVX",
                        "feature.node.kubernetes.io/cpu-cpuid.AVX2", "feature.node.kubernetes.io/cpu-cpuid.FMA3"};
    const char *v2[] = {"amd64", "true", "true", "true"};
    ok(berth_isa_node_from_labels(k2, v2, 4, &n) == 0 && n.level.major == 3 && strcmp(n.level_source, "labels-approx") == 0,
       "older NFD: AVX+AVX2+FMA3 approximates v3");
    const char *k3[] = {"kubernetes.io/arch", "feature.node.kubernetes.io/cpu-cpuid.SVE"};
    const char *v3[] = {"arm64", "true"};
    ok(berth_isa_node_from_labels(k3, v3, 2, &n) == 0 && n.level.arch == BERTH_ISA_ARM64 &&
           berth_isa_features_has(&n.features, "sve"),
       "arm64 SVE label");
    ok(berth_isa_node_from_labels(k3 + 1, v3 + 1, 1, &n) != 0, "no arch label: refused");
}

static berth_isa_variant_t V(int pos, const char *digest, berth_isa_arch_t arch, const char *level, const char *feats)
{
    berth_isa_variant_t v;
    memset(&v, 0, sizeof(v));
    v.position = pos;
    snprintf(v.digest, sizeof(v.digest), "%s", digest);
    snprintf(v.os, sizeof(v.os), "linux");
    berth_isa_level_parse(arch, level, &v.level);
    berth_isa_features_add_list(&v.features, feats);
    return v;
}

static void test_select(void)
{
    berth_isa_variant_t vs[] = {
        V(0, "base", BERTH_ISA_AMD64, "x86-64", ""),   V(1, "v3", BERTH_ISA_AMD64, "x86-64-v3", ""),
        V(2, "v4", BERTH_ISA_AMD64, "x86-64-v4", ""),  V(3, "spr", BERTH_ISA_AMD64, "x86-64-v4", "amx_tile,avx512_bf16"),
        V(4, "arm", BERTH_ISA_ARM64, "armv8.0-a", ""), V(5, "sve", BERTH_ISA_ARM64, "armv8.2-a", "sve"),
    };
    size_t n = sizeof(vs) / sizeof(vs[0]);
    berth_isa_choice_t ch[8];
    berth_isa_node_t node = {.os = "linux"};
    node.level = L(BERTH_ISA_AMD64, "x86-64-v4");
    berth_isa_level_features(&node.level, &node.features);
    int best = berth_isa_select(vs, n, &node, NULL, ch);
    ok(best == 2 && ch[3].compatible == 0 && ch[3].missing.n == 2 && ch[1].rank == 2 && ch[0].rank == 3,
       "v4 node: plain v4, SPR build misses two");
    berth_isa_features_add(&node.features, "amx_tile");
    berth_isa_features_add(&node.features, "avx512_bf16");
    ok(berth_isa_select(vs, n, &node, NULL, ch) == 3, "a node with AMX gets the more specific build");
    node.level = L(BERTH_ISA_AMD64, "x86-64-v2");
    berth_isa_level_features(&node.level, &node.features);
    ok(berth_isa_select(vs, n, &node, NULL, ch) == 0 && !ch[1].compatible && berth_isa_features_has(&ch[1].missing, "avx2"),
       "v2 node: baseline; v3 reports avx2 missing");
    berth_isa_policy_t pol = {.has_max_level = 1, .max_level = L(BERTH_ISA_AMD64, "x86-64-v3")};
    node.level = L(BERTH_ISA_AMD64, "x86-64-v4");
    berth_isa_level_features(&node.level, &node.features);
    ok(berth_isa_select(vs, n, &node, &pol, ch) == 1, "max_level caps the choice");
    berth_isa_policy_t low = {.prefer_lowest = 1};
    ok(berth_isa_select(vs, n, &node, &low, ch) == 0, "prefer lowest");
    berth_isa_node_t arm = {.os = "linux"};
    arm.level = L(BERTH_ISA_ARM64, "armv8.2-a");
    ok(berth_isa_select(vs, n, &arm, NULL, ch) == 4 && !ch[5].compatible, "arm64 without SVE: generic");
    berth_isa_features_add(&arm.features, "sve");
    ok(berth_isa_select(vs, n, &arm, NULL, ch) == 5, "arm64 with SVE: the SVE build");
    berth_isa_variant_t only[] = {V(0, "v4", BERTH_ISA_AMD64, "x86-64-v4", "")};
    node.level = L(BERTH_ISA_AMD64, "x86-64-v3");
    berth_isa_level_features(&node.level, &node.features);
    ok(berth_isa_select(only, 1, &node, NULL, ch) == -1 && berth_isa_features_has(&ch[0].missing, "avx512f"),
       "nothing fits: -1 with what is missing");
    vs[1].scan_status[0] = '\0';
    snprintf(vs[2].scan_status, sizeof(vs[2].scan_status), "fail");
    snprintf(vs[0].scan_status, sizeof(vs[0].scan_status), "pass");
    berth_isa_policy_t scan = {.require_scan_pass = 1};
    node.level = L(BERTH_ISA_AMD64, "x86-64-v4");
    berth_isa_level_features(&node.level, &node.features);
    ok(berth_isa_select(vs, 3, &node, &scan, ch) == 0, "require_scan_pass skips unscanned and failed variants");
}

static int fake_config(void *ctx, const char *digest, char arch[32], char os[32], char variant[32])
{
    snprintf(arch, 32, "amd64");
    snprintf(os, 32, "linux");
    snprintf(variant, 32, "%s", strcmp(digest, "sha256:bb") == 0 ? "v2" : ""); /* bb's config claims v2 */
    return 0;
}

#define D(d, plat, ann)                                                                                                            \
    "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" d "\",\"size\":1,\"platform\":" plat ann "}"
#define AMD(v) "{\"architecture\":\"amd64\",\"os\":\"linux\"" v "}"

static int check(const char *json, berth_isa_policy_mode_t mode, berth_isa_report_t *r)
{
    return berth_isa_index_check(json, strlen(json), mode, NULL, NULL, r);
}

static void test_index(void)
{
    berth_isa_report_t r;
    const char *good = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D("sha256:bb", AMD(",\"variant\":\"v3\""), "") "," D(
        "sha256:cc", AMD(",\"variant\":\"v4\""), "") "," D("sha256:dd", AMD(",\"variant\":\"v4\""),
                                                           ",\"annotations\":{\"io.berth.isa.features\":\"amx_tile,avx512_bf16\","
                                                           "\"io.berth.isa.target\":\"sapphirerapids\"}") "]}";
    ok(check(good, BERTH_ISA_POLICY_STRICT, &r) == 0 && r.is_isa && r.nerrors == 0 && r.nwarnings == 0 && r.nvariants == 4 &&
           r.variants[3].features.n == 2 && strcmp(r.variants[3].target, "sapphirerapids") == 0,
       "the canonical layout passes strict");
    char *rows = berth_isa_variants_json(r.variants, r.nvariants);
    berth_isa_variant_t *back = NULL;
    size_t nb = 0;
    ok(berth_isa_variants_parse(rows, &back, &nb) == 0 && nb == 4 && back[3].features.n == 2 && back[1].level.major == 3,
       "variant rows round trip");
    free(rows);
    free(back);
    berth_isa_report_dispose(&r);
    const char *v5 = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D("sha256:bb", AMD(",\"variant\":\"v5\""), "") "]}";
    ok(check(v5, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 1 && strstr(r.errors[0], "v5") != NULL, "unknown variant: error");
    berth_isa_report_dispose(&r);
    const char *disagree = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D(
        "sha256:bb", AMD(",\"variant\":\"v3\""), ",\"annotations\":{\"io.berth.isa.level\":\"x86-64-v4\"}") "]}";
    ok(check(disagree, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 1 && strstr(r.errors[0], "disagrees") != NULL,
       "level annotation vs variant: error");
    berth_isa_report_dispose(&r);
    const char *unknown = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D(
        "sha256:bb", AMD(",\"variant\":\"v3\""), ",\"annotations\":{\"io.berth.isa.features\":\"warp_drive\"}") "]}";
    ok(check(unknown, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 1 && strstr(r.errors[0], "warp_drive") != NULL,
       "unknown feature: error");
    berth_isa_report_dispose(&r);
    const char *implied = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D(
        "sha256:bb", AMD(",\"variant\":\"v3\""), ",\"annotations\":{\"io.berth.isa.features\":\"avx2\"}") "]}";
    ok(check(implied, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 0 && r.nwarnings == 1 && r.variants[1].features.n == 0,
       "implied feature: warned and dropped");
    berth_isa_report_dispose(&r);
    const char *dup = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D("sha256:bb", AMD(",\"variant\":\"v3\""), "") "," D(
        "sha256:b2", AMD(",\"variant\":\"v3\""), "") "]}";
    ok(check(dup, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 1 && strstr(r.errors[0], "same build") != NULL,
       "ambiguous duplicate: error");
    berth_isa_report_dispose(&r);
    const char *nobase =
        "{\"manifests\":[" D("sha256:bb", AMD(",\"variant\":\"v3\""), "") "," D("sha256:cc", AMD(",\"variant\":\"v4\""), "") "]}";
    ok(check(nobase, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 0 && r.nwarnings == 1 &&
           strstr(r.warnings[0], "no baseline") != NULL,
       "missing baseline: warning under warn");
    berth_isa_report_dispose(&r);
    ok(check(nobase, BERTH_ISA_POLICY_STRICT, &r) == 0 && r.nerrors == 1, "missing baseline: error under strict");
    berth_isa_report_dispose(&r);
    ok(check(nobase, BERTH_ISA_POLICY_OFF, &r) == 0 && r.nerrors == 0 && r.nwarnings == 0 && r.nvariants == 2,
       "policy off: rows only");
    berth_isa_report_dispose(&r);
    const char *v1 =
        "{\"manifests\":[" D("sha256:aa", AMD(",\"variant\":\"v1\""), "") "," D("sha256:bb", AMD(",\"variant\":\"v3\""), "") "]}";
    ok(check(v1, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nwarnings == 1 && strstr(r.warnings[0], "\"v1\"") != NULL,
       "baseline spelled v1: warning");
    berth_isa_report_dispose(&r);
    const char *order = "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D("sha256:cc", AMD(",\"variant\":\"v4\""), "") "," D(
        "sha256:bb", AMD(",\"variant\":\"v3\""), "") "]}";
    ok(check(order, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nwarnings == 1 && strstr(r.warnings[0], "ascend") != NULL,
       "ordering: warning");
    berth_isa_report_dispose(&r);
    const char *plain =
        "{\"manifests\":[" D("sha256:aa", AMD(""), "") "," D("sha256:ee", "{\"architecture\":\"arm64\",\"os\":\"linux\"}", "") "]}";
    ok(check(plain, BERTH_ISA_POLICY_STRICT, &r) == 0 && !r.is_isa && r.nerrors == 0, "a plain multi-arch index is not ISA-tagged");
    berth_isa_report_dispose(&r);
    ok(berth_isa_index_check(good, strlen(good), BERTH_ISA_POLICY_WARN, fake_config, NULL, &r) == 0 && r.nerrors == 1 &&
           strstr(r.errors[0], "config variant") != NULL,
       "a child config that disagrees with its descriptor: error");
    berth_isa_report_dispose(&r);
}

#define DM(mt, d, plat, ann) "{\"mediaType\":\"" mt "\",\"digest\":\"" d "\",\"size\":1,\"platform\":" plat ann "}"
#define OCI_M "application/vnd.oci.image.manifest.v1+json"
#define WIN(ver) "{\"architecture\":\"amd64\",\"os\":\"windows\",\"os.version\":\"" ver "\"}"
#define ARM8 "{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":\"v8\"}"
#define ZSTD ",\"annotations\":{\"io.github.containers.compression.zstd\":\"true\"}"

/* Indexes that declare no ISA intent are never refused; duplicates are judged by everything a client matches on */
static void test_index_intent(void)
{
    berth_isa_report_t r;
    berth_isa_policy_mode_t modes[] = {BERTH_ISA_POLICY_WARN, BERTH_ISA_POLICY_STRICT};
    /* a Docker official image's shared tag: linux amd64 + arm64/v8, and windows builds differing only in os.version */
    const char *official = "{\"manifests\":[" D("sha256:a1", AMD(""), "") "," D("sha256:a2", ARM8, "") "," D(
        "sha256:w1", WIN("10.0.17763.6893"), "") "," D("sha256:w2", WIN("10.0.20348.3207"),
                                                       "") "," D("sha256:w3", WIN("10.0.26100.3194"), "") "]}";
    /* podman push --add-compression zstd: gzip and zstd copies of one build per platform */
    const char *podman = "{\"manifests\":[" D("sha256:g1", AMD(""), "") "," D("sha256:g2", ARM8, "") "," D(
        "sha256:z1", AMD(""), ZSTD) "," D("sha256:z2", ARM8, ZSTD) "]}";
    for (int m = 0; m < 2; m++) {
        ok(check(official, modes[m], &r) == 0 && !r.is_isa && r.nerrors == 0 && r.nwarnings == 0,
           "windows entries per os.version, arm64/v8: no ISA intent, accepted (%s)", m ? "strict" : "warn");
        berth_isa_report_dispose(&r);
        ok(check(podman, modes[m], &r) == 0 && !r.is_isa && r.nerrors == 0 && r.nwarnings == 0,
           "podman gzip+zstd copies: accepted (%s)", m ? "strict" : "warn");
        berth_isa_report_dispose(&r);
    }
    /* the same with ISA variants beside them: only the groups that carry ISA data are judged */
    const char *mixed = "{\"manifests\":[" D("sha256:a1", AMD(""), "") "," D("sha256:a3", AMD(",\"variant\":\"v3\""), "") "," D(
        "sha256:z1", AMD(""), ZSTD) "," D("sha256:z3", AMD(",\"variant\":\"v3\""),
                                          ZSTD) "," D("sha256:w1", WIN("10.0.17763.6893"),
                                                      "") "," D("sha256:w2", WIN("10.0.20348.3207"),
                                                                "") "," D("sha256:a2", ARM8, "") "," D("sha256:a4", ARM8,
                                                                                                       ZSTD) "]}";
    ok(check(mixed, BERTH_ISA_POLICY_WARN, &r) == 0 && r.is_isa && r.nerrors == 0,
       "ISA variants beside windows and zstd copies: no duplicate error");
    berth_isa_report_dispose(&r);
    /* arm64 v8 and amd64 v1 are how plain images spell the baseline: no intent, so no baseline/order rules */
    const char *arm_only = "{\"manifests\":[" D("sha256:a2", ARM8, "") "]}";
    ok(check(arm_only, BERTH_ISA_POLICY_STRICT, &r) == 0 && !r.is_isa && r.nerrors == 0 && r.nwarnings == 0,
       "arm64/v8 alone: no intent");
    berth_isa_report_dispose(&r);
    /* a media type or os.features difference separates entries; identical entries with two digests stay an error */
    const char *mt = "{\"manifests\":[" D("sha256:a1", AMD(""), "") "," D("sha256:a3", AMD(",\"variant\":\"v3\""), "") "," DM(
        "application/vnd.docker.distribution.manifest.v2+json", "sha256:d3", AMD(",\"variant\":\"v3\""), "") "]}";
    ok(check(mt, BERTH_ISA_POLICY_STRICT, &r) == 0 && r.nerrors == 0, "same platform, other media type: not a duplicate");
    berth_isa_report_dispose(&r);
    const char *osf = "{\"manifests\":[" D("sha256:a1", AMD(""), "") "," D("sha256:a3", AMD(",\"variant\":\"v3\""), "") "," D(
        "sha256:f3", AMD(",\"variant\":\"v3\",\"os.features\":[\"sgx\"]"), "") "]}";
    ok(check(osf, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 0, "same platform, other os.features: not a duplicate");
    berth_isa_report_dispose(&r);
    const char *dup = "{\"manifests\":[" D("sha256:a1", AMD(""), "") "," D("sha256:a3", AMD(",\"variant\":\"v3\""), ZSTD) "," DM(
        OCI_M, "sha256:b3", AMD(",\"variant\":\"v3\""), ZSTD) "]}";
    ok(check(dup, BERTH_ISA_POLICY_WARN, &r) == 0 && r.nerrors == 1 && strstr(r.errors[0], "same build") != NULL,
       "identical ISA entries with two digests: still an error");
    berth_isa_report_dispose(&r);
}

/* 1 if `word` is a whitespace-separated word of `text` outside '#' comment lines */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; *p != '\0';) {
        if (*p == '#') {
            p += strcspn(p, "\n");
            continue;
        }
        size_t len = strcspn(p, " \t\n");
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p += len > 0 ? len : 1;
    }
    return 0;
}

/* Every spelling means one feature: kernel, NFD, compiler and old scanner names, each pair checked */
static void test_vocab(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/../vocab/x86-cpufeatures.txt", dir);
    char *x86 = slurp(path);
    snprintf(path, sizeof(path), "%s/../vocab/arm64-hwcaps.txt", dir);
    char *arm = slurp(path);
    snprintf(path, sizeof(path), "%s/../vocab/nfd-cpuid.txt", dir);
    char *nfd = slurp(path);
    ok(x86 != NULL && arm != NULL && nfd != NULL, "vocabulary reference lists read");
    if (x86 == NULL || arm == NULL || nfd == NULL)
        return;
    size_t n;
    const berth_isa_vocab_entry_t *v = berth_isa_vocab(&n);
    int bad_kernel = 0, bad_nfd = 0, bad_pair = 0, pairs = 0;
    for (size_t i = 0; i < n; i++) {
        const char *list = v[i].arch == BERTH_ISA_AMD64 ? x86 : v[i].arch == BERTH_ISA_ARM64 ? arm : NULL;
        if (v[i].kernel && list != NULL && !has_word(list, v[i].canonical)) {
            printf("# %s is not a kernel cpuinfo name\n", v[i].canonical);
            bad_kernel++;
        }
        if (v[i].nfd != NULL && !has_word(nfd, v[i].nfd)) {
            printf("# %s is not an NFD cpuid name\n", v[i].nfd);
            bad_nfd++;
        }
        /* each spelling, for its own arch and for any arch, folds to the canonical name; and through a feature set */
        char spellings[16][BERTH_ISA_FEATURE_LEN];
        int k = 0;
        snprintf(spellings[k++], BERTH_ISA_FEATURE_LEN, "%s", v[i].canonical);
        if (v[i].nfd != NULL)
            snprintf(spellings[k++], BERTH_ISA_FEATURE_LEN, "%s", v[i].nfd);
        for (const char *p = v[i].aliases; *p != '\0' && k < 16;) {
            size_t len = strcspn(p, ",");
            snprintf(spellings[k++], BERTH_ISA_FEATURE_LEN, "%.*s", (int)len, p);
            p += len + (p[len] == ',');
        }
        for (int a = 0; a < k; a++) {
            char upper[BERTH_ISA_FEATURE_LEN];
            for (size_t c = 0; c <= strlen(spellings[a]); c++)
                upper[c] = (char)(spellings[a][c] >= 'a' && spellings[a][c] <= 'z' ? spellings[a][c] - 32 : spellings[a][c]);
            berth_isa_features_t f;
            berth_isa_features_clear(&f);
            berth_isa_features_add(&f, spellings[a]);
            const char *own = berth_isa_vocab_canonical(v[i].arch, spellings[a]), *up = berth_isa_vocab_canonical(v[i].arch, upper);
            const char *from_nfd = berth_isa_vocab_from_nfd(v[i].arch, spellings[a]);
            pairs++;
            if (own == NULL || strcmp(own, v[i].canonical) != 0 || up == NULL || strcmp(up, v[i].canonical) != 0 ||
                from_nfd == NULL || strcmp(from_nfd, v[i].canonical) != 0 || !berth_isa_feature_known(v[i].arch, spellings[a]) ||
                (v[i].arch == BERTH_ISA_AMD64 && !berth_isa_features_has(&f, v[i].canonical))) {
                printf("# %s does not fold to %s\n", spellings[a], v[i].canonical);
                bad_pair++;
            }
        }
    }
    ok(bad_kernel == 0, "every canonical name the kernel prints is in its cpufeatures/hwcap list");
    ok(bad_nfd == 0, "every NFD name is in NFD's cpuid list");
    ok(bad_pair == 0 && pairs > 200, "every alias pair folds to one canonical name (%d spellings)", pairs);
    /* the example, end to end: a declared avx512fp16, a node's avx512_fp16 flag, an NFD AVX512FP16 label */
    berth_isa_features_t want, node;
    berth_isa_features_clear(&want);
    berth_isa_features_clear(&node);
    berth_isa_features_add_list(&want, "avx512fp16,AMX-TILE,sse4.2");
    berth_isa_features_add_list(&node, "avx512_fp16 amx_tile sse4_2");
    ok(berth_isa_features_subset(&want, &node, NULL) && want.n == 3,
       "avx512fp16/AMX-TILE/sse4.2 are the node's avx512_fp16/amx_tile/sse4_2");
    const char *keys[] = {"kubernetes.io/arch", "feature.node.kubernetes.io/cpu-cpuid.AVX512FP16",
                          "feature.node.kubernetes.io/cpu-cpuid.SSE42"};
    const char *vals[] = {"amd64", "true", "true"};
    berth_isa_node_t nd;
    ok(berth_isa_node_from_labels(keys, vals, 3, &nd) == 0 && berth_isa_features_has(&nd.features, "avx512_fp16") &&
           berth_isa_features_has(&nd.features, "sse4_2"),
       "NFD labels AVX512FP16 and SSE42 are avx512_fp16 and sse4_2");
    ok(!berth_isa_feature_known(BERTH_ISA_AMD64, "sve") && berth_isa_feature_known(BERTH_ISA_ARM64, "SVE") &&
           !berth_isa_feature_known(BERTH_ISA_ARM64, "avx512_fp16") &&
           berth_isa_vocab_canonical(BERTH_ISA_AMD64, "warp_drive") == NULL,
       "names are known only for their architecture");
    /* every x86 dump, written as NFD labels in NFD's spelling, reads back as the same level and features */
    const char *dumps[] = {"linux-centos7-cascadelake", "linux-rhel7-haswell", "linux-rhel6-piledriver", "linux-rhel7-zen"};
    int round_trips = 0;
    for (size_t i = 0; i < sizeof(dumps) / sizeof(dumps[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, dumps[i]);
        char *text = slurp(path);
        berth_isa_node_t from_flags, from_labels;
        if (text == NULL || berth_isa_node_from_cpuinfo(text, &from_flags) != 0) {
            free(text);
            continue;
        }
        free(text);
        static char keys[BERTH_ISA_MAX_FEATURES + 8][80];
        const char *kp[BERTH_ISA_MAX_FEATURES + 8], *vp[BERTH_ISA_MAX_FEATURES + 8];
        size_t k = 0;
        snprintf(keys[k], sizeof(keys[k]), "kubernetes.io/arch");
        vp[k++] = "amd64";
        snprintf(keys[k], sizeof(keys[k]), "feature.node.kubernetes.io/cpu-cpuid.X86_64_V%d", from_flags.level.major);
        vp[k++] = "true";
        berth_isa_features_t named;
        berth_isa_features_clear(&named);
        for (int f = 0; f < from_flags.features.n; f++) {
            const char *n = berth_isa_vocab_nfd(BERTH_ISA_AMD64, from_flags.features.names[f]);
            if (n == NULL)
                continue;
            berth_isa_features_add(&named, from_flags.features.names[f]);
            snprintf(keys[k], sizeof(keys[k]), "feature.node.kubernetes.io/cpu-cpuid.%s", n);
            vp[k++] = "true";
        }
        for (size_t j = 0; j < k; j++)
            kp[j] = keys[j];
        round_trips += berth_isa_node_from_labels(kp, vp, k, &from_labels) == 0 &&
                       from_labels.level.major == from_flags.level.major &&
                       berth_isa_features_subset(&named, &from_labels.features, NULL) && named.n > 10;
    }
    ok(round_trips == 4, "x86 dumps round-trip through NFD labels in NFD's spelling (%d of 4)", round_trips);
    free(x86);
    free(arm);
    free(nfd);
}

/*
 * Every aarch64 dump: its derived level (the Armv8.x/9.x the part implements, as far as its kernel's hwcaps show),
 * and the build a node picks from {baseline, armv8.2-a+sve, armv9.0-a}: the SVE build on every SVE part.
 */
static void test_arm64_dumps(const char *dir)
{
    static const struct {
        const char *file, *level;
    } want[] = {
        {"linux-amazon-cortex_a72", "armv8.0-a"},
        {"linux-centos7-thunderx2", "armv8.1-a"},
        {"linux-amazon-neoverse_n1", "armv8.2-a"},
        {"linux-rocky8-a64fx", "armv8.2-a"},
        {"linux-amazon-neoverse_v1", "armv8.4-a"},
        {"linux-rhel8-neoverse_v1", "armv8.4-a"}, /* paca/pacg hidden by RHEL */
        {"linux-asahi-m1", "armv8.5-a"},
        {"linux-asahi-m2", "armv8.6-a"},
        {"linux-ubuntu22.04-ampere1", "armv8.6-a"},
        {"linux-ubuntu22.04-ampere1a", "armv8.6-a"},
        {"linux-rhel9-neoverse_n2", "armv9.1-a"},
        {"linux-ubuntu22.04-neoverse_n2", "armv9.1-a"}, /* v9.0 + i8mm/bf16 */
        {"linux-rhel9-neoverse_v2", "armv9.1-a"},
        {"linux-ubuntu22.04-neoverse_v2", "armv9.1-a"},
        {"linux-unknown-neoverse_v2", "armv9.1-a"},
        {"linux-ubuntu24.04-neoverse_v3ae", "armv9.2-a"},
    };
    const char *idx = "{\"manifests\":[" D("sha256:a0", "{\"architecture\":\"arm64\",\"os\":\"linux\"}", "") "," D(
        "sha256:a2", "{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":\"v8.2\"}",
        ",\"annotations\":{\"io.berth.isa.features\":\"sve\"}") "," D("sha256:a9",
                                                                      "{\"architecture\":\"arm64\",\"os\":\"linux\",\"variant\":\"v9.0\"}",
                                                                      "") "]}";
    berth_isa_report_t r;
    ok(berth_isa_index_check(idx, strlen(idx), BERTH_ISA_POLICY_STRICT, NULL, NULL, &r) == 0 && r.nerrors == 0 && r.nvariants == 3,
       "arm64 index: baseline, armv8.2-a+sve, armv9.0-a");
    DIR *d = opendir(dir);
    struct dirent *e;
    int dumps = 0, sve = 0, sve_picked = 0, unlisted = 0;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        char *text = e->d_name[0] != '.' ? slurp(path) : NULL;
        berth_isa_node_t n;
        if (text == NULL || strstr(text, "\nFeatures") == NULL || berth_isa_node_from_cpuinfo(text, &n) != 0) {
            free(text);
            continue;
        }
        free(text);
        dumps++;
        char name[24];
        berth_isa_level_name(&n.level, name, sizeof(name));
        const char *expect = NULL;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            if (strcmp(want[i].file, e->d_name) == 0)
                expect = want[i].level;
        unlisted += expect == NULL;
        ok(expect != NULL && strcmp(name, expect) == 0, "%s is %s (derived %s)", e->d_name, expect ? expect : "?", name);
        berth_isa_choice_t ch[3];
        int best = berth_isa_select(r.variants, r.nvariants, &n, NULL, ch);
        int has_sve = berth_isa_features_has(&n.features, "sve"), is_v9 = n.level.major == 9;
        const char *got = best < 0 ? "none" : r.variants[best].digest;
        const char *exp = is_v9 ? "sha256:a9" : has_sve ? "sha256:a2" : "sha256:a0";
        sve += has_sve;
        sve_picked += has_sve && best >= 0 && strcmp(got, "sha256:a0") != 0;
        ok(strcmp(got, exp) == 0, "%s picks %s (%s)", e->d_name, exp, got);
    }
    if (d != NULL)
        closedir(d);
    ok(dumps == 16 && unlisted == 0, "all 16 aarch64 dumps checked (%d)", dumps);
    ok(sve == 9 && sve_picked == 9, "all 9 SVE parts pick an SVE build (%d of %d)", sve_picked, sve);
    /* the level implies its mandatory features, and a v9 level implies SVE2 */
    berth_isa_level_t l82 = L(BERTH_ISA_ARM64, "armv8.2-a"), l90 = L(BERTH_ISA_ARM64, "armv9.0-a");
    berth_isa_features_t f;
    berth_isa_level_features(&l82, &f);
    ok(berth_isa_features_has(&f, "atomics") && berth_isa_features_has(&f, "dcpop") && !berth_isa_features_has(&f, "sve"),
       "armv8.2-a implies LSE and DPB, not SVE");
    berth_isa_level_features(&l90, &f);
    ok(berth_isa_features_has(&f, "sve2") && berth_isa_features_has(&f, "frint") && !berth_isa_features_has(&f, "i8mm"),
       "armv9.0-a implies SVE2 and the Armv8.5 features, not Armv8.6's");
    berth_isa_report_dispose(&r);
}

int main(int argc, char **argv)
{
    test_levels();
    test_cpuinfo(argc > 1 ? argv[1] : "tests/unit/data/cpuinfo");
    test_labels();
    test_select();
    test_index();
    test_index_intent();
    test_vocab(argc > 1 ? argv[1] : "tests/unit/data/cpuinfo");
    test_arm64_dumps(argc > 1 ? argv[1] : "tests/unit/data/cpuinfo");
    return tap_done();
}
