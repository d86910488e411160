/* Digest parser: an accepted digest round-trips to the same canonical text. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    berth_digest_t d, again;
    if (size < BERTH_DIGEST_MAX && berth_digest_parse(&d, (const char *)data, size, NULL) == 0) {
        assert(strlen(d.str) == size && memcmp(d.str, data, size) == 0);
        assert(berth_digest_parse(&again, d.str, strlen(d.str), NULL) == 0 && berth_digest_equal(&d, &again));
    }
    return 0;
}
