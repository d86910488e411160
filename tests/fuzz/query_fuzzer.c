/* Query strings, q= filter terms, Cookie headers and path segments: outputs NUL-terminated, within bounds. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[64];
    const char *keys[] = {"digest", "mount", "from", "n", "last"};
    for (size_t i = 0; i < 5; i++) {
        long n = berth_query_get((const char *)data, size, keys[i], out, sizeof(out));
        if (n >= 0)
            assert((size_t)n < sizeof(out) && strlen(out) == (size_t)n);
    }
    /* the same bytes as a q= filter, a Cookie header and a path segment (NUL-terminated copies) */
    char text[512];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    const char *terms[] = {"name", "public", "operation", "Level", "ProjectID"};
    for (size_t i = 0; i < 5; i++) {
        int t = berth_query_term(text, terms[i], out, sizeof(out));
        assert(t >= 0 && t <= 2);
        if (t > 0)
            assert(strlen(out) < sizeof(out));
    }
    if (berth_query_cookie(text, "sid", out, sizeof(out)) == 0)
        assert(strlen(out) < sizeof(out) && strchr(out, ';') == NULL);
    long d = berth_query_decode(text, n, 0, out, sizeof(out));
    assert(d == -2 || (d >= 0 && (size_t)d == strlen(out)));
    return 0;
}
