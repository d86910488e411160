#include "registry/isa/vocab.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define X BERTH_ISA_AMD64
#define A BERTH_ISA_ARM64
#define P BERTH_ISA_PPC64LE

/*
 * Sources: x86 — torvalds/linux arch/x86/include/asm/cpufeatures.h (the quoted cpuinfo name; kernel = 0 where
 * the kernel hides the flag); arm64 — Documentation/arch/arm64/elf_hwcaps.rst; POWER — glibc dl-procinfo.c hwcap2
 * names. NFD names are klauspost/cpuid feature IDs as NFD labels them (cpu-cpuid.<NAME>). Aliases: GCC/clang
 * -m/-march+ spellings and the names Berth's scanner and berth-isa used before this table.
 */
static const berth_isa_vocab_entry_t vocab[] = {
    /* x86-64 baseline and psABI levels */
    {X, "fpu", 1, "X87", "x87"},
    {X, "cx8", 1, "CMPXCHG8", "cmpxchg8b"},
    {X, "cmov", 1, "CMOV", ""},
    {X, "mmx", 1, "MMX", ""},
    {X, "fxsr", 1, "FXSR", "fxsave"},
    {X, "sse", 1, "SSE", ""},
    {X, "sse2", 1, "SSE2", ""},
    {X, "syscall", 1, "SYSCALL", ""},
    {X, "lm", 1, NULL, ""},
    {X, "pni", 1, "SSE3", "sse3"},
    {X, "ssse3", 1, "SSSE3", ""},
    {X, "sse4_1", 1, "SSE4", "sse4.1,sse41"},
    {X, "sse4_2", 1, "SSE42", "sse4.2,sse42"},
    {X, "popcnt", 1, "POPCNT", ""},
    {X, "cx16", 1, "CX16", "cmpxchg16b"},
    {X, "lahf_lm", 1, "LAHF", "lahf,sahf"},
    {X, "avx", 1, "AVX", ""},
    {X, "avx2", 1, "AVX2", ""},
    {X, "bmi1", 1, "BMI1", "bmi"},
    {X, "bmi2", 1, "BMI2", ""},
    {X, "f16c", 1, "F16C", ""},
    {X, "fma", 1, "FMA3", "fma3"},
    {X, "abm", 1, "LZCNT", "lzcnt"},
    {X, "movbe", 1, "MOVBE", ""},
    {X, "xsave", 1, "XSAVE", "osxsave"},
    {X, "avx512f", 1, "AVX512F", ""},
    {X, "avx512bw", 1, "AVX512BW", ""},
    {X, "avx512cd", 1, "AVX512CD", ""},
    {X, "avx512dq", 1, "AVX512DQ", ""},
    {X, "avx512vl", 1, "AVX512VL", ""},
    /* x86 extras */
    {X, "3dnow", 1, "AMD3DNOW", ""},
    {X, "3dnowext", 1, "AMD3DNOWEXT", "3dnowa"},
    {X, "adx", 1, "ADX", ""},
    {X, "aes", 1, "AESNI", "aesni"},
    {X, "amx_bf16", 1, "AMXBF16", "amxbf16"},
    {X, "amx_int8", 1, "AMXINT8", "amxint8"},
    {X, "amx_tile", 1, "AMXTILE", "amxtile"},
    {X, "amx_fp16", 0, "AMXFP16", "amxfp16"},
    {X, "amx_complex", 0, "AMXCOMPLEX", "amxcomplex"},
    {X, "avx512_4fmaps", 1, NULL, "avx5124fmaps"},
    {X, "avx512_4vnniw", 1, NULL, "avx5124vnniw"},
    {X, "avx512_bf16", 1, "AVX512BF16", "avx512bf16"},
    {X, "avx512_bitalg", 1, "AVX512BITALG", "avx512bitalg"},
    {X, "avx512_fp16", 1, "AVX512FP16", "avx512fp16"},
    {X, "avx512_vbmi2", 1, "AVX512VBMI2", "avx512vbmi2"},
    {X, "avx512_vnni", 1, "AVX512VNNI", "avx512vnni"},
    {X, "avx512_vp2intersect", 1, "AVX512VP2INTERSECT", "avx512vp2intersect"},
    {X, "avx512_vpopcntdq", 1, "AVX512VPOPCNTDQ", "avx512vpopcntdq"},
    {X, "avx512er", 1, "AVX512ER", ""},
    {X, "avx512ifma", 1, "AVX512IFMA", ""},
    {X, "avx512pf", 1, "AVX512PF", ""},
    {X, "avx512vbmi", 1, "AVX512VBMI", ""},
    {X, "avx_ifma", 0, "AVXIFMA", "avxifma"},
    {X, "avx_ne_convert", 0, "AVXNECONVERT", "avxneconvert"},
    {X, "avx_vnni", 1, "AVXVNNI", "avxvnni"},
    {X, "avx_vnni_int8", 0, "AVXVNNIINT8", "avxvnniint8"},
    {X, "avx_vnni_int16", 0, "AVXVNNIINT16", "avxvnniint16"},
    {X, "cldemote", 1, "CLDEMOTE", ""},
    {X, "clflushopt", 1, NULL, ""},
    {X, "clwb", 1, NULL, ""},
    {X, "clzero", 1, "CLZERO", ""},
    {X, "cmpccxadd", 0, "CMPCCXADD", ""},
    {X, "fma4", 1, "FMA4", ""},
    {X, "fsgsbase", 1, NULL, ""},
    {X, "gfni", 1, "GFNI", ""},
    {X, "movdir64b", 1, "MOVDIR64B", ""},
    {X, "movdiri", 1, "MOVDIRI", ""},
    {X, "pclmulqdq", 1, "CLMUL", "pclmul"},
    {X, "pku", 1, NULL, ""},
    {X, "rdpid", 1, NULL, ""},
    {X, "rdrand", 1, "RDRAND", "rdrnd"},
    {X, "rdseed", 1, "RDSEED", ""},
    {X, "serialize", 1, "SERIALIZE", ""},
    {X, "sha_ni", 1, "SHA", "sha,shani"},
    {X, "sha512", 0, "SHA512", ""},
    {X, "sm3", 0, "SM3_X86", ""},
    {X, "sm4", 0, "SM4_X86", ""},
    {X, "sse4a", 1, "SSE4A", ""},
    {X, "tbm", 1, "TBM", ""},
    {X, "vaes", 1, "VAES", ""},
    {X, "vpclmulqdq", 1, "VPCLMULQDQ", ""},
    {X, "waitpkg", 1, "WAITPKG", ""},
    {X, "xop", 1, "XOP", ""},
    {X, "xsavec", 1, "XSAVEC", ""},
    {X, "xsaveopt", 1, "XSAVEOPT", ""},
    /* arm64: the Features line of /proc/cpuinfo */
    {A, "fp", 1, "FP", ""},
    {A, "asimd", 1, "ASIMD", "neon,simd"},
    {A, "evtstrm", 1, "EVTSTRM", ""},
    {A, "aes", 1, "AESARM", ""},
    {A, "pmull", 1, "PMULL", ""},
    {A, "sha1", 1, "SHA1", ""},
    {A, "sha2", 1, "SHA2", ""},
    {A, "crc32", 1, "CRC32", "crc"},
    {A, "atomics", 1, "ATOMICS", "lse"},
    {A, "fphp", 1, "FPHP", ""},
    {A, "asimdhp", 1, "ASIMDHP", ""},
    {A, "cpuid", 1, "ARMCPUID", ""},
    {A, "asimdrdm", 1, "ASIMDRDM", "rdm,rdma"},
    {A, "jscvt", 1, "JSCVT", ""},
    {A, "fcma", 1, "FCMA", "complxnum"},
    {A, "lrcpc", 1, "LRCPC", "rcpc"},
    {A, "dcpop", 1, "DCPOP", ""},
    {A, "sha3", 1, "SHA3", ""},
    {A, "sm3", 1, "SM3", ""},
    {A, "sm4", 1, "SM4", ""},
    {A, "asimddp", 1, "ASIMDDP", "dotprod"},
    {A, "sha512", 1, "SHA512", ""},
    {A, "sve", 1, "SVE", ""},
    {A, "asimdfhm", 1, NULL, "fp16fml,fhm"},
    {A, "dit", 1, NULL, ""},
    {A, "uscat", 1, NULL, ""},
    {A, "ilrcpc", 1, NULL, "rcpc2"},
    {A, "flagm", 1, NULL, ""},
    {A, "ssbs", 1, NULL, ""},
    {A, "sb", 1, NULL, ""},
    {A, "paca", 1, NULL, ""},
    {A, "pacg", 1, "GPA", ""},
    {A, "dcpodp", 1, NULL, ""},
    {A, "sve2", 1, NULL, ""},
    {A, "sveaes", 1, NULL, "sve2_aes"},
    {A, "svepmull", 1, NULL, ""},
    {A, "svebitperm", 1, NULL, "sve2_bitperm"},
    {A, "svesha3", 1, NULL, "sve2_sha3"},
    {A, "svesm4", 1, NULL, "sve2_sm4"},
    {A, "flagm2", 1, NULL, "altnzcv"},
    {A, "frint", 1, NULL, "frintts"},
    {A, "svei8mm", 1, NULL, ""},
    {A, "svef32mm", 1, NULL, "f32mm"},
    {A, "svef64mm", 1, NULL, "f64mm"},
    {A, "svebf16", 1, NULL, ""},
    {A, "i8mm", 1, NULL, ""},
    {A, "bf16", 1, NULL, ""},
    {A, "dgh", 1, NULL, ""},
    {A, "rng", 1, NULL, ""},
    {A, "bti", 1, NULL, ""},
    {A, "mte", 1, NULL, "memtag"},
    {A, "ecv", 1, NULL, ""},
    {A, "afp", 1, NULL, ""},
    {A, "rpres", 1, NULL, ""},
    {A, "mte3", 1, NULL, ""},
    {A, "sme", 1, NULL, ""},
    {A, "sme2", 1, NULL, ""},
    {A, "sve2p1", 1, NULL, ""},
    {A, "wfxt", 1, NULL, ""},
    {A, "ebf16", 1, NULL, ""},
    {A, "sveebf16", 1, NULL, ""},
    {A, "cssc", 1, NULL, ""},
    {A, "rprfm", 1, NULL, ""},
    {A, "sve2p2", 1, NULL, ""},
    {A, "lrcpc3", 1, NULL, "rcpc3"},
    {A, "lse128", 1, NULL, ""},
    /* ppc64le: AT_HWCAP2 / AT_HWCAP names */
    {P, "altivec", 1, NULL, ""},
    {P, "vsx", 1, NULL, ""},
    {P, "arch_2_07", 1, NULL, ""},
    {P, "arch_3_00", 1, NULL, ""},
    {P, "arch_3_1", 1, NULL, ""},
    {P, "darn", 1, NULL, ""},
    {P, "htm", 1, NULL, ""},
    {P, "ieee128", 1, NULL, ""},
    {P, "mma", 1, NULL, ""},
    {P, "scv", 1, NULL, ""},
};

