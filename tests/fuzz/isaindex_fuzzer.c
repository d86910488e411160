/* ISA index checks on untrusted manifests and cpuinfo parsing: no crash, bounded notes, consistent rows. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry/isa/index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int mode = 0; mode < 3; mode++) {
        berth_isa_report_t r;
        if (berth_isa_index_check((const char *)data, size, (berth_isa_policy_mode_t)mode, NULL, NULL, &r) == 0) {
            assert(r.nerrors <= BERTH_ISA_MAX_NOTES && r.nwarnings <= BERTH_ISA_MAX_NOTES);
            char *rows = berth_isa_variants_json(r.variants, r.nvariants);
            berth_isa_variant_t *back = NULL;
            size_t n = 0;
            assert(berth_isa_variants_parse(rows, &back, &n) == 0 && n == r.nvariants);
            free(back);
            free(rows);
            berth_isa_report_dispose(&r);
        }
    }
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    berth_isa_node_t node;
    if (berth_isa_node_from_cpuinfo(text, &node) == 0)
        assert(node.features.n <= BERTH_ISA_MAX_FEATURES);
    free(text);
    return 0;
}
