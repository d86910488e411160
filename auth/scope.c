#include "auth/scope.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bit;
} actions[] = {{"pull", BERTH_ACTION_PULL}, {"push", BERTH_ACTION_PUSH}, {"delete", BERTH_ACTION_DELETE}, {"*", BERTH_ACTION_ALL}};

int berth_scope_parse(berth_scope_t *out, const char *s, size_t len, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    const char *first = memchr(s, ':', len);
    const char *last = NULL;
    for (size_t i = len; i > 0; i--)
        if (s[i - 1] == ':') {
            last = s + i - 1;
            break;
        }
    if (first == NULL || last == NULL || last == first)
        return berth_err_set(err, BERTH_OCI_UNSUPPORTED, "scope needs type:name:actions");
    size_t tlen = (size_t)(first - s);
    const char *paren = memchr(s, '(', tlen); /* "repository(plugin)" */
    if (paren != NULL)
        tlen = (size_t)(paren - s);
    if (tlen == 0 || tlen >= sizeof(out->type))
        return berth_err_set(err, BERTH_OCI_UNSUPPORTED, "scope type is invalid");
    memcpy(out->type, s, tlen);
    const char *name = first + 1;
    size_t nlen = (size_t)(last - name);
    if (strcmp(out->type, "repository") == 0) {
        if (!berth_ref_name_valid(name, nlen))
            return berth_err_set(err, BERTH_OCI_NAME_INVALID, "scope names an invalid repository");
    } else if (strcmp(out->type, "registry") == 0) {
        if (nlen != 7 || memcmp(name, "catalog", 7) != 0)
            return berth_err_set(err, BERTH_OCI_UNSUPPORTED, "unknown registry scope");
    } else {
        return berth_err_set(err, BERTH_OCI_UNSUPPORTED, "unknown scope type");
    }
    memcpy(out->name, name, nlen);
    const char *a = last + 1, *end = s + len;
    while (a < end) {
        const char *comma = memchr(a, ',', (size_t)(end - a));
        size_t alen = (size_t)((comma != NULL ? comma : end) - a);
        for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
            if (strlen(actions[i].name) == alen && memcmp(a, actions[i].name, alen) == 0)
                out->actions |= actions[i].bit;
        a += alen + 1;
    }
    return 0;
}

void berth_scope_actions_str(unsigned bits, char *buf, size_t bufsz)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if ((bits & actions[i].bit) && n < bufsz)
            n += (size_t)snprintf(buf + n, bufsz - n, "%s%s", n ? "," : "", actions[i].name);
}

int berth_scope_format(const berth_scope_t *s, char *buf, size_t bufsz)
{
    char acts[32];
    berth_scope_actions_str(s->actions, acts, sizeof(acts));
    int n = snprintf(buf, bufsz, "%s:%s:%s", s->type, s->name, acts);
    return n < 0 || (size_t)n >= bufsz ? -1 : n;
}
