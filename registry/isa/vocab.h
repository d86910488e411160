/*
 * One feature vocabulary (issue #10): every spelling of a CPU feature — the kernel's /proc/cpuinfo name, NFD's
 * label name (klauspost/cpuid, e.g. AVX512FP16), compiler and scanner spellings (avx512fp16, sse4.1, lzcnt) — maps
 * to one canonical name, the kernel's. Tables only; tests check every alias pair and the canonical names against
 * the kernel's lists (tests/unit/data/vocab/).
 */
#ifndef BERTH_ISA_VOCAB_H
#define BERTH_ISA_VOCAB_H

#include <stddef.h>

#include "registry/isa/isa.h"

typedef struct st_berth_isa_vocab_entry_t {
    berth_isa_arch_t arch;
    const char *canonical; /* x86: cpufeatures.h cpuinfo name; arm64: elf_hwcaps.rst name; ppc64le: AT_HWCAP2 name */
    int kernel;            /* 1: the kernel prints this name; 0: a feature it hides or has no flag for (canonical is gcc's) */
    const char *nfd;       /* NFD cpu-cpuid label name, NULL when NFD has none */
    const char *aliases;   /* other spellings, comma-separated, lower case ("" for none) */
} berth_isa_vocab_entry_t;

/** The table (for tests and listings). */
const berth_isa_vocab_entry_t *berth_isa_vocab(size_t *n);
/**
 * The canonical name for any spelling (case-insensitive, '-' reads as '_'), or NULL when unknown. `arch` UNKNOWN
 * searches every architecture.
 */
const char *berth_isa_vocab_canonical(berth_isa_arch_t arch, const char *name);
/** NFD's label name for a canonical feature ("avx512_fp16" → "AVX512FP16"), or NULL when NFD has none. */
const char *berth_isa_vocab_nfd(berth_isa_arch_t arch, const char *canonical);
/** The canonical name for an NFD label name (exact NFD spelling first, then any spelling), or NULL. */
const char *berth_isa_vocab_from_nfd(berth_isa_arch_t arch, const char *nfd);

#endif
