/* The UTF-8 validator against an independent decoder (code points computed, then range-checked), and the
 * scrubber and decoders that rely on it: whatever they let through is well-formed. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/query.h"
#include "core/utf8.h"

/* Decode each sequence arithmetically and reject overlongs, surrogates and values past U+10FFFF afterwards:
 * a different route to the same answer than utf8.c's byte-range table. */
static int reference_valid(const uint8_t *p, size_t n)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || i + len > n)
            return 0;
        uint32_t cp = len == 1 ? c : c & (0xffu >> (len + 1));
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int v = berth_utf8_valid(data, size);
    assert(v == reference_valid(data, size));

    char text[1024], out[3 * sizeof(text)], small[7];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    size_t len = strlen(text); /* up to the first NUL */
    size_t w = berth_utf8_scrub(text, out, sizeof(out));
    assert(w == strlen(out) && berth_utf8_valid(out, w));
    if (berth_utf8_valid(text, len))
        assert(w == len && memcmp(out, text, len) == 0); /* nothing to repair: unchanged */
    w = berth_utf8_scrub(text, small, sizeof(small));
    assert(w < sizeof(small) && w == strlen(small) && berth_utf8_valid(small, w)); /* cut only between characters */

    long d = berth_query_decode((const char *)data, size, 1, out, sizeof(out));
    assert(d == -2 || (d >= 0 && (size_t)d == strlen(out) && berth_utf8_valid(out, (size_t)d)));
    int c = berth_query_check((const char *)data, size, 64);
    assert(c == 0 || c == -2 || c == -3);
    return 0;
}
