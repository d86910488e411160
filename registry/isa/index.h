/*
 * Push-time checks of an image index that carries ISA variants (design brief (b)), and the variant rows it
 * yields. Pure: the child configs are asked for through a callback so tests and the registry share the code.
 */
#ifndef BERTH_ISA_INDEX_H
#define BERTH_ISA_INDEX_H

#include <stddef.h>

#include "registry/isa/isa.h"

typedef enum { BERTH_ISA_POLICY_OFF = 0, BERTH_ISA_POLICY_WARN, BERTH_ISA_POLICY_STRICT } berth_isa_policy_mode_t;

#define BERTH_ISA_MAX_NOTES 8
#define BERTH_ISA_NOTE_LEN 200

typedef struct st_berth_isa_report_t {
    int is_isa;                    /* a non-baseline variant or an io.berth.isa.* annotation: the checks apply */
    berth_isa_variant_t *variants; /* entries of known architectures, in index order (malloc'd) */
    size_t nvariants;
    char errors[BERTH_ISA_MAX_NOTES][BERTH_ISA_NOTE_LEN];
    int nerrors;
    char warnings[BERTH_ISA_MAX_NOTES][BERTH_ISA_NOTE_LEN];
    int nwarnings;
} berth_isa_report_t;

/**
 * Reads a child manifest's config platform: fills architecture/os/variant (empty when the config has none) and
 * returns 0, or -1 when it cannot be read (the check is skipped for that entry).
 */
typedef int (*berth_isa_config_fn)(void *ctx, const char *manifest_digest, char arch[32], char os[32], char variant[32]);

/**
 * Check an index (JSON bytes) under `mode`. Errors always reject; the baseline, "v1" spelling and ordering rules
 * are warnings under WARN and errors under STRICT; OFF records the variants and checks nothing. Returns 0
 * (dispose *out), or -1 when the bytes are not an index.
 */
int berth_isa_index_check(const char *json, size_t len, berth_isa_policy_mode_t mode, berth_isa_config_fn config_of, void *ctx,
                          berth_isa_report_t *out);
void berth_isa_report_dispose(berth_isa_report_t *r);
/** The variants as JSON rows for the database and the API (malloc'd). */
char *berth_isa_variants_json(const berth_isa_variant_t *v, size_t n);
/** Parse rows made by berth_isa_variants_json (or the database's copy of them); 0 or -1. */
int berth_isa_variants_parse(const char *json, berth_isa_variant_t **out, size_t *n_out);

#endif
