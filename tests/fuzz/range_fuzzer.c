/* Content-Range parser: accepted ranges are ordered. */
#include <assert.h>
#include <stdint.h>

#include "core/range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t a, b;
    if (berth_range_parse((const char *)data, size, &a, &b) == 0)
        assert(a <= b);
    return 0;
}
