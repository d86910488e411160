#include "core/utf8.h"

#include <string.h>

/*
 * Length of the well-formed sequence at p (at most n bytes available), or 0 if it is ill-formed. The second
 * byte's range depends on the first (Table 3-7): E0 excludes overlongs, ED surrogates, F0 overlongs, F4 values
 * above U+10FFFF; later bytes are plain continuation bytes.
 */
static size_t seq_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef)
        need = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0; /* continuation byte, C0/C1 (overlong) or F5..FF */
    if (n < need || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return need;
}

int berth_utf8_valid(const void *s, size_t len)
{
    const unsigned char *p = s, *end = p + len;
    while (p < end) {
        size_t k = seq_len(p, (size_t)(end - p));
        if (k == 0)
            return 0;
        p += k;
    }
    return 1;
}

size_t berth_utf8_scrub(const char *in, char *out, size_t outsz)
{
    static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;
    while (n > 0) {
        size_t k = seq_len(p, n);
        const char *src = k != 0 ? (const char *)p : repl;
        size_t w = k != 0 ? k : 3;
        if (o + w >= outsz)
            break;
        memcpy(out + o, src, w);
        o += w;
        p += k != 0 ? k : 1;
        n -= k != 0 ? k : 1;
    }
    out[o] = '\0';
    return o;
}
