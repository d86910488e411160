/*
 * The ELF side of the ISA scanner (design brief (f)): what one ELF file needs. Notes (GNU_PROPERTY_X86_ISA_1_NEEDED),
 * the highest x86 level its instructions use (Zydis ISA sets) or the SVE/SME words of arm64 code, the function
 * each finding sits in, and which findings only run after a CPU check — decided from evidence in the binary (IFUNC
 * resolvers, target_clones resolvers, cpuid/xgetbv, __cpu_model, getauxval, and the call graph from the entry
 * point), never from function names (registry/isa/README.md). Pure and bounds-checked: the input is untrusted
 * (fuzzed in tests/fuzz/elf_fuzzer.c).
 */
#ifndef BERTH_ISA_SCAN_H
#define BERTH_ISA_SCAN_H

#include <stddef.h>

#include "registry/isa/isa.h"

typedef struct st_berth_elf_finding_t {
    char function[64]; /* symbol containing the instruction ("" when unknown) */
    char mnemonic[24];
    char isa_set[32];
    unsigned long offset; /* file offset of the instruction */
} berth_elf_finding_t;

typedef struct st_berth_elf_report_t {
    berth_isa_arch_t arch;
    int is_static;                      /* no PT_INTERP: the loader's ISA check does not apply */
    int needed_level;                   /* amd64: from the ISA_1_NEEDED note (1..4), 0 when absent */
    berth_isa_level_t max_level;        /* highest level its instructions use */
    berth_isa_features_t features;      /* named features beyond the level (avx512_vnni, amx_tile, sve, sme …) */
    int dispatched;                     /* the file checks the CPU somewhere (a guard, an IFUNC, a probing import) */
    int soft_level;                     /* amd64: the highest level in code that only runs after a CPU check (0 when none) */
    berth_isa_features_t soft_features; /* features used only inside dispatched code */
    berth_elf_finding_t evidence[4];    /* the first instructions found at max_level / with features */
    int nevidence;
    unsigned long instructions;
} berth_elf_report_t;

/**
 * Analyse one ELF image. Returns 0, or -1 when it is not a 64-bit little-endian x86-64/aarch64 ELF (skip it).
 * `max_instructions` caps the work per file.
 */
int berth_elf_scan(const unsigned char *data, size_t len, unsigned long max_instructions, berth_elf_report_t *out);

#endif
