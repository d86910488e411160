#include "registry/isa/detect.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

#if defined(__x86_64__)
typedef struct {
    unsigned leaf, sub, reg; /* reg: 0 eax 1 ebx 2 ecx 3 edx */
    unsigned bit;
    const char *name;
} bit_t;

/* CPUID bits behind the psABI levels and the common extras, with their /proc/cpuinfo names */
static const bit_t bits[] = {
    {1, 0, 3, 0, "fpu"},
    {1, 0, 3, 8, "cx8"},
    {1, 0, 3, 15, "cmov"},
    {1, 0, 3, 23, "mmx"},
    {1, 0, 3, 24, "fxsr"},
    {1, 0, 3, 25, "sse"},
    {1, 0, 3, 26, "sse2"},
    {1, 0, 2, 0, "pni"},
    {1, 0, 2, 1, "pclmulqdq"},
    {1, 0, 2, 9, "ssse3"},
    {1, 0, 2, 12, "fma"},
    {1, 0, 2, 13, "cx16"},
    {1, 0, 2, 19, "sse4_1"},
    {1, 0, 2, 20, "sse4_2"},
    {1, 0, 2, 22, "movbe"},
    {1, 0, 2, 23, "popcnt"},
    {1, 0, 2, 25, "aes"},
    {1, 0, 2, 26, "xsave"},
    {1, 0, 2, 28, "avx"},
    {1, 0, 2, 29, "f16c"},
    {7, 0, 1, 3, "bmi1"},
    {7, 0, 1, 5, "avx2"},
    {7, 0, 1, 8, "bmi2"},
    {7, 0, 1, 16, "avx512f"},
    {7, 0, 1, 17, "avx512dq"},
    {7, 0, 1, 21, "avx512ifma"},
    {7, 0, 1, 28, "avx512cd"},
    {7, 0, 1, 29, "sha_ni"},
    {7, 0, 1, 30, "avx512bw"},
    {7, 0, 1, 31, "avx512vl"},
    {7, 0, 2, 1, "avx512vbmi"},
    {7, 0, 2, 6, "avx512_vbmi2"},
    {7, 0, 2, 8, "gfni"},
    {7, 0, 2, 9, "vaes"},
    {7, 0, 2, 10, "vpclmulqdq"},
    {7, 0, 2, 11, "avx512_vnni"},
    {7, 0, 2, 12, "avx512_bitalg"},
    {7, 0, 2, 14, "avx512_vpopcntdq"},
    {7, 0, 3, 23, "avx512_fp16"},
    {7, 0, 3, 22, "amx_bf16"},
    {7, 0, 3, 24, "amx_tile"},
    {7, 0, 3, 25, "amx_int8"},
    {7, 1, 0, 4, "avx_vnni"},
    {7, 1, 0, 5, "avx512_bf16"},
    {0x80000001, 0, 2, 0, "lahf_lm"},
    {0x80000001, 0, 2, 5, "abm"},
    {0x80000001, 0, 3, 11, "syscall"},
    {0x80000001, 0, 3, 29, "lm"},
};
/* features that need OS support (XCR0) on top of the CPUID bit */
static const char *const ymm_state[] = {"avx", "avx2", "fma", "f16c", "avx_vnni", "vaes", "vpclmulqdq", NULL};

static int needs(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}
#endif

int berth_isa_detect(berth_isa_node_t *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->os, sizeof(out->os), "linux");
    out->level_source = "cpuid";
#if defined(__x86_64__)
    berth_isa_features_t f;
    berth_isa_features_clear(&f);
    unsigned max = __get_cpuid_max(0, NULL), maxext = __get_cpuid_max(0x80000000, NULL);
    unsigned r1[4] = {0};
    __cpuid_count(1, 0, r1[0], r1[1], r1[2], r1[3]);
    int osxsave = (r1[2] >> 27) & 1;
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    int ymm = (xcr0 & 6) == 6, zmm = ymm && (xcr0 & 0xe0) == 0xe0, amx = (xcr0 & 0x60000) == 0x60000;
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
        const bit_t *b = &bits[i];
        if ((b->leaf < 0x80000000 && b->leaf > max) || (b->leaf >= 0x80000000 && b->leaf > maxext))
            continue;
        unsigned r[4];
        __cpuid_count(b->leaf, b->sub, r[0], r[1], r[2], r[3]);
        if (!((r[b->reg] >> b->bit) & 1))
            continue;
        /* the glibc rule: a feature counts when the CPU has it AND the OS saves its registers */
        if ((needs(b->name, ymm_state) && !ymm) || (strncmp(b->name, "avx512", 6) == 0 && !zmm) ||
            (strncmp(b->name, "amx_", 4) == 0 && !amx) || (strcmp(b->name, "xsave") == 0 && !osxsave))
            continue;
        berth_isa_features_add(&f, b->name);
    }
    out->level = berth_isa_level_from_flags(BERTH_ISA_AMD64, &f);
    out->features = f;
    return 0;
#elif defined(__aarch64__)
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    static const struct {
        int word, bit;
        const char *name;
    } caps[] = {
        /* AT_HWCAP bits 0..31 and AT_HWCAP2 bits (Documentation/arch/arm64/elf_hwcaps.rst) */
        {1, 0, "fp"},         {1, 1, "asimd"},     {1, 2, "evtstrm"},  {1, 3, "aes"},     {1, 4, "pmull"},    {1, 5, "sha1"},
        {1, 6, "sha2"},       {1, 7, "crc32"},     {1, 8, "atomics"},  {1, 9, "fphp"},    {1, 10, "asimdhp"}, {1, 11, "cpuid"},
        {1, 12, "asimdrdm"},  {1, 13, "jscvt"},    {1, 14, "fcma"},    {1, 15, "lrcpc"},  {1, 16, "dcpop"},   {1, 17, "sha3"},
        {1, 18, "sm3"},       {1, 19, "sm4"},      {1, 20, "asimddp"}, {1, 21, "sha512"}, {1, 22, "sve"},     {1, 23, "asimdfhm"},
        {1, 24, "dit"},       {1, 25, "uscat"},    {1, 26, "ilrcpc"},  {1, 27, "flagm"},  {1, 28, "ssbs"},    {1, 29, "sb"},
        {1, 30, "paca"},      {1, 31, "pacg"},     {2, 0, "dcpodp"},   {2, 1, "sve2"},    {2, 2, "sveaes"},   {2, 3, "svepmull"},
        {2, 4, "svebitperm"}, {2, 5, "svesha3"},   {2, 6, "svesm4"},   {2, 7, "flagm2"},  {2, 8, "frint"},    {2, 9, "svei8mm"},
        {2, 10, "svef32mm"},  {2, 11, "svef64mm"}, {2, 12, "svebf16"}, {2, 13, "i8mm"},   {2, 14, "bf16"},    {2, 15, "dgh"},
        {2, 16, "rng"},       {2, 17, "bti"},      {2, 18, "mte"},     {2, 19, "ecv"},    {2, 20, "afp"},     {2, 21, "rpres"},
        {2, 22, "mte3"},      {2, 23, "sme"},      {2, 31, "wfxt"}};
    berth_isa_variant_parse(BERTH_ISA_ARM64, NULL, &out->level);
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
        if (((caps[i].word == 1 ? hw : hw2) >> caps[i].bit) & 1)
            berth_isa_features_add(&out->features, caps[i].name);
    out->level = berth_isa_level_from_flags(BERTH_ISA_ARM64, &out->features);
    return 0;
#else
    return -1;
#endif
}
