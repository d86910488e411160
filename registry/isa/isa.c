#include "registry/isa/isa.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/isa/vocab.h"

/* ---- architectures and levels ------------------------------------------------------------------------- */

berth_isa_arch_t berth_isa_arch_parse(const char *s)
{
    if (s == NULL)
        return BERTH_ISA_ARCH_UNKNOWN;
    if (strcmp(s, "amd64") == 0 || strcmp(s, "x86_64") == 0)
        return BERTH_ISA_AMD64;
    if (strcmp(s, "arm64") == 0 || strcmp(s, "aarch64") == 0)
        return BERTH_ISA_ARM64;
    if (strcmp(s, "ppc64le") == 0)
        return BERTH_ISA_PPC64LE;
    return BERTH_ISA_ARCH_UNKNOWN;
}

const char *berth_isa_arch_name(berth_isa_arch_t a)
{
    static const char *names[] = {"unknown", "amd64", "arm64", "ppc64le"};
    return names[a];
}

static int valid(berth_isa_arch_t arch, int major, int minor)
{
    switch (arch) {
    case BERTH_ISA_AMD64: return major >= 1 && major <= 4 && minor == 0;
    case BERTH_ISA_ARM64: return (major == 8 && minor >= 0 && minor <= 9) || (major == 9 && minor >= 0 && minor <= 5);
    case BERTH_ISA_PPC64LE: return major >= 8 && major <= 11 && minor == 0;
    default: return 0;
    }
}

static int set_level(berth_isa_level_t *out, berth_isa_arch_t arch, int major, int minor)
{
    if (!valid(arch, major, minor))
        return -1;
    out->arch = arch;
    out->major = major;
    out->minor = minor;
    return 0;
}

/* "<digits>" or "<digits>.<digit>" exactly; -1 otherwise */
static int parse_version(const char *s, int *major, int *minor)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    long a = strtol(s, &end, 10), b = 0;
    if (*end == '.') {
        if (!isdigit((unsigned char)end[1]) || end[2] != '\0')
            return -1;
        b = end[1] - '0';
        end += 2;
    }
    if (*end != '\0' || a > 99)
        return -1;
    *major = (int)a;
    *minor = (int)b;
    return 0;
}

int berth_isa_level_parse(berth_isa_arch_t arch, const char *name, berth_isa_level_t *out)
{
    int major = 0, minor = 0;
    if (name == NULL)
        return -1;
    switch (arch) {
    case BERTH_ISA_AMD64:
        if (strcmp(name, "x86-64") == 0 || strcmp(name, "x86-64-v1") == 0)
            return set_level(out, arch, 1, 0);
        if (strncmp(name, "x86-64-v", 8) == 0 && name[8] >= '2' && name[8] <= '4' && name[9] == '\0')
            return set_level(out, arch, name[8] - '0', 0);
        return -1;
    case BERTH_ISA_ARM64: {
        size_t n = strlen(name);
        char v[8];
        if (strncmp(name, "armv", 4) != 0 || n < 8 || n > 10 || strcmp(name + n - 2, "-a") != 0)
            return -1;
        snprintf(v, sizeof(v), "%.*s", (int)(n - 6), name + 4);
        if (parse_version(v, &major, &minor) != 0)
            return -1;
        return set_level(out, arch, major, minor);
    }
    case BERTH_ISA_PPC64LE:
        if (strncmp(name, "power", 5) != 0 || parse_version(name + 5, &major, &minor) != 0 || minor != 0)
            return -1;
        return set_level(out, arch, major, 0);
    default: return -1;
    }
}

