/* The ELF reader of the ISA scanner on untrusted files from image layers: bounds hold, the report is sane. */
#include <assert.h>
#include <stdint.h>

#include "registry/isa/scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_elf_report_t r;
    if (berth_elf_scan(data, size, 100000, &r) == 0) {
        assert(r.nevidence >= 0 && r.nevidence <= 4);
        assert(r.features.n >= 0 && r.features.n <= BERTH_ISA_MAX_FEATURES);
        assert(r.needed_level >= 0 && r.needed_level <= 4);
    }
    return 0;
}
