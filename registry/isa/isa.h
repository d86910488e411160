/*
 * CPU-ISA variants (issue #4, docs/design.md): instruction-set levels per architecture, feature
 * sets in Linux /proc/cpuinfo vocabulary, node capabilities (from a level, full cpuinfo flags or NFD labels),
 * and the matching and ranking that pick the build a node should run. Pure C with no I/O: berthd and the
 * node CLI (berth-isa) share it, so the registry and a node answer identically.
 */
#ifndef BERTH_ISA_ISA_H
#define BERTH_ISA_ISA_H

#include <stddef.h>

#define BERTH_ISA_MAX_FEATURES 256 /* a Sapphire Rapids flags line has ~190 names */
#define BERTH_ISA_FEATURE_LEN 24
#define BERTH_ISA_ANNOTATION_PREFIX "io.berth.isa."

typedef enum { BERTH_ISA_ARCH_UNKNOWN = 0, BERTH_ISA_AMD64, BERTH_ISA_ARM64, BERTH_ISA_PPC64LE } berth_isa_arch_t;

/* amd64: major 1..4 (x86-64, -v2, -v3, -v4); arm64: 8.0..8.9, 9.0..9.5; ppc64le: major 8..11 (power8..11) */
typedef struct st_berth_isa_level_t {
    berth_isa_arch_t arch;
    int major, minor;
} berth_isa_level_t;

/** A sorted, duplicate-free set of lower-case feature names. */
typedef struct st_berth_isa_features_t {
    char names[BERTH_ISA_MAX_FEATURES][BERTH_ISA_FEATURE_LEN];
    int n;
} berth_isa_features_t;

/** "amd64"/"x86_64" → AMD64, "arm64"/"aarch64" → ARM64, "ppc64le" → PPC64LE. */
berth_isa_arch_t berth_isa_arch_parse(const char *s);
const char *berth_isa_arch_name(berth_isa_arch_t a); /* OCI spelling */

/** Canonical level name ("x86-64-v3", "armv8.2-a", "power9") into *out; 0 or -1. */
int berth_isa_level_parse(berth_isa_arch_t arch, const char *name, berth_isa_level_t *out);
/** OCI platform.variant (NULL/"" is the baseline) into *out; 0, or -1 for a value outside the known set. */
int berth_isa_variant_parse(berth_isa_arch_t arch, const char *variant, berth_isa_level_t *out);
/** Canonical name of a level. */
void berth_isa_level_name(const berth_isa_level_t *l, char *out, size_t outsz);
/** The OCI variant for a level ("" for the baseline). */
void berth_isa_level_variant(const berth_isa_level_t *l, char *out, size_t outsz);
/** 1 if a node at `node` runs code built for `build` (same arch; the arch's partial order). */
int berth_isa_level_runs(const berth_isa_level_t *node, const berth_isa_level_t *build);
/** Total order for ranking (higher is better): major * 100 + minor. */
int berth_isa_level_rank(const berth_isa_level_t *l);
/** 1 for the baseline of its arch. */
int berth_isa_level_is_baseline(const berth_isa_level_t *l);

void berth_isa_features_clear(berth_isa_features_t *f);
/** Add one name (lower-cased); returns -1 when full or too long. */
int berth_isa_features_add(berth_isa_features_t *f, const char *name);
/** Add a comma- or space-separated list. Returns the number of names that did not fit (0 normally). */
int berth_isa_features_add_list(berth_isa_features_t *f, const char *list);
int berth_isa_features_has(const berth_isa_features_t *f, const char *name);
/** 1 if every feature of `sub` is in `super`; otherwise 0 with the missing names added to `missing` (may be NULL). */
int berth_isa_features_subset(const berth_isa_features_t *sub, const berth_isa_features_t *super, berth_isa_features_t *missing);
/** Comma-joined, sorted. */
void berth_isa_features_join(const berth_isa_features_t *f, char *out, size_t outsz);
/** 1 if `name` is a feature Berth knows for the arch (cpuinfo flags, arm64 hwcaps, POWER hwcap2 names). */
int berth_isa_feature_known(berth_isa_arch_t arch, const char *name);
/** The features a level implies (amd64: the psABI table; arm64: the mandatory features per Armv8.x/9.x; ppc64le: none). */
void berth_isa_level_features(const berth_isa_level_t *l, berth_isa_features_t *out);

/** What a node offers. */
typedef struct st_berth_isa_node_t {
    char os[16];
    berth_isa_level_t level;
    berth_isa_features_t features; /* implied by the level plus reported extras */
    char target[48];               /* archspec name, optional */
    const char *level_source;      /* "flags", "level", "labels", "labels-approx" */
} berth_isa_node_t;

/**
 * The highest level a full flag list proves (glibc get_isa_level rule; amd64 needs every feature of a level
 * and of the levels below). arm64: the Armv8.x/9.x level derived from the hwcap names (the Arm ARM's mandatory
 * features per level, isa.c arm64_steps), since cpuinfo prints "CPU architecture: 8" even on Armv9 parts.
 */
berth_isa_level_t berth_isa_level_from_flags(berth_isa_arch_t arch, const berth_isa_features_t *flags);
/**
 * Parse a /proc/cpuinfo dump (first processor's "flags" or "Features" line, or POWER "cpu" line) into a node.
 * Returns 0 or -1 when the text names no known architecture.
 */
int berth_isa_node_from_cpuinfo(const char *text, berth_isa_node_t *out);
/**
 * Build a node from NFD labels ("feature.node.kubernetes.io/cpu-cpuid.X86_64_V3" = "true", "kubernetes.io/arch").
 * `keys`/`values` are parallel arrays. Returns 0, or -1 without an architecture label.
 */
int berth_isa_node_from_labels(const char *const *keys, const char *const *values, size_t n, berth_isa_node_t *out);

/** One build in an index. */
typedef struct st_berth_isa_variant_t {
    int position;
    char digest[160];
    char os[16];
    berth_isa_level_t level;
    berth_isa_features_t features; /* required beyond the level */
    char target[48];
    int priority;
    int baseline_spelled_v1;
    char scan_status[12]; /* "", "pending", "pass", "warn", "fail", "error" */
} berth_isa_variant_t;

typedef struct st_berth_isa_policy_t {
    int prefer_lowest;
    int has_max_level;
    berth_isa_level_t max_level;
    int require_scan_pass; /* skip variants whose scan is not pass/warn */
} berth_isa_policy_t;

typedef struct st_berth_isa_choice_t {
    int compatible;
    int rank;                     /* 1 = best among the compatible; 0 when incompatible */
    berth_isa_features_t missing; /* features the node lacks */
    char why[96];                 /* for incompatible: the first reason */
} berth_isa_choice_t;

/**
 * Rate every variant for `node` (choices[i] for variants[i]) and return the index of the best, or -1 when none
 * fits. Ranking: highest level (lowest with prefer_lowest), most extra features, target match, priority,
 * earlier position.
 */
int berth_isa_select(const berth_isa_variant_t *variants, size_t n, const berth_isa_node_t *node, const berth_isa_policy_t *policy,
                     berth_isa_choice_t *choices);

#endif