int berth_isa_variant_parse(berth_isa_arch_t arch, const char *variant, berth_isa_level_t *out)
{
    int major = 0, minor = 0;
    if (variant == NULL || variant[0] == '\0') {
        static const int base[] = {0, 1, 8, 8};
        return set_level(out, arch, base[arch], 0);
    }
    switch (arch) {
    case BERTH_ISA_AMD64:
        if (variant[0] != 'v' || parse_version(variant + 1, &major, &minor) != 0 || minor != 0)
            return -1;
        return set_level(out, arch, major, 0);
    case BERTH_ISA_ARM64:
        if (variant[0] != 'v' || parse_version(variant + 1, &major, &minor) != 0)
            return -1;
        return set_level(out, arch, major, minor);
    case BERTH_ISA_PPC64LE: return berth_isa_level_parse(arch, variant, out);
    default: return -1;
    }
}

void berth_isa_level_name(const berth_isa_level_t *l, char *out, size_t outsz)
{
    switch (l->arch) {
    case BERTH_ISA_AMD64: snprintf(out, outsz, l->major == 1 ? "x86-64" : "x86-64-v%d", l->major); break;
    case BERTH_ISA_ARM64: snprintf(out, outsz, "armv%d.%d-a", l->major, l->minor); break;
    case BERTH_ISA_PPC64LE: snprintf(out, outsz, "power%d", l->major); break;
    default: snprintf(out, outsz, "unknown");
    }
}

void berth_isa_level_variant(const berth_isa_level_t *l, char *out, size_t outsz)
{
    out[0] = '\0';
    if (berth_isa_level_is_baseline(l))
        return;
    switch (l->arch) {
    case BERTH_ISA_AMD64: snprintf(out, outsz, "v%d", l->major); break;
    case BERTH_ISA_ARM64: snprintf(out, outsz, l->minor == 0 ? "v%d" : "v%d.%d", l->major, l->minor); break;
    case BERTH_ISA_PPC64LE: snprintf(out, outsz, "power%d", l->major); break;
    default: break;
    }
}

int berth_isa_level_is_baseline(const berth_isa_level_t *l)
{
    return (l->arch == BERTH_ISA_AMD64 && l->major == 1) || (l->arch == BERTH_ISA_ARM64 && l->major == 8 && l->minor == 0) ||
           (l->arch == BERTH_ISA_PPC64LE && l->major == 8);
}

int berth_isa_level_runs(const berth_isa_level_t *node, const berth_isa_level_t *build)
{
    if (node->arch != build->arch)
        return 0;
    if (node->arch == BERTH_ISA_ARM64) {
        /* containerd's table: a v9.y node runs v9.x (x <= y) and v8.z (z <= y + 5) */
        if (build->major == node->major)
            return build->minor <= node->minor;
        return build->major == 8 && node->major == 9 && build->minor <= node->minor + 5;
    }
    return build->major <= node->major;
}

int berth_isa_level_rank(const berth_isa_level_t *l)
{
    return l->major * 100 + l->minor;
}

/* ---- features ------------------------------------------------------------------------------------------ */

/* any spelling (NFD, GCC, old scanner names) to the kernel's cpuinfo name: registry/isa/vocab.c */
static const char *alias(const char *name)
{
    const char *c = berth_isa_vocab_canonical(BERTH_ISA_ARCH_UNKNOWN, name);
    return c != NULL ? c : name;
}

void berth_isa_features_clear(berth_isa_features_t *f)
{
    f->n = 0;
}

int berth_isa_features_has(const berth_isa_features_t *f, const char *name)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(f->names[mid], name);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

int berth_isa_features_add(berth_isa_features_t *f, const char *raw)
{
    char name[BERTH_ISA_FEATURE_LEN];
    size_t n = strlen(raw);
    if (n == 0 || n >= sizeof(name))
        return -1;
    for (size_t i = 0; i <= n; i++)
        name[i] = (char)tolower((unsigned char)raw[i]);
    const char *canon = alias(name);
    if (berth_isa_features_has(f, canon))
        return 0;
    if (f->n == BERTH_ISA_MAX_FEATURES)
        return -1;
    int i = f->n;
    while (i > 0 && strcmp(f->names[i - 1], canon) > 0) { /* insertion keeps the set sorted */
        memcpy(f->names[i], f->names[i - 1], BERTH_ISA_FEATURE_LEN);
        i--;
    }
    snprintf(f->names[i], BERTH_ISA_FEATURE_LEN, "%s", canon);
    f->n++;
    return 0;
}

