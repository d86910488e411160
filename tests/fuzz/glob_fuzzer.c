/* Doublestar patterns (core/glob.c): input is "pattern\nname". A pattern is either refused by berth_glob_check
 * or answers 0/1, within bounded time (libFuzzer's -timeout catches exponential backtracking); for short patterns
 * without classes or braces the answer equals a plain recursive definition of the same rules. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/glob.h"

static size_t ref_char_len(const char *s)
{
    unsigned char c = (unsigned char)s[0];
    size_t len = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 1;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)s[k] & 0xc0) != 0x80)
            return 1;
    return len;
}

/* One component, straight from the definition (exponential, so only for short inputs). */
static int ref_comp(const char *p, const char *pe, const char *s, const char *se)
{
    if (p == pe)
        return s == se;
    if (*p == '*')
        return ref_comp(p + 1, pe, s, se) || (s < se && ref_comp(p, pe, s + ref_char_len(s), se));
    if (s == se)
        return 0;
    if (*p == '?')
        return ref_comp(p + 1, pe, s + ref_char_len(s), se);
    if (*p == '\\')
        return p + 1 < pe && p[1] == *s && ref_comp(p + 2, pe, s + 1, se);
    return *p == *s && ref_comp(p + 1, pe, s + 1, se);
}

/* Pattern components [pc, pce) against name components; "**" takes zero or more, one or more when last. */
static int ref_comps(char **pc, size_t pi, size_t pn, char **sc, size_t si, size_t sn)
{
    if (pi == pn)
        return si == sn;
    if (strcmp(pc[pi], "**") == 0) {
        if (pi + 1 == pn)
            return si < sn;
        for (size_t k = si; k <= sn; k++)
            if (ref_comps(pc, pi + 1, pn, sc, k, sn))
                return 1;
        return 0;
    }
    return si < sn && ref_comp(pc[pi], pc[pi] + strlen(pc[pi]), sc[si], sc[si] + strlen(sc[si])) &&
           ref_comps(pc, pi + 1, pn, sc, si + 1, sn);
}

/* Split in place on '/' (in patterns, not after a backslash). */
static size_t split(char *s, char **out, int escapes)
{
    size_t n = 0;
    out[n++] = s;
    for (char *p = s; *p; p++) {
        if (escapes && *p == '\\' && p[1] != '\0') {
            p++;
            continue;
        }
        if (*p == '/') {
            *p = '\0';
            out[n++] = p + 1;
        }
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *nl = strchr(buf, '\n');
    const char *pattern = buf, *name = "";
    if (nl != NULL) {
        *nl = '\0';
        name = nl + 1;
    }
    int ok = berth_glob_check(pattern, NULL);
    int m = berth_glob_match(pattern, name);
    assert(ok == 0 || ok == BERTH_EINVAL);
    assert(ok == 0 ? (m == 0 || m == 1) : m == BERTH_EINVAL);
    if (ok == 0 && strlen(pattern) <= 16 && strlen(name) <= 16 && strpbrk(pattern, "[{") == NULL) {
        char pcopy[17], scopy[17], *pc[17], *sc[17];
        memcpy(pcopy, pattern, strlen(pattern) + 1);
        memcpy(scopy, name, strlen(name) + 1);
        size_t pn = split(pcopy, pc, 1), sn = split(scopy, sc, 0);
        assert(m == ref_comps(pc, 0, pn, sc, 0, sn));
    }
    /* every alternative of a brace group matches what it matches alone */
    if (ok == 0 && strlen(pattern) < 200 && strlen(name) < 200 && strpbrk(pattern, "{},") == NULL) {
        char alt[420];
        size_t pl = strlen(pattern);
        alt[0] = '{';
        memcpy(alt + 1, pattern, pl);
        memcpy(alt + 1 + pl, ",\x01}", 4);
        if (berth_glob_check(alt, NULL) == 0)
            assert(berth_glob_match(alt, name) == m || (m == 0 && strcmp(name, "\x01") == 0));
    }
    free(buf);
    return 0;
}
