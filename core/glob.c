#include "core/glob.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/utf8.h"

#define NONE SIZE_MAX

/* Length of the UTF-8 sequence at s (1 for a byte that starts none, so any byte string advances). */
static size_t char_len(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    size_t len = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 1;
    if (len > n)
        return 1;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)s[k] & 0xc0) != 0x80)
            return 1;
    return len;
}

/* The code point at s (the byte's value when it starts no well-formed sequence); *len gets its length. */
static uint32_t decode(const char *s, size_t n, size_t *len)
{
    *len = char_len(s, n);
    unsigned char c = (unsigned char)s[0];
    if (*len == 1)
        return c;
    uint32_t cp = c & (0xffu >> (*len + 1));
    for (size_t k = 1; k < *len; k++)
        cp = cp << 6 | ((unsigned char)s[k] & 0x3f);
    return cp;
}

/* ---- syntax ------------------------------------------------------------------------------------------------ */

/* One class element's character at p[*i] (escapes allowed); -1 when it may not stand there. */
static int64_t class_char(const char *p, size_t n, size_t *i, const char **why)
{
    if (*i < n && p[*i] == '\\')
        (*i)++;
    if (*i >= n) {
        *why = "unclosed [";
        return -1;
    }
    if (p[*i] == '/') {
        *why = "'/' inside [...]";
        return -1;
    }
    size_t len;
    uint32_t cp = decode(p + *i, n - *i, &len);
    *i += len;
    return cp;
}

/*
 * Walks the class opening at p[start]; *end gets the index of its ']'. With `c` >= 0, *member tells whether the
 * character c is in the class (negation applied). BERTH_EINVAL for a malformed class.
 */
static int class_walk(const char *p, size_t n, size_t start, size_t *end, int64_t c, int *member, const char **why)
{
    size_t i = start + 1;
    int negate = i < n && (p[i] == '^' || p[i] == '!'), in = 0;
    if (negate)
        i++;
    size_t first = i;
    for (;;) {
        if (i >= n) {
            *why = "unclosed [";
            return BERTH_EINVAL;
        }
        if (p[i] == ']') {
            if (i == first) {
                *why = "empty []";
                return BERTH_EINVAL;
            }
            break;
        }
        if (p[i] == '-') {
            *why = "'-' without a start in [...]";
            return BERTH_EINVAL;
        }
        int64_t lo = class_char(p, n, &i, why), hi = lo;
        if (lo < 0)
            return BERTH_EINVAL;
        if (i < n && p[i] == '-') {
            i++;
            if (i >= n || p[i] == ']' || p[i] == '-') {
                *why = "unfinished range in [...]";
                return BERTH_EINVAL;
            }
            if ((hi = class_char(p, n, &i, why)) < 0)
                return BERTH_EINVAL;
        }
        if (c >= lo && c <= hi)
            in = 1;
    }
    *end = i;
    if (member != NULL)
        *member = in != negate;
    return 0;
}

/* Index just past the token at p[i]: an escape pair, a whole class, or one byte (the pattern is known good). */
static size_t skip(const char *p, size_t n, size_t i)
{
    if (p[i] == '\\')
        return i + 2 <= n ? i + 2 : n;
    if (p[i] == '[') {
        size_t end;
        const char *why;
        if (class_walk(p, n, i, &end, -1, NULL, &why) == 0)
            return end + 1;
    }
    return i + 1;
}

static long saturate(long v)
{
    return v > BERTH_GLOB_MAX_ALTERNATIVES ? BERTH_GLOB_MAX_ALTERNATIVES + 1 : v;
}

/*
 * Checks a sequence up to the end (depth 0) or the ',' / '}' that ends an alternative (depth > 0) and returns how
 * many brace-free patterns it expands to (saturated), or -1.
 */
static long check_seq(const char *p, size_t n, size_t *i, int depth, const char **why)
{
    long count = 1;
    while (*i < n) {
        char c = p[*i];
        if (depth > 0 && (c == ',' || c == '}'))
            return count;
        if (c == '\\') {
            if (*i + 1 >= n) {
                *why = "trailing backslash";
                return -1;
            }
            *i += 2;
        } else if (c == '[') {
            size_t end;
            if (class_walk(p, n, *i, &end, -1, NULL, why) != 0)
                return -1;
            *i = end + 1;
        } else if (c == '{') {
            long sum = 0;
            (*i)++;
            for (;;) {
                long a = check_seq(p, n, i, depth + 1, why);
                if (a < 0)
                    return -1;
                sum = saturate(sum + a);
                if (*i >= n) {
                    *why = "unclosed {";
                    return -1;
                }
                if (p[(*i)++] == '}')
                    break;
            }
            count = saturate(count * sum);
        } else {
            (*i)++;
        }
    }
    return count;
}