int berth_isa_features_add_list(berth_isa_features_t *f, const char *list)
{
    int dropped = 0;
    for (const char *p = list; p != NULL && *p != '\0';) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, ", \t\n");
        if (len > 0) {
            char tok[64];
            if (len < sizeof(tok)) {
                memcpy(tok, p, len);
                tok[len] = '\0';
                dropped += berth_isa_features_add(f, tok) != 0;
            } else {
                dropped++;
            }
        }
        p += len;
        if (*p == '\n')
            break;
    }
    return dropped;
}

int berth_isa_features_subset(const berth_isa_features_t *sub, const berth_isa_features_t *super, berth_isa_features_t *missing)
{
    int ok = 1;
    for (int i = 0; i < sub->n; i++)
        if (!berth_isa_features_has(super, sub->names[i])) {
            ok = 0;
            if (missing != NULL)
                berth_isa_features_add(missing, sub->names[i]);
        }
    return ok;
}

void berth_isa_features_join(const berth_isa_features_t *f, char *out, size_t outsz)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < f->n && o < outsz; i++) {
        int w = snprintf(out + o, outsz - o, "%s%s", i > 0 ? "," : "", f->names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

/* amd64 psABI levels (§1.1 of the design brief), cumulative, in cpuinfo names */
static const char *const amd64_levels[4][10] = {
    {"cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2", "syscall", NULL},
    {"cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2", NULL},
    {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave", NULL},
    {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", NULL},
};

/*
 * arm64: what each Armv8.x step adds, in hwcap names, cumulative. A row lists the features the Arm ARM makes
 * mandatory at that step (FEAT_* in parentheses) and that user code compiled with GCC's -march=armv8.x-a may use, so a
 * node with every feature up to a row runs code built for that level. Features that only the kernel uses (PAN, VHE,
 * ECV, DIT, BTI hints) are left out: a node whose kernel hides one must not lose its level. So is FEAT_PAuth: RHEL
 * kernels hide paca/pacg on Neoverse V1/V2, yet every Armv8.3 part has it and its instructions execute there. Armv9.x is
 * Armv8.(x+5) plus SVE and SVE2 (FEAT_SVE2 is mandatory in Armv9.0). Rows were written from the Arm ARM's feature lists; when a
 * kernel does not print a name (older kernels), the node is placed lower, which is the safe side.
 */
static const char *const arm64_steps[10][6] = {
    {NULL},                                        /* 8.0: fp, asimd (baseline) */
    {"crc32", "atomics", "asimdrdm", NULL},        /* 8.1: FEAT_CRC32, FEAT_LSE, FEAT_RDM */
    {"dcpop", NULL},                               /* 8.2: FEAT_DPB */
    {"jscvt", "fcma", "lrcpc", NULL},              /* 8.3: FEAT_JSCVT, FEAT_FCMA, FEAT_LRCPC (FEAT_PAuth: see above) */
    {"asimddp", "ilrcpc", "flagm", "uscat", NULL}, /* 8.4: FEAT_DotProd, FEAT_LRCPC2, FEAT_FlagM, FEAT_LSE2 */
    {"sb", "frint", "flagm2", "dcpodp", NULL},     /* 8.5: FEAT_SB, FEAT_FRINTTS, FEAT_FlagM2, FEAT_DPB2 */
    {"i8mm", "bf16", NULL},                        /* 8.6: FEAT_I8MM, FEAT_BF16 */
    {"wfxt", "afp", NULL},                         /* 8.7: FEAT_WFxT, FEAT_AFP */
    {"mops", "hbc", NULL},                         /* 8.8: FEAT_MOPS, FEAT_HBC */
    {"cssc", NULL},                                /* 8.9: FEAT_CSSC */
};

/* the Armv8 minor a level stands for (v9.x = v8.(x+5)) */
static int arm64_v8_minor(const berth_isa_level_t *l)
{
    int m = l->major == 9 ? l->minor + 5 : l->minor;
    return m > 9 ? 9 : m;
}

void berth_isa_level_features(const berth_isa_level_t *l, berth_isa_features_t *out)
{
    berth_isa_features_clear(out);
    if (l->arch == BERTH_ISA_ARM64) {
        berth_isa_features_add_list(out, "fp,asimd");
        for (int m = 1; m <= arm64_v8_minor(l); m++)
            for (int i = 0; arm64_steps[m][i] != NULL; i++)
                berth_isa_features_add(out, arm64_steps[m][i]);
        if (l->major == 9)
            berth_isa_features_add_list(out, "sve,sve2");
        return;
    }
    if (l->arch != BERTH_ISA_AMD64)
        return;
    for (int lv = 0; lv < l->major && lv < 4; lv++)
        for (int i = 0; amd64_levels[lv][i] != NULL; i++)
            berth_isa_features_add(out, amd64_levels[lv][i]);
}

/* arm64: the highest Armv8.x whose steps are all present, then Armv9.(x-5) when SVE2 is there too */
static berth_isa_level_t arm64_level_from_flags(const berth_isa_features_t *flags)
{
    berth_isa_level_t l = {BERTH_ISA_ARM64, 8, 0};
    for (int m = 1; m <= 9; m++) {
        for (int i = 0; arm64_steps[m][i] != NULL; i++)
            if (!berth_isa_features_has(flags, arm64_steps[m][i]))
                goto Done;
        l.minor = m;
    }
Done:
    if (l.minor >= 5 && berth_isa_features_has(flags, "sve") && berth_isa_features_has(flags, "sve2")) {
        l.major = 9;
        l.minor -= 5;
    }
    return l;
}

berth_isa_level_t berth_isa_level_from_flags(berth_isa_arch_t arch, const berth_isa_features_t *flags)
{
    berth_isa_level_t l;
    berth_isa_variant_parse(arch, NULL, &l);
    if (arch == BERTH_ISA_ARM64)
        return arm64_level_from_flags(flags);
    if (arch != BERTH_ISA_AMD64)
        return l;
    for (int lv = 1; lv < 4; lv++) {
        for (int i = 0; amd64_levels[lv][i] != NULL; i++)
            if (!berth_isa_features_has(flags, amd64_levels[lv][i]))
                return l;
        l.major = lv + 1;
    }
    return l;
}

int berth_isa_feature_known(berth_isa_arch_t arch, const char *name)
{
    return berth_isa_vocab_canonical(arch, name) != NULL;
}

/* ---- nodes ---------------------------------------------------------------------------------------------- */

static void node_init(berth_isa_node_t *out, berth_isa_arch_t arch)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->os, sizeof(out->os), "linux");
    berth_isa_variant_parse(arch, NULL, &out->level);
}

/* the value of the first "key<spaces>: value" line */
static int cpuinfo_line(const char *text, const char *key, char *out, size_t outsz)
{
    size_t klen = strlen(key);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL) {
        if (strncmp(p, key, klen) != 0)
            continue;
        const char *q = p + klen;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != ':')
            continue;
        q++;
        while (*q == ' ')
            q++;
        size_t len = strcspn(q, "\n");
        snprintf(out, outsz, "%.*s", (int)len, q);
        return 0;
    }
    return -1;
}

