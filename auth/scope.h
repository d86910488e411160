/* Docker token-auth scopes ("repository:library/ubuntu:pull,push", "registry:catalog:*") and actions. */
#ifndef BERTH_AUTH_SCOPE_H
#define BERTH_AUTH_SCOPE_H

#include <stddef.h>

#include "core/err.h"
#include "core/ref.h"

enum {
    BERTH_ACTION_PULL = 1,
    BERTH_ACTION_PUSH = 2,
    BERTH_ACTION_DELETE = 4,
    BERTH_ACTION_ALL = 8, /* "*": registry:catalog:* */
};

typedef struct st_berth_scope_t {
    char type[24];                 /* "repository" or "registry" (a "(class)" suffix is dropped) */
    char name[BERTH_NAME_MAX + 1]; /* repository name, or "catalog" */
    unsigned actions;              /* BERTH_ACTION_* bits */
} berth_scope_t;

/**
 * Parse one scope. Unknown actions are ignored (the spec says so); a repository name must satisfy the OCI
 * grammar. Returns 0 or BERTH_EINVAL.
 */
int berth_scope_parse(berth_scope_t *out, const char *s, size_t len, berth_err_t *err);
/** "type:name:a,b" into buf; returns the length or -1 if it does not fit. */
int berth_scope_format(const berth_scope_t *s, char *buf, size_t bufsz);
/** Actions as the comma list a token's access claim carries ("pull,push"). */
void berth_scope_actions_str(unsigned actions, char *buf, size_t bufsz);

#endif
