#include "registry/isa/scan.h"

#include <Zydis/Zydis.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYMS 200000

typedef struct {
    unsigned long addr, size;
    const char *name; /* points into the file's string table */
    int ifunc;
} sym_t;

/* Bounds-checked copies out of the file */
static int get(const unsigned char *d, size_t len, unsigned long off, void *out, size_t n)
{
    if (off > len || n > len - off)
        return -1;
    memcpy(out, d + off, n);
    return 0;
}

static const char *str_at(const unsigned char *d, size_t len, unsigned long tab_off, unsigned long tab_size, unsigned long idx)
{
    if (tab_off > len || tab_size > len - tab_off || idx >= tab_size)
        return NULL;
    const char *s = (const char *)d + tab_off + idx;
    return memchr(s, '\0', tab_size - idx) != NULL ? s : NULL;
}

static int cmp_sym(const void *a, const void *b)
{
    const sym_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const sym_t *sym_for(const sym_t *s, size_t n, unsigned long addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the last symbol starting at or before addr */
        size_t mid = (lo + hi) / 2;
        if (s[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const sym_t *c = &s[lo - 1];
    return addr < c->addr + (c->size ? c->size : 1) ? c : NULL;
}

/* x86 ISA sets (Zydis, XED names) to the psABI level they need and the feature they name beyond it */
static int x86_set(const char *set, int *level, const char **feature)
{
    static const struct {
        const char *prefix;
        int level;
        const char *feature;
    } map[] = {
        {"SSE3", 2, NULL}, {"SSSE3", 2, NULL}, {"SSE4", 2, NULL}, {"SSE42", 2, NULL}, {"POPCNT", 2, NULL}, {"CMPXCHG16B", 2, NULL},
        {"LAHF", 2, NULL},
        {"AVX512_VNNI", 4, "avx512_vnni"}, {"AVX512_BF16", 4, "avx512_bf16"}, {"AVX512_FP16", 4, "avx512_fp16"},
        {"AVX512_IFMA", 4, "avx512ifma"}, {"AVX512_VBMI2", 4, "avx512_vbmi2"}, {"AVX512_VBMI", 4, "avx512vbmi"},
        {"AVX512_BITALG", 4, "avx512_bitalg"}, {"AVX512_VPOPCNTDQ", 4, "avx512_vpopcntdq"}, {"AVX512_GFNI", 4, "gfni"},
        {"AVX512_VAES", 4, "vaes"}, {"AVX512_VPCLMULQDQ", 4, "vpclmulqdq"}, {"AVX512_VP2INTERSECT", 4, "avx512_vp2intersect"},
        {"AVX512ER", 4, "avx512er"}, {"AVX512PF", 4, "avx512pf"}, {"AVX512_4", 4, "avx512_4fmaps"},
        {"AVX512F", 4, NULL}, {"AVX512BW", 4, NULL}, {"AVX512CD", 4, NULL}, {"AVX512DQ", 4, NULL},
        {"AMX_TILE", 1, "amx_tile"}, {"AMX_BF16", 1, "amx_bf16"}, {"AMX_INT8", 1, "amx_int8"},
        {"AVX_VNNI", 3, "avx_vnni"}, {"AVX_GFNI", 3, "gfni"}, {"AVXAES", 3, "aes"}, {"AVX2GATHER", 3, NULL}, {"AVX2", 3, NULL},
        {"AVX", 3, NULL}, {"BMI1", 3, NULL}, {"BMI2", 3, NULL}, {"F16C", 3, NULL}, {"FMA4", 1, "fma4"}, {"FMA", 3, NULL},
        {"LZCNT", 3, NULL}, {"MOVBE", 3, NULL},
        {"GFNI", 2, "gfni"}, {"VAES", 3, "vaes"}, {"VPCLMULQDQ", 3, "vpclmulqdq"}, {"SHA", 1, "sha_ni"}, {"AES", 1, "aes"},
        {"PCLMULQDQ", 1, "pclmulqdq"}, {"ADOX_ADCX", 1, "adx"}, {"XOP", 1, "xop"}, {"TBM", 1, "tbm"}, {"SSE4A", 1, "sse4a"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        size_t n = strlen(map[i].prefix);
        if (strncmp(set, map[i].prefix, n) == 0 && (set[n] == '\0' || set[n] == '_' || map[i].prefix[n - 1] == '_')) {
            *level = map[i].level;
            *feature = map[i].feature;
            return 1;
        }
    }
    return 0;
}

/*
 * Findings in code the binary only runs after checking the CPU: glibc's and libgcc's variants, and libgcc's
 * unwinder, which reads the SVE vector length (cntd) only for frames that have SVE state.
 */
static int dispatch_like(const char *fn)
{
    return fn == NULL || fn[0] == '\0' || strncmp(fn, "__", 2) == 0 || strstr(fn, "_avx") != NULL || strstr(fn, "_evex") != NULL ||
           strstr(fn, "_sse") != NULL || strstr(fn, "_ssse3") != NULL || strncmp(fn, "uw_", 3) == 0 || strncmp(fn, "_Unwind_", 8) == 0 ||
           strcmp(fn, "execute_stack_op") == 0;
}

static void add_evidence(berth_elf_report_t *out, const char *fn, const char *mn, const char *set, unsigned long off)
{
    if (out->nevidence == 4)
        return;
    berth_elf_finding_t *f = &out->evidence[out->nevidence++];
    snprintf(f->function, sizeof(f->function), "%s", fn != NULL ? fn : "");
    snprintf(f->mnemonic, sizeof(f->mnemonic), "%s", mn);
    snprintf(f->isa_set, sizeof(f->isa_set), "%s", set);
    f->offset = off;
}

int berth_elf_scan(const unsigned char *d, size_t len, unsigned long max_insn, berth_elf_report_t *out)
{
    memset(out, 0, sizeof(*out));
    Elf64_Ehdr eh;
    if (get(d, len, 0, &eh, sizeof(eh)) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64))
        return -1;
    out->arch = eh.e_machine == EM_X86_64 ? BERTH_ISA_AMD64 : BERTH_ISA_ARM64;
    berth_isa_variant_parse(out->arch, NULL, &out->max_level);
    int interp = 0;
    for (unsigned i = 0; i < eh.e_phnum && eh.e_phentsize == sizeof(Elf64_Phdr); i++) {
        Elf64_Phdr ph;
        if (get(d, len, eh.e_phoff + (unsigned long)i * sizeof(ph), &ph, sizeof(ph)) != 0)
            break;
        interp |= ph.p_type == PT_INTERP;
    }
    out->is_static = eh.e_type == ET_EXEC && !interp;
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096)
        return 0; /* no sections: nothing to attribute or decode (stripped to the bone) */
    Elf64_Shdr *sh = calloc(eh.e_shnum, sizeof(*sh));
    for (unsigned i = 0; i < eh.e_shnum; i++)
        if (get(d, len, eh.e_shoff + (unsigned long)i * sizeof(Elf64_Shdr), &sh[i], sizeof(Elf64_Shdr)) != 0) {
            free(sh);
            return 0;
        }
    const Elf64_Shdr *shstr = eh.e_shstrndx < eh.e_shnum ? &sh[eh.e_shstrndx] : NULL;
    /* symbols: functions for attribution, IFUNCs and CPU-probing imports for dispatch */
    sym_t *syms = NULL;
    size_t nsyms = 0;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= eh.e_shnum)
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        unsigned long n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (unsigned long k = 0; k < n && nsyms < MAX_SYMS; k++) {
            Elf64_Sym s;
            if (get(d, len, sh[i].sh_offset + k * sizeof(s), &s, sizeof(s)) != 0)
                break;
            const char *name = str_at(d, len, strs->sh_offset, strs->sh_size, s.st_name);
            int type = ELF64_ST_TYPE(s.st_info);
            if (name == NULL)
                continue;
            if (s.st_shndx == SHN_UNDEF) {
                if (strcmp(name, "getauxval") == 0 || strcmp(name, "__cpu_indicator_init") == 0 || strcmp(name, "__cpu_model") == 0)
                    out->dispatched = 1;
                continue;
            }
            if (type == STT_GNU_IFUNC)
                out->dispatched = 1;
            if (type != STT_FUNC && type != STT_GNU_IFUNC)
                continue;
            if (syms == NULL)
                syms = calloc(MAX_SYMS, sizeof(*syms));
            syms[nsyms++] = (sym_t){.addr = s.st_value, .size = s.st_size, .name = name, .ifunc = type == STT_GNU_IFUNC};
        }
    }
    if (nsyms > 0)
        qsort(syms, nsyms, sizeof(*syms), cmp_sym);
    /* probing the CPU anywhere (cpuid, xgetbv) makes the file a dispatcher; looked for before attributing findings */
    for (unsigned i = 0; out->arch == BERTH_ISA_AMD64 && !out->dispatched && i < eh.e_shnum; i++)
        if (sh[i].sh_type == SHT_PROGBITS && (sh[i].sh_flags & SHF_EXECINSTR) && sh[i].sh_offset <= len && sh[i].sh_size <= len - sh[i].sh_offset)
            out->dispatched = memmem(d + sh[i].sh_offset, sh[i].sh_size, "\x0f\xa2", 2) != NULL ||
                              memmem(d + sh[i].sh_offset, sh[i].sh_size, "\x0f\x01\xd0", 3) != NULL;
    int hard = 1; /* the highest level outside dispatch-like code */
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        const char *sname = shstr != NULL ? str_at(d, len, shstr->sh_offset, shstr->sh_size, sh[i].sh_name) : NULL;
        /* the GNU property note: what the loader will demand */
        if (sh[i].sh_type == SHT_NOTE && sname != NULL && strcmp(sname, ".note.gnu.property") == 0 && out->arch == BERTH_ISA_AMD64) {
            unsigned long p = sh[i].sh_offset, end = sh[i].sh_offset + sh[i].sh_size;
            while (end <= len && p + sizeof(Elf64_Nhdr) <= end) {
                Elf64_Nhdr nh;
                if (get(d, len, p, &nh, sizeof(nh)) != 0)
                    break;
                unsigned long name_off = p + sizeof(nh), desc_off = name_off + ((nh.n_namesz + 3UL) & ~3UL);
                unsigned long next = desc_off + ((nh.n_descsz + 7UL) & ~7UL);
                if (next > end || next <= p)
                    break;
                if (nh.n_type == NT_GNU_PROPERTY_TYPE_0 && nh.n_namesz == 4 && memcmp(d + name_off, "GNU", 4) == 0) {
                    for (unsigned long q = desc_off; q + 8 <= desc_off + nh.n_descsz;) {
                        uint32_t type = 0, size = 0, bits = 0;
                        if (get(d, len, q, &type, 4) != 0 || get(d, len, q + 4, &size, 4) != 0 || size > nh.n_descsz)
                            break;
                        if (type == GNU_PROPERTY_X86_ISA_1_NEEDED && size >= 4 && get(d, len, q + 8, &bits, 4) == 0)
                            for (int b = 3; b >= 0; b--)
                                if (bits & (1u << b)) {
                                    if (b + 1 > out->needed_level)
                                        out->needed_level = b + 1;
                                    break;
                                }
                        q += 8 + ((size + 7UL) & ~7UL);
                    }
                }
                p = next;
            }
        }
        if (sh[i].sh_type != SHT_PROGBITS || !(sh[i].sh_flags & SHF_EXECINSTR) || sh[i].sh_offset > len ||
            sh[i].sh_size > len - sh[i].sh_offset)
            continue;
        const unsigned char *code = d + sh[i].sh_offset;
        unsigned long size = sh[i].sh_size, addr = sh[i].sh_addr;
        if (out->arch == BERTH_ISA_ARM64) {
            for (unsigned long o = 0; o + 4 <= size && out->instructions < max_insn; o += 4, out->instructions++) {
                uint32_t w;
                memcpy(&w, code + o, 4);
                unsigned op0 = (w >> 25) & 0xf;
                const char *feat = op0 == 2 ? "sve" : (op0 == 0 && (w >> 31)) ? "sme" : NULL;
                if (feat == NULL)
                    continue;
                const sym_t *s = nsyms ? sym_for(syms, nsyms, addr + o) : NULL;
                int soft = out->dispatched && dispatch_like(s != NULL ? s->name : NULL);
                if (!berth_isa_features_has(&out->features, feat)) {
                    berth_isa_features_add(&out->features, feat);
                    add_evidence(out, s != NULL ? s->name : "", feat, soft ? "dispatched" : "", sh[i].sh_offset + o);
                }
                if (!soft)
                    hard = 2; /* arm64: 2 marks "required features outside dispatched code" */
                else
                    berth_isa_features_add(&out->soft_features, feat);
            }
            continue;
        }
        for (unsigned long o = 0; o < size && out->instructions < max_insn; out->instructions++) {
            ZydisDecodedInstruction in;
            if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, code + o, size - o, &in))) {
                o++; /* data in text or padding: step a byte */
                continue;
            }
            if (in.mnemonic == ZYDIS_MNEMONIC_CPUID || in.mnemonic == ZYDIS_MNEMONIC_XGETBV)
                out->dispatched = 1;
            const char *set = ZydisISASetGetString(in.meta.isa_set), *feature = NULL;
            int lv = 1;
            /* tzcnt is "rep bsf": it runs (as bsf) on CPUs without BMI1, so it proves nothing */
            if (set != NULL && in.mnemonic != ZYDIS_MNEMONIC_TZCNT && x86_set(set, &lv, &feature)) {
                const sym_t *s = nsyms ? sym_for(syms, nsyms, addr + o) : NULL;
                const char *fn = s != NULL ? s->name : NULL;
                int soft = out->dispatched && dispatch_like(fn);
                int new_level = lv > out->max_level.major, new_feat = feature != NULL && !soft && !berth_isa_features_has(&out->features, feature);
                if (new_level)
                    out->max_level.major = lv;
                if (feature != NULL && !soft) /* what dispatched code uses is not a requirement */
                    berth_isa_features_add(&out->features, feature);
                if (soft && lv > out->soft_level)
                    out->soft_level = lv;
                if (soft && feature != NULL)
                    berth_isa_features_add(&out->soft_features, feature);
                if (!soft && lv > hard)
                    hard = lv;
                if ((new_level && lv > 1) || new_feat)
                    add_evidence(out, fn, ZydisMnemonicGetString(in.mnemonic), set, sh[i].sh_offset + o);
            }
            o += in.length;
        }
    }
    /* report the level that counts: outside dispatched code; the rest is evidence of dispatch */
    out->max_level.major = out->arch == BERTH_ISA_AMD64 ? hard : out->max_level.major;
    if (out->arch == BERTH_ISA_ARM64 && hard < 2 && out->dispatched)
        berth_isa_features_clear(&out->features); /* SVE only in dispatched code (static glibc's __memcpy_sve) */
    free(syms);
    free(sh);
    return 0;
}