int berth_isa_node_from_cpuinfo(const char *text, berth_isa_node_t *out)
{
    enum { LINE = 16384 }; /* flags lines run to ~2 KiB */
    char *buf = malloc(LINE);
    int rc = -1;
    berth_isa_features_t flags;
    berth_isa_features_clear(&flags);
    if (cpuinfo_line(text, "flags", buf, LINE) == 0) {
        node_init(out, BERTH_ISA_AMD64);
        berth_isa_features_add_list(&flags, buf);
        out->level = berth_isa_level_from_flags(BERTH_ISA_AMD64, &flags);
        rc = 0;
    } else if (cpuinfo_line(text, "Features", buf, LINE) == 0) {
        node_init(out, BERTH_ISA_ARM64);
        berth_isa_features_add_list(&flags, buf);
        out->level = berth_isa_level_from_flags(BERTH_ISA_ARM64, &flags); /* "CPU architecture: 8" even on Armv9 */
        rc = 0;
    } else if (cpuinfo_line(text, "cpu", buf, LINE) == 0 && strncmp(buf, "POWER", 5) == 0) {
        node_init(out, BERTH_ISA_PPC64LE);
        long gen = strtol(buf + 5, NULL, 10); /* "POWER9 (architected)...": leading digits only */
        if (set_level(&out->level, BERTH_ISA_PPC64LE, gen >= 8 && gen <= 11 ? (int)gen : 8, 0) != 0)
            set_level(&out->level, BERTH_ISA_PPC64LE, 8, 0);
        if (strstr(buf, "altivec") != NULL)
            berth_isa_features_add(&flags, "altivec");
        rc = 0;
    }
    if (rc == 0) {
        berth_isa_level_features(&out->level, &out->features);
        for (int i = 0; i < flags.n; i++)
            berth_isa_features_add(&out->features, flags.names[i]);
        out->level_source = "flags";
    }
    free(buf);
    return rc;
}

