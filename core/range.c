#include "core/range.h"

#include <string.h>

static int parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (s == end || *s < '0' || *s > '9')
        return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

int berth_range_parse(const char *s, size_t len, uint64_t *start, uint64_t *end)
{
    const char *p = s, *e = s + len;
    if (len >= 6 && memcmp(p, "bytes", 5) == 0) {
        p += 5;
        if (p < e && (*p == ' ' || *p == '='))
            p++;
    }
    if (parse_u64(&p, e, start) != 0 || p == e || *p++ != '-' || parse_u64(&p, e, end) != 0)
        return -1;
    if (p < e) { /* "/<total>" or "/-star-" */
        if (*p++ != '/')
            return -1;
        if (p < e && *p == '*' && p + 1 == e)
            p++;
        else {
            uint64_t total;
            if (parse_u64(&p, e, &total) != 0 || total <= *end)
                return -1;
        }
        if (p != e)
            return -1;
    }
    return *end < *start ? -1 : 0;
}
