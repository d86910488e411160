#include "core/query.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long berth_query_decode(const char *s, size_t len, int plus_is_space, char *out, size_t outsz)
{
    size_t n = 0;
    for (const char *v = s, *end = s + len; v < end; v++) {
        char c = *v;
        if (c == '%') {
            int hi, lo;
            if (end - v < 3 || (hi = hexval(v[1])) < 0 || (lo = hexval(v[2])) < 0)
                return -2;
            c = (char)(hi * 16 + lo);
            v += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0' || n + 1 >= outsz)
            goto Bad;
        out[n++] = c;
    }
    if (outsz == 0 || !berth_utf8_valid(out, n)) /* PostgreSQL, JSON and logs take text, never raw bytes */
        goto Bad;
    out[n] = '\0';
    return (long)n;
Bad: /* never leave a half-decoded value behind for a caller that ignores the error */
    if (outsz > 0)
        out[0] = '\0';
    return -2;
}

int berth_query_check(const char *query, size_t len, size_t max_value)
{
    char *buf = malloc(len + 1); /* nothing decodes longer than its encoding */
    int rc = 0;
    for (const char *p = query, *end = query + len; rc == 0 && p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *item_end = amp != NULL ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        const char *kend = eq != NULL ? eq : item_end;
        long n = 0;
        if (berth_query_decode(p, (size_t)(kend - p), 1, buf, len + 1) < 0 ||
            (eq != NULL && (n = berth_query_decode(eq + 1, (size_t)(item_end - eq - 1), 1, buf, len + 1)) < 0))
            rc = -2;
        else if ((size_t)n > max_value)
            rc = -3;
        p = item_end + 1;
    }
    free(buf);
    return rc;
}

long berth_query_get(const char *query, size_t len, const char *key, char *out, size_t outsz)
{
    return berth_query_get_nth(query, len, key, 0, out, outsz);
}

long berth_query_get_nth(const char *query, size_t len, const char *key, int index, char *out, size_t outsz)
{
    size_t klen = strlen(key);
    const char *p = query, *end = query + len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *item_end = amp != NULL ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        const char *kend = eq != NULL ? eq : item_end;
        if ((size_t)(kend - p) == klen && memcmp(p, key, klen) == 0 && index-- == 0) {
            const char *v = eq != NULL ? eq + 1 : item_end;
            return berth_query_decode(v, (size_t)(item_end - v), 1, out, outsz);
        }
        p = item_end + 1;
    }
    return -1;
}

int berth_query_term(const char *q, const char *key, char *out, size_t outsz)
{
    size_t klen = strlen(key);
    for (const char *p = q; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            int fuzzy = len > klen + 1 && p[klen + 1] == '~';
            size_t off = klen + 1 + (size_t)fuzzy, vlen = len - off;
            if (vlen + 1 > outsz)
                return 0;
            memcpy(out, p + off, vlen);
            out[vlen] = '\0';
            return fuzzy ? 2 : 1;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

int berth_query_cookie(const char *header, const char *name, char *out, size_t outsz)
{
    size_t nlen = strlen(name);
    for (const char *p = header; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=' && len - nlen - 1 < outsz) {
            memcpy(out, p + nlen + 1, len - nlen - 1);
            out[len - nlen - 1] = '\0';
            return 0;
        }
        p = end;
    }
    return -1;
}