#define NFD_CPUID "feature.node.kubernetes.io/cpu-cpuid."

int berth_isa_node_from_labels(const char *const *keys, const char *const *values, size_t n, berth_isa_node_t *out)
{
    berth_isa_arch_t arch = BERTH_ISA_ARCH_UNKNOWN;
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i], "kubernetes.io/arch") == 0 || strcmp(keys[i], "beta.kubernetes.io/arch") == 0)
            arch = berth_isa_arch_parse(values[i]);
    if (arch == BERTH_ISA_ARCH_UNKNOWN)
        return -1;
    node_init(out, arch);
    berth_isa_features_t extra;
    berth_isa_features_clear(&extra);
    int vlevel = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(keys[i], "kubernetes.io/os") == 0)
            snprintf(out->os, sizeof(out->os), "%s", values[i]);
        if (strcmp(keys[i], "archspec.io/cpu.target") == 0)
            snprintf(out->target, sizeof(out->target), "%s", values[i]);
        if (strncmp(keys[i], NFD_CPUID, strlen(NFD_CPUID)) != 0 || strcmp(values[i], "true") != 0)
            continue;
        const char *name = keys[i] + strlen(NFD_CPUID);
        if (strncmp(name, "X86_64_V", 8) == 0 && name[8] >= '1' && name[8] <= '4' && name[9] == '\0') {
            if (name[8] - '0' > vlevel)
                vlevel = name[8] - '0';
            continue;
        }
        const char *linux_name = berth_isa_vocab_from_nfd(arch, name);
        if (linux_name != NULL)
            berth_isa_features_add(&extra, linux_name);
    }
    out->level_source = "labels";
    if (arch == BERTH_ISA_AMD64) {
        if (vlevel > 0) {
            out->level.major = vlevel; /* NFD >= 0.19 publishes the psABI level itself */
        } else {
            /* older NFD: BMI/F16C/LZCNT/POPCNT are blacklisted by default, so v2/v3 are approximated */
            static const char *const v4[] = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
            static const char *const v3[] = {"avx", "avx2", "fma"};
            int has4 = 1, has3 = 1;
            for (int i = 0; i < 5; i++)
                has4 &= berth_isa_features_has(&extra, v4[i]);
            for (int i = 0; i < 3; i++)
                has3 &= berth_isa_features_has(&extra, v3[i]);
            out->level.major = has4 && has3 ? 4 : has3 ? 3 : 1;
            out->level_source = "labels-approx";
        }
    } else if (arch == BERTH_ISA_ARM64) {
        out->level = berth_isa_level_from_flags(arch, &extra); /* NFD lists fewer names than cpuinfo: may place it lower */
    }
    berth_isa_level_features(&out->level, &out->features);
    for (int i = 0; i < extra.n; i++)
        berth_isa_features_add(&out->features, extra.names[i]);
    return 0;
}

