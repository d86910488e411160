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
    int ifunc, exported;
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
static int x86_set(const char *set, int *level, const char **feature, int *feat_bit)
{
    static const struct {
        const char *prefix;
        int level;
        const char *feature;
    } map[] = {
        {"SSE3", 2, NULL},
        {"SSSE3", 2, NULL},
        {"SSE4", 2, NULL},
        {"SSE42", 2, NULL},
        {"POPCNT", 2, NULL},
        {"CMPXCHG16B", 2, NULL},
        {"LAHF", 2, NULL},
        {"AVX512_VNNI", 4, "avx512_vnni"},
        {"AVX512_BF16", 4, "avx512_bf16"},
        {"AVX512_FP16", 4, "avx512_fp16"},
        {"AVX512_IFMA", 4, "avx512ifma"},
        {"AVX512_VBMI2", 4, "avx512_vbmi2"},
        {"AVX512_VBMI", 4, "avx512vbmi"},
        {"AVX512_BITALG", 4, "avx512_bitalg"},
        {"AVX512_VPOPCNTDQ", 4, "avx512_vpopcntdq"},
        {"AVX512_GFNI", 4, "gfni"},
        {"AVX512_VAES", 4, "vaes"},
        {"AVX512_VPCLMULQDQ", 4, "vpclmulqdq"},
        {"AVX512_VP2INTERSECT", 4, "avx512_vp2intersect"},
        {"AVX512ER", 4, "avx512er"},
        {"AVX512PF", 4, "avx512pf"},
        {"AVX512_4", 4, "avx512_4fmaps"},
        {"AVX512F", 4, NULL},
        {"AVX512BW", 4, NULL},
        {"AVX512CD", 4, NULL},
        {"AVX512DQ", 4, NULL},
        {"AMX_TILE", 1, "amx_tile"},
        {"AMX_BF16", 1, "amx_bf16"},
        {"AMX_INT8", 1, "amx_int8"},
        {"AVX_VNNI", 3, "avx_vnni"},
        {"AVX_GFNI", 3, "gfni"},
        {"AVXAES", 3, "aes"},
        {"AVX2GATHER", 3, NULL},
        {"AVX2", 3, NULL},
        {"AVX", 3, NULL},
        {"BMI1", 3, NULL},
        {"BMI2", 3, NULL},
        {"F16C", 3, NULL},
        {"FMA4", 1, "fma4"},
        {"FMA", 3, NULL},
        {"LZCNT", 3, NULL},
        {"MOVBE", 3, NULL},
        {"GFNI", 2, "gfni"},
        {"VAES", 3, "vaes"},
        {"VPCLMULQDQ", 3, "vpclmulqdq"},
        {"SHA", 1, "sha_ni"},
        {"AES", 1, "aes"},
        {"PCLMULQDQ", 1, "pclmulqdq"},
        {"ADOX_ADCX", 1, "adx"},
        {"XOP", 1, "xop"},
        {"TBM", 1, "tbm"},
        {"SSE4A", 1, "sse4a"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        size_t n = strlen(map[i].prefix);
        if (strncmp(set, map[i].prefix, n) == 0 && (set[n] == '\0' || set[n] == '_' || map[i].prefix[n - 1] == '_')) {
            *level = map[i].level;
            *feature = map[i].feature;
            *feat_bit = (int)(i % 64);
            return 1;
        }
    }
    return 0;
}

/* ---- dispatch by evidence ---------------------------------------------------------------------------------
 *
 * Code above the declared level is dispatched (a warning) only when the binary shows that it checks the CPU before
 * running it; a function's name proves nothing. The evidence, per function:
 *   - guards: GNU IFUNC resolvers (STT_GNU_IFUNC, GCC's "<f>.resolver" for target_clones), and functions that
 *     execute cpuid/xgetbv (x86) or read an ID register (arm64 mrs), read libgcc's __cpu_model/__cpu_features2/
 *     __aarch64_cpu_features, or call __cpu_indicator_init/getauxval;
 *   - edges: direct calls and jumps, and references to a function's address (lea/adrp+add: a pointer handed out);
 *   - roots: the entry point, exported functions, and functions nothing in the file calls or references.
 * A function reached from a root without passing a guard runs unconditionally: what it needs is a requirement. What
 * only guards reach (IFUNC targets, target_clones variants such as .avx2 and .arch_x86_64_v4, the branch of a
 * __builtin_cpu_supports test) and code inside guards is dispatched. Code no symbol covers (stripped files) is
 * dispatched only when the file carries other evidence. One exception by name, documented in README.md: libgcc's
 * aarch64 unwinder reads the SVE vector length only for frames whose CFI says they have SVE state.
 */

#define MAX_EDGES 2000000UL
#define MAX_FINDINGS 200000UL

typedef struct {
    unsigned fi;      /* function (canonical symbol index; nsyms for code no symbol covers) */
    unsigned long to; /* target address */
} edge_t;

typedef struct {
    unsigned fi;
    int level;           /* amd64 level, or 0 */
    const char *feature; /* named feature, or NULL */
    char mnemonic[24], set[32];
    unsigned long off;
} finding_t;

typedef struct {
    sym_t *syms;
    size_t nsyms;
    unsigned *canon; /* first symbol at the same address */
    unsigned char *guard, *reached, *referenced;
    unsigned char *fn_level; /* highest amd64 level recorded per function */
    unsigned long long *fn_feats;
    edge_t *edges;
    size_t nedges, cap_edges;
    finding_t *f;
    size_t nf, cap_f;
    unsigned long probe_lo[4], probe_hi[4]; /* __cpu_model & co.: reading them is a CPU check */
    int nprobe;
    unsigned long call_probe[8]; /* __cpu_indicator_init, getauxval (or their PLT stubs): calling them is a CPU check */
    int ncall;
} graph_t;

/* The canonical index of the function containing addr, or nsyms */
static unsigned fn_of(const graph_t *g, unsigned long addr)
{
    const sym_t *s = g->nsyms ? sym_for(g->syms, g->nsyms, addr) : NULL;
    return s != NULL ? g->canon[s - g->syms] : (unsigned)g->nsyms;
}

/* The canonical index of the function starting exactly at addr, or nsyms */
static unsigned fn_at(const graph_t *g, unsigned long addr)
{
    const sym_t *s = g->nsyms ? sym_for(g->syms, g->nsyms, addr) : NULL;
    return s != NULL && s->addr == addr ? g->canon[s - g->syms] : (unsigned)g->nsyms;
}

static void add_edge(graph_t *g, unsigned fi, unsigned long to)
{
    if (g->nedges == g->cap_edges) {
        if (g->cap_edges >= MAX_EDGES)
            return;
        g->cap_edges = g->cap_edges ? g->cap_edges * 2 : 4096;
        g->edges = realloc(g->edges, g->cap_edges * sizeof(edge_t));
    }
    g->edges[g->nedges++] = (edge_t){fi, to};
}

/* An address the code uses: a CPU-probe variable, a probing call, or a function (an edge) */
static void use_address(graph_t *g, unsigned fi, unsigned long addr, int is_call)
{
    for (int k = 0; k < g->nprobe; k++)
        if (addr >= g->probe_lo[k] && addr < g->probe_hi[k] && fi < g->nsyms)
            g->guard[fi] = 1;
    for (int k = 0; is_call && k < g->ncall; k++)
        if (addr == g->call_probe[k] && fi < g->nsyms)
            g->guard[fi] = 1;
    if (fn_at(g, addr) < g->nsyms) /* data references are not edges */
        add_edge(g, fi, addr);
}

/* Record an instruction above the baseline; only the first per (function, level) and (function, feature) */
static void add_finding(graph_t *g, unsigned fi, int level, int feat_bit, const char *feature, const char *mn, const char *set,
                        unsigned long off)
{
    int new_level = level > g->fn_level[fi], new_feat = feature != NULL && !(g->fn_feats[fi] & (1ULL << feat_bit));
    if (!new_level && !new_feat)
        return;
    if (new_level)
        g->fn_level[fi] = (unsigned char)level;
    if (feature != NULL)
        g->fn_feats[fi] |= 1ULL << feat_bit;
    if (g->nf == g->cap_f) {
        if (g->cap_f >= MAX_FINDINGS)
            return;
        g->cap_f = g->cap_f ? g->cap_f * 2 : 256;
        g->f = realloc(g->f, g->cap_f * sizeof(finding_t));
    }
    finding_t *f = &g->f[g->nf++];
    *f = (finding_t){.fi = fi, .level = level, .feature = feature, .off = off};
    snprintf(f->mnemonic, sizeof(f->mnemonic), "%s", mn);
    snprintf(f->set, sizeof(f->set), "%s", set);
}

/* libgcc's aarch64 unwinder: cntd only for frames with SVE state (see the comment above) */
static int unwinder(const char *fn)
{
    return fn != NULL && (strncmp(fn, "uw_", 3) == 0 || strncmp(fn, "_Unwind_", 8) == 0 || strcmp(fn, "execute_stack_op") == 0 ||
                          strcmp(fn, "execute_cfa_program") == 0);
}

/* Which functions run without a CPU check: reached[] from the roots, never through a guard */
static void reach(graph_t *g, unsigned long entry)
{
    size_t n = g->nsyms;
    /* edges sorted by source function so a function's out-edges are one run */
    unsigned long *start = calloc(n + 2, sizeof(unsigned long));
    for (size_t e = 0; e < g->nedges; e++) {
        unsigned to = fn_at(g, g->edges[e].to);
        if (to < n && to != g->edges[e].fi)
            g->referenced[to] = 1;
        start[g->edges[e].fi + 1]++;
    }
    for (size_t i = 1; i <= n + 1; i++)
        start[i] += start[i - 1];
    unsigned long *fill = calloc(n + 1, sizeof(unsigned long)), *out = malloc((g->nedges + 1) * sizeof(unsigned long));
    for (size_t e = 0; e < g->nedges; e++)
        out[start[g->edges[e].fi] + fill[g->edges[e].fi]++] = g->edges[e].to;
    unsigned *stack = malloc((n + 1) * sizeof(unsigned));
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (g->canon[i] != i)
            continue;
        int exported = g->syms[i].exported,
            is_entry = entry != 0 && g->syms[i].addr <= entry && entry < g->syms[i].addr + (g->syms[i].size ? g->syms[i].size : 1);
        if ((!g->referenced[i] || exported || is_entry) && !g->reached[i]) {
            g->reached[i] = 1;
            stack[top++] = (unsigned)i;
        }
    }
    while (top > 0) {
        unsigned fi = stack[--top];
        if (g->guard[fi])
            continue; /* what a guard calls runs after a CPU check */
        for (unsigned long e = start[fi]; e < start[fi + 1]; e++) {
            unsigned to = fn_at(g, out[e]);
            if (to < n && !g->reached[to]) {
                g->reached[to] = 1;
                stack[top++] = to;
            }
        }
    }
    free(stack);
    free(out);
    free(fill);
    free(start);
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
/* GNU_PROPERTY_X86_ISA_1_NEEDED of a .note.gnu.property section: what the loader will demand */
static void read_property_note(const unsigned char *d, size_t len, const Elf64_Shdr *sh, berth_elf_report_t *out)
{
    unsigned long p = sh->sh_offset, end = sh->sh_offset + sh->sh_size;
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

/* Functions (for attribution and the call graph) and the CPU-probe symbols; file-level dispatch evidence */
static void read_symbols(const unsigned char *d, size_t len, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, graph_t *g,
                         berth_elf_report_t *out)
{
    static const char *const probe_vars[] = {"__cpu_model", "__cpu_features2", "__aarch64_cpu_features", "_dl_x86_cpu_features"};
    static const char *const probe_calls[] = {"__cpu_indicator_init", "getauxval", "__getauxval", "__init_cpu_features_resolver"};
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
            sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        unsigned long n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (unsigned long k = 0; k < n && g->nsyms < MAX_SYMS; k++) {
            Elf64_Sym s;
            if (get(d, len, sh[i].sh_offset + k * sizeof(s), &s, sizeof(s)) != 0)
                break;
            const char *name = str_at(d, len, strs->sh_offset, strs->sh_size, s.st_name);
            int type = ELF64_ST_TYPE(s.st_info);
            if (name == NULL)
                continue;
            int probe_var = 0, probe_call = 0;
            for (size_t p = 0; p < sizeof(probe_vars) / sizeof(probe_vars[0]); p++)
                probe_var |= strcmp(name, probe_vars[p]) == 0;
            for (size_t p = 0; p < sizeof(probe_calls) / sizeof(probe_calls[0]); p++)
                probe_call |= strcmp(name, probe_calls[p]) == 0;
            if (s.st_shndx == SHN_UNDEF) {
                out->dispatched |= probe_var || probe_call; /* imported: the file probes the CPU somewhere */
                continue;
            }
            if (probe_var && g->nprobe < 4) {
                g->probe_lo[g->nprobe] = s.st_value;
                g->probe_hi[g->nprobe++] = s.st_value + (s.st_size ? s.st_size : 1);
                out->dispatched = 1;
            }
            if (probe_call && type == STT_FUNC && g->ncall < 8)
                g->call_probe[g->ncall++] = s.st_value;
            if (type == STT_GNU_IFUNC)
                out->dispatched = 1;
            if (type != STT_FUNC && type != STT_GNU_IFUNC)
                continue;
            if (g->syms == NULL)
                g->syms = calloc(MAX_SYMS, sizeof(*g->syms));
            g->syms[g->nsyms++] = (sym_t){.addr = s.st_value,
                                          .size = s.st_size,
                                          .name = name,
                                          .ifunc = type == STT_GNU_IFUNC,
                                          .exported = sh[i].sh_type == SHT_DYNSYM && ELF64_ST_BIND(s.st_info) != STB_LOCAL};
        }
    }
    if (g->nsyms > 0)
        qsort(g->syms, g->nsyms, sizeof(*g->syms), cmp_sym);
    size_t n = g->nsyms;
    g->canon = calloc(n + 1, sizeof(unsigned));
    g->guard = calloc(n + 1, 1);
    g->reached = calloc(n + 1, 1);
    g->referenced = calloc(n + 1, 1);
    g->fn_level = calloc(n + 1, 1);
    g->fn_feats = calloc(n + 1, sizeof(unsigned long long));
    for (size_t i = 0; i < n; i++) {
        g->canon[i] = i > 0 && g->syms[i].addr == g->syms[i - 1].addr ? g->canon[i - 1] : (unsigned)i;
        const char *dot = strrchr(g->syms[i].name, '.');
        unsigned c = g->canon[i];
        if (g->syms[i].ifunc || (dot != NULL && strcmp(dot, ".resolver") == 0))
            g->guard[c] = 1; /* IFUNC resolvers, GCC target_clones resolvers */
        g->syms[c].exported |= g->syms[i].exported;
        if (g->syms[i].size > g->syms[c].size)
            g->syms[c].size = g->syms[i].size;
    }
    for (unsigned k = 0; k < (unsigned)g->ncall; k++) { /* the probing functions themselves are guards */
        unsigned fi = fn_at(g, g->call_probe[k]);
        if (fi < n)
            g->guard[fi] = 1;
    }
}

/*
 * An imported getauxval or __cpu_indicator_init is called through its PLT stub: the stub of .rela.plt entry i sits
 * at a fixed place (GNU ld layouts: x86-64 .plt.sec + 16 i, or .plt + 16 (i + 1); aarch64 .plt + 32 + 16 i).
 */
static void plt_probes(const unsigned char *d, size_t len, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, graph_t *g)
{
    static const char *const probe_calls[] = {"__cpu_indicator_init", "getauxval", "__getauxval"};
    const Elf64_Shdr *shstr = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : NULL;
    const Elf64_Shdr *rela = NULL, *plt = NULL, *plt_sec = NULL;
    for (unsigned i = 0; shstr != NULL && i < eh->e_shnum; i++) {
        const char *n = str_at(d, len, shstr->sh_offset, shstr->sh_size, sh[i].sh_name);
        if (n == NULL)
            continue;
        if (strcmp(n, ".rela.plt") == 0 && sh[i].sh_type == SHT_RELA && sh[i].sh_entsize == sizeof(Elf64_Rela) &&
            sh[i].sh_link < eh->e_shnum)
            rela = &sh[i];
        else if (strcmp(n, ".plt") == 0)
            plt = &sh[i];
        else if (strcmp(n, ".plt.sec") == 0)
            plt_sec = &sh[i];
    }
    if (rela == NULL || plt == NULL)
        return;
    const Elf64_Shdr *dsym = &sh[rela->sh_link];
    if (dsym->sh_entsize != sizeof(Elf64_Sym) || dsym->sh_link >= eh->e_shnum)
        return;
    const Elf64_Shdr *dstr = &sh[dsym->sh_link];
    for (unsigned long i = 0; i < rela->sh_size / sizeof(Elf64_Rela) && g->ncall < 8; i++) {
        Elf64_Rela r;
        Elf64_Sym s;
        if (get(d, len, rela->sh_offset + i * sizeof(r), &r, sizeof(r)) != 0 ||
            get(d, len, dsym->sh_offset + ELF64_R_SYM(r.r_info) * sizeof(s), &s, sizeof(s)) != 0)
            break;
        const char *name = str_at(d, len, dstr->sh_offset, dstr->sh_size, s.st_name);
        for (size_t p = 0; name != NULL && p < sizeof(probe_calls) / sizeof(probe_calls[0]); p++)
            if (strcmp(name, probe_calls[p]) == 0 && g->ncall < 8)
                g->call_probe[g->ncall++] = eh->e_machine == EM_AARCH64 ? plt->sh_addr + 32 + 16 * i
                                            : plt_sec != NULL           ? plt_sec->sh_addr + 16 * i
                                                                        : plt->sh_addr + 16 * (i + 1);
    }
}

/* x86-64: findings per function, edges, guards */
static void decode_x86(const unsigned char *code, unsigned long size, unsigned long addr, unsigned long file_off,
                       unsigned long max_insn, graph_t *g, berth_elf_report_t *out)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    for (unsigned long o = 0; o < size && out->instructions < max_insn; out->instructions++) {
        ZydisDecoderContext ctx;
        ZydisDecodedInstruction in;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, &ctx, code + o, size - o, &in))) {
            o++; /* data in text or padding: step a byte */
            continue;
        }
        unsigned fi = fn_of(g, addr + o);
        if (in.mnemonic == ZYDIS_MNEMONIC_CPUID || in.mnemonic == ZYDIS_MNEMONIC_XGETBV) {
            out->dispatched = 1;
            if (fi < g->nsyms)
                g->guard[fi] = 1;
        }
        if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            if (ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&dec, &ctx, &in, ops, in.operand_count))) {
                for (unsigned k = 0; k < in.operand_count; k++) {
                    ZyanU64 abs;
                    int rel = (ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[k].imm.is_relative) ||
                              (ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[k].mem.base == ZYDIS_REGISTER_RIP);
                    if (rel && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[k], addr + o, &abs)))
                        use_address(g, fi, (unsigned long)abs, in.mnemonic == ZYDIS_MNEMONIC_CALL);
                }
            }
        }
        const char *set = ZydisISASetGetString(in.meta.isa_set), *feature = NULL;
        int lv = 1, bit = 0;
        /* tzcnt is "rep bsf": it runs (as bsf) on CPUs without BMI1, so it proves nothing */
        if (set != NULL && in.mnemonic != ZYDIS_MNEMONIC_TZCNT && x86_set(set, &lv, &feature, &bit) && (lv > 1 || feature != NULL))
            add_finding(g, fi, lv, bit, feature, ZydisMnemonicGetString(in.mnemonic), set, file_off + o);
        o += in.length;
    }
}

