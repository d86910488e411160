/* Query-string decoding: output is NUL-terminated, within bounds, without embedded NULs. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "registry/core/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[64];
    const char *keys[] = {"digest", "mount", "from", "n", "last"};
    for (size_t i = 0; i < 5; i++) {
        long n = berth_query_get((const char *)data, size, keys[i], out, sizeof(out));
        if (n >= 0)
            assert((size_t)n < sizeof(out) && strlen(out) == (size_t)n);
    }
    return 0;
}