int berth_glob_check(const char *pattern, const char **why)
{
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    size_t n = strlen(pattern), i = 0;
    if (n > BERTH_GLOB_MAX_LEN) {
        *why = "pattern too long";
        return BERTH_EINVAL;
    }
    if (!berth_utf8_valid(pattern, n)) { /* '*' and '?' step over characters: a broken one has no meaning */
        *why = "pattern is not valid UTF-8";
        return BERTH_EINVAL;
    }
    long count = check_seq(pattern, n, &i, 0, why);
    if (count < 0)
        return BERTH_EINVAL;
    if (count > BERTH_GLOB_MAX_ALTERNATIVES) {
        *why = "too many {...} alternatives";
        return BERTH_EINVAL;
    }
    return 0;
}

/* ---- matching ---------------------------------------------------------------------------------------------- */

/*
 * One component: no '/', no braces. Greedy with one backtracking point (the last '*'): a later star can absorb
 * whatever an earlier one would have, so retrying only the last keeps this O(pattern x name).
 */
static int component(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = NONE, star_s = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            while (pi < pn && p[pi] == '*')
                pi++;
            if (pi == pn)
                return 1;
            star_p = pi;
            star_s = si;
            continue;
        }
        if (pi < pn) {
            size_t len = char_len(s + si, sn - si);
            if (p[pi] == '?') {
                pi++;
                si += len;
                continue;
            }
            if (p[pi] == '[') {
                size_t end, clen;
                int member = 0;
                const char *why;
                uint32_t c = decode(s + si, sn - si, &clen);
                if (class_walk(p, pn, pi, &end, c, &member, &why) == 0 && member) {
                    pi = end + 1;
                    si += clen;
                    continue;
                }
            } else {
                size_t at = p[pi] == '\\' ? pi + 1 : pi;
                if (at < pn && p[at] == s[si]) {
                    pi = at + 1;
                    si++;
                    continue;
                }
            }
        }
        if (star_p == NONE)
            return 0;
        star_s += char_len(s + star_s, sn - star_s);
        si = star_s;
        pi = star_p;
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* End of the pattern component starting at i: the next unescaped '/' (never inside a class: check refuses it). */
static size_t pattern_comp_end(const char *p, size_t n, size_t i)
{
    while (i < n && p[i] != '/')
        i = skip(p, n, i);
    return i;
}

static size_t name_comp_end(const char *s, size_t n, size_t i)
{
    const char *slash = i < n ? memchr(s + i, '/', n - i) : NULL;
    return slash != NULL ? (size_t)(slash - s) : n;
}

/*
 * A brace-free pattern against a name, component by component. A "**" component is the one backtracking point, as
 * '*' is within a component, for the same reason. A start index past the end (n + 1) means no component is left.
 */
static int plain(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = NONE, star_s = 0;
    while (si <= sn) {
        size_t se = name_comp_end(s, sn, si);
        if (pi <= pn) {
            size_t pe = pattern_comp_end(p, pn, pi);
            if (pe - pi == 2 && p[pi] == '*' && p[pi + 1] == '*') {
                if (pe == pn)
                    return 1; /* a final "**" takes the one or more components that are left */
                pi = star_p = pe + 1;
                star_s = si;
                continue;
            }
            if (component(p + pi, pe - pi, s + si, se - si)) {
                pi = pe + 1;
                si = se + 1;
                continue;
            }
        }
        if (star_p == NONE)
            return 0;
        star_s = name_comp_end(s, sn, star_s) + 1;
        si = star_s;
        pi = star_p;
    }
    return pi > pn;
}

/* Expands the first brace group and recurses; a pattern without one is matched. */
static int expand(const char *p, size_t n, const char *s, size_t sn)
{
    size_t open = 0;
    while (open < n && p[open] != '{')
        open = skip(p, n, open);
    if (open >= n)
        return plain(p, n, s, sn);

    int matched = 0, depth = 0;
    size_t alt = open + 1, i = open + 1, close = n;
    /* find the matching '}' first: every alternative is followed by the same tail */
    for (size_t j = open + 1; j < n; j = skip(p, n, j)) {
        if (p[j] == '{')
            depth++;
        else if (p[j] == '}' && depth-- == 0) {
            close = j;
            break;
        }
    }
    if (close >= n)
        return 0; /* berth_glob_check refuses this before we get here */
    char *buf = calloc(1, n + 1);
    depth = 0;
    for (; i <= close && !matched; i = i < close ? skip(p, n, i) : close + 1) {
        if (i < close && p[i] == '{')
            depth++;
        else if (i < close && p[i] == '}')
            depth--;
        else if (i == close || (depth == 0 && p[i] == ',')) {
            size_t len = 0;
            memcpy(buf, p, open);
            len += open;
            memcpy(buf + len, p + alt, i - alt);
            len += i - alt;
            memcpy(buf + len, p + close + 1, n - close - 1);
            len += n - close - 1;
            buf[len] = '\0';
            matched = expand(buf, len, s, sn);
            alt = i + 1;
        }
    }
    free(buf);
    return matched;
}

int berth_glob_match(const char *pattern, const char *name)
{
    if (berth_glob_check(pattern, NULL) != 0)
        return BERTH_EINVAL;
    return expand(pattern, strlen(pattern), name, strlen(name));
}