/* arm64: SVE/SME words, bl/b edges, adrp+add/ldr addresses, ID-register reads */
static void decode_arm64(const unsigned char *code, unsigned long size, unsigned long addr, unsigned long file_off,
                         unsigned long max_insn, graph_t *g, berth_elf_report_t *out)
{
    unsigned long page[32] = {0};
    unsigned char has_page[32] = {0};
    unsigned cur = (unsigned)-1;
    for (unsigned long o = 0; o + 4 <= size && out->instructions < max_insn; o += 4, out->instructions++) {
        uint32_t w;
        memcpy(&w, code + o, 4);
        unsigned long pc = addr + o;
        unsigned fi = fn_of(g, pc);
        if (fi != cur) { /* adrp pairs do not cross functions */
            memset(has_page, 0, sizeof(has_page));
            cur = fi;
        }
        if ((w & 0x7C000000) == 0x14000000) { /* b / bl imm26 */
            long imm = (long)(w & 0x03FFFFFF);
            if (imm & 0x02000000)
                imm -= 0x04000000;
            use_address(g, fi, pc + (unsigned long)(imm * 4), (w >> 31) != 0);
        } else if ((w & 0x9F000000) == 0x90000000) { /* adrp */
            long imm = (long)((((w >> 5) & 0x7FFFF) << 2) | ((w >> 29) & 3));
            if (imm & 0x100000)
                imm -= 0x200000;
            page[w & 31] = (pc & ~0xFFFUL) + ((unsigned long)imm << 12); /* modular: a negative page offset wraps */
            has_page[w & 31] = 1;
        } else if ((w & 0xFF800000) == 0x91000000 && has_page[(w >> 5) & 31]) { /* add xd, xn, #imm (after adrp) */
            unsigned long imm = (w >> 10) & 0xFFF;
            use_address(g, fi, page[(w >> 5) & 31] + ((w >> 22) & 1 ? imm << 12 : imm), 0);
        } else if ((w & 0x3B400000) == 0x39400000 && has_page[(w >> 5) & 31]) { /* ldr (unsigned offset, after adrp) */
            use_address(g, fi, page[(w >> 5) & 31] + (((w >> 10) & 0xFFF) << (w >> 30)), 0);
        } else if ((w & 0xFFF80000) == 0xD5380000 && ((w >> 16) & 7) == 0 && ((w >> 12) & 0xF) == 0) { /* mrs ID_AA64*_EL1 */
            out->dispatched = 1;
            if (fi < g->nsyms)
                g->guard[fi] = 1;
        }
        unsigned op0 = (w >> 25) & 0xf;
        const char *feat = op0 == 2 ? "sve" : (op0 == 0 && (w >> 31)) ? "sme" : NULL;
        if (feat != NULL)
            add_finding(g, fi, 0, feat[1] == 'v' ? 0 : 1, feat, feat, "", file_off + o);
    }
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
    graph_t g = {0};
    read_symbols(d, len, &eh, sh, &g, out);
    plt_probes(d, len, &eh, sh, &g);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        const char *sname = shstr != NULL ? str_at(d, len, shstr->sh_offset, shstr->sh_size, sh[i].sh_name) : NULL;
        if (sh[i].sh_type == SHT_NOTE && sname != NULL && strcmp(sname, ".note.gnu.property") == 0 && out->arch == BERTH_ISA_AMD64)
            read_property_note(d, len, &sh[i], out);
        if (sh[i].sh_type != SHT_PROGBITS || !(sh[i].sh_flags & SHF_EXECINSTR) || sh[i].sh_offset > len ||
            sh[i].sh_size > len - sh[i].sh_offset)
            continue;
        if (out->arch == BERTH_ISA_ARM64)
            decode_arm64(d + sh[i].sh_offset, sh[i].sh_size, sh[i].sh_addr, sh[i].sh_offset, max_insn, &g, out);
        else
            decode_x86(d + sh[i].sh_offset, sh[i].sh_size, sh[i].sh_addr, sh[i].sh_offset, max_insn, &g, out);
    }
    for (size_t i = 0; i < g.nsyms; i++)
        out->dispatched |= g.guard[i];
    reach(&g, eh.e_entry);
    /* what counts: findings in functions that run unconditionally; the rest is dispatched code */
    int hard = 1;
    for (size_t k = 0; k < g.nf; k++) {
        const finding_t *f = &g.f[k];
        const char *fn = f->fi < g.nsyms ? g.syms[f->fi].name : NULL;
        int soft = f->fi < g.nsyms ? (g.guard[f->fi] || !g.reached[f->fi] || (out->arch == BERTH_ISA_ARM64 && unwinder(fn)))
                                   : out->dispatched; /* no symbol covers it: only other evidence can excuse it */
        int lv = f->level ? f->level : 1;
        int new_level = !soft && lv > hard,
            new_feat = f->feature != NULL && !soft && !berth_isa_features_has(&out->features, f->feature);
        if (lv > out->max_level.major && out->arch == BERTH_ISA_AMD64)
            out->max_level.major = lv;
        if (soft) {
            if (lv > out->soft_level)
                out->soft_level = lv;
            if (f->feature != NULL)
                berth_isa_features_add(&out->soft_features, f->feature);
            continue;
        }
        if (f->feature != NULL)
            berth_isa_features_add(&out->features, f->feature);
        if (new_level)
            hard = lv;
        if (new_level || new_feat)
            add_evidence(out, fn, f->mnemonic, f->set, f->off);
    }
    /* then, while room is left, where the dispatched code sits */
    for (size_t k = 0; k < g.nf && out->nevidence < 4 && out->nevidence == 0; k++)
        add_evidence(out, g.f[k].fi < g.nsyms ? g.syms[g.f[k].fi].name : "", g.f[k].mnemonic, "dispatched", g.f[k].off);
    if (out->arch == BERTH_ISA_AMD64)
        out->max_level.major = hard; /* the level that counts: outside dispatched code */
    free(g.syms);
    free(g.canon);
    free(g.guard);
    free(g.reached);
    free(g.referenced);
    free(g.fn_level);
    free(g.fn_feats);
    free(g.edges);
    free(g.f);
    free(sh);
    return 0;
}