#undef X
#undef A
#undef P

const berth_isa_vocab_entry_t *berth_isa_vocab(size_t *n)
{
    *n = sizeof(vocab) / sizeof(vocab[0]);
    return vocab;
}

/* lower case, '-' as '_' (GCC spells amx-tile, the kernel amx_tile); 0 or -1 when too long */
static int fold(const char *in, char *out, size_t outsz)
{
    size_t i = 0;
    for (; in[i] != '\0'; i++) {
        if (i + 1 >= outsz)
            return -1;
        out[i] = in[i] == '-' ? '_' : (char)tolower((unsigned char)in[i]);
    }
    out[i] = '\0';
    return 0;
}

/* 1 if `name` is one of the comma-separated `list` */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

const char *berth_isa_vocab_canonical(berth_isa_arch_t arch, const char *name)
{
    char f[64], nfd[64];
    if (name == NULL || fold(name, f, sizeof(f)) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof(vocab) / sizeof(vocab[0]); i++) {
        const berth_isa_vocab_entry_t *e = &vocab[i];
        if (arch != BERTH_ISA_ARCH_UNKNOWN && e->arch != arch)
            continue;
        if (strcmp(e->canonical, f) == 0 || in_list(e->aliases, f))
            return e->canonical;
        if (e->nfd != NULL && fold(e->nfd, nfd, sizeof(nfd)) == 0 && strcmp(nfd, f) == 0)
            return e->canonical;
    }
    return NULL;
}

const char *berth_isa_vocab_from_nfd(berth_isa_arch_t arch, const char *nfd)
{
    for (size_t i = 0; nfd != NULL && i < sizeof(vocab) / sizeof(vocab[0]); i++)
        if ((arch == BERTH_ISA_ARCH_UNKNOWN || vocab[i].arch == arch) && vocab[i].nfd != NULL && strcmp(vocab[i].nfd, nfd) == 0)
            return vocab[i].canonical;
    return berth_isa_vocab_canonical(arch, nfd);
}

const char *berth_isa_vocab_nfd(berth_isa_arch_t arch, const char *canonical)
{
    for (size_t i = 0; canonical != NULL && i < sizeof(vocab) / sizeof(vocab[0]); i++)
        if (vocab[i].arch == arch && strcmp(vocab[i].canonical, canonical) == 0)
            return vocab[i].nfd;
    return NULL;
}