/* ---- selection ------------------------------------------------------------------------------------------- */

static int scan_ok(const char *s)
{
    return strcmp(s, "pass") == 0 || strcmp(s, "warn") == 0;
}

/* > 0 when a is better than b */
static int better(const berth_isa_variant_t *a, const berth_isa_variant_t *b, const berth_isa_node_t *node, int prefer_lowest)
{
    int la = berth_isa_level_rank(&a->level), lb = berth_isa_level_rank(&b->level);
    if (la != lb)
        return prefer_lowest ? lb - la : la - lb;
    if (a->features.n != b->features.n)
        return a->features.n - b->features.n;
    int ta = node->target[0] && strcmp(a->target, node->target) == 0, tb = node->target[0] && strcmp(b->target, node->target) == 0;
    if (ta != tb)
        return ta - tb;
    if (a->priority != b->priority)
        return a->priority > b->priority ? 1 : -1;
    return b->position - a->position;
}

int berth_isa_select(const berth_isa_variant_t *v, size_t n, const berth_isa_node_t *node, const berth_isa_policy_t *policy,
                     berth_isa_choice_t *choices)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        berth_isa_choice_t *c = &choices[i];
        memset(c, 0, sizeof(*c));
        const char *os = v[i].os[0] ? v[i].os : "linux";
        if (strcmp(os, node->os[0] ? node->os : "linux") != 0 || v[i].level.arch != node->level.arch) {
            snprintf(c->why, sizeof(c->why), "platform %s/%s", os, berth_isa_arch_name(v[i].level.arch));
            continue;
        }
        if (!berth_isa_level_runs(&node->level, &v[i].level)) {
            char name[24];
            berth_isa_level_name(&v[i].level, name, sizeof(name));
            snprintf(c->why, sizeof(c->why), "needs %s", name);
            berth_isa_level_features(&v[i].level, &c->missing);
            berth_isa_features_t have = node->features;
            berth_isa_features_t implied = c->missing;
            berth_isa_features_clear(&c->missing);
            berth_isa_features_subset(&implied, &have, &c->missing);
        }
        if (!berth_isa_features_subset(&v[i].features, &node->features, &c->missing) && c->why[0] == '\0')
            snprintf(c->why, sizeof(c->why), "missing features");
        if (c->why[0] == '\0' && policy != NULL && policy->has_max_level && !berth_isa_level_runs(&policy->max_level, &v[i].level))
            snprintf(c->why, sizeof(c->why), "above max_level");
        if (c->why[0] == '\0' && policy != NULL && policy->require_scan_pass && !scan_ok(v[i].scan_status))
            snprintf(c->why, sizeof(c->why), "scan %s", v[i].scan_status[0] ? v[i].scan_status : "missing");
        if (c->why[0] != '\0')
            continue;
        c->compatible = 1;
        if (best < 0 || better(&v[i], &v[best], node, policy != NULL && policy->prefer_lowest) > 0)
            best = (int)i;
    }
    /* ranks: 1 + the number of compatible variants better than this one */
    for (size_t i = 0; i < n; i++) {
        if (!choices[i].compatible)
            continue;
        choices[i].rank = 1;
        for (size_t j = 0; j < n; j++)
            if (j != i && choices[j].compatible && better(&v[j], &v[i], node, policy != NULL && policy->prefer_lowest) > 0)
                choices[i].rank++;
    }
    return best;
}
