#include "core/ref.h"

#include "core/digest.h"

#include <string.h>

static int is_alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static int component_valid(const char *s, size_t len)
{
    size_t i = 0;
    if (len == 0 || !is_alnum_lower(s[0]))
        return 0;
    while (i < len) {
        while (i < len && is_alnum_lower(s[i]))
            i++;
        if (i == len)
            return 1;
        /* separator */
        if (s[i] == '.') {
            i++;
        } else if (s[i] == '_') {
            i++;
            if (i < len && s[i] == '_')
                i++;
        } else if (s[i] == '-') {
            while (i < len && s[i] == '-')
                i++;
        } else {
            return 0;
        }
        if (i == len || !is_alnum_lower(s[i]))
            return 0;
    }
    return 1;
}

int berth_ref_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > BERTH_NAME_MAX)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/') {
            if (!component_valid(name + start, i - start))
                return 0;
            start = i + 1;
        }
    }
    return 1;
}

int berth_ref_tag_valid(const char *tag, size_t len)
{
    if (len == 0 || len > BERTH_TAG_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = tag[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 (i > 0 && (c == '.' || c == '-'));
        if (!ok)
            return 0;
    }
    return 1;
}

size_t berth_ref_project_len(const char *name, size_t len)
{
    const char *slash = memchr(name, '/', len);
    return slash != NULL ? (size_t)(slash - name) : len;
}

int berth_ref_image_parse(berth_image_ref_t *out, const char *s)
{
    memset(out, 0, sizeof(*out));
    if (s == NULL)
        return -1;
    const char *slash = strchr(s, '/');
    if (slash != NULL && (memchr(s, '.', (size_t)(slash - s)) != NULL || memchr(s, ':', (size_t)(slash - s)) != NULL ||
                          (slash - s == 9 && memcmp(s, "localhost", 9) == 0))) {
        if ((size_t)(slash - s) >= sizeof(out->host))
            return -1;
        memcpy(out->host, s, (size_t)(slash - s));
        s = slash + 1;
    }
    const char *at = strchr(s, '@'), *last = strrchr(s, '/'), *colon = strrchr(s, ':');
    size_t nlen = strlen(s);
    const char *ref = "latest";
    if (at != NULL) {
        nlen = (size_t)(at - s);
        ref = at + 1;
        out->ref_is_digest = 1;
    } else if (colon != NULL && (last == NULL || colon > last)) {
        nlen = (size_t)(colon - s);
        ref = colon + 1;
    }
    size_t rlen = strlen(ref);
    if (nlen == 0 || nlen > BERTH_NAME_MAX || !berth_ref_name_valid(s, nlen) || rlen > BERTH_REF_MAX)
        return -1;
    berth_digest_t d;
    if (out->ref_is_digest ? berth_digest_parse(&d, ref, rlen, NULL) != 0 : !berth_ref_tag_valid(ref, rlen))
        return -1;
    memcpy(out->name, s, nlen);
    memcpy(out->ref, ref, rlen + 1);
    return 0;
}
