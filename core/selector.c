#include "core/selector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/glob.h"

static int fail(char *why, size_t whysz, const char *fmt, const char *arg)
{
    snprintf(why, whysz, fmt, arg);
    return BERTH_EINVAL;
}

/* One selector object: {kind: doublestar, decoration: one of `decorations`, pattern, extras}. */
static int parse_one(berth_selector_t *out, const json_t *o, const char *what, const char *match, const char *exclude, char *why,
                     size_t whysz)
{
    if (!json_is_object(o))
        return fail(why, whysz, "%s selector missing", what);
    const char *kind = json_string_value(json_object_get(o, "kind"));
    const char *dec = json_string_value(json_object_get(o, "decoration"));
    const json_t *pat = json_object_get(o, "pattern");
    if (kind != NULL && strcmp(kind, "doublestar") != 0)
        return fail(why, whysz, "%s selector: kind must be doublestar", what);
    if (dec == NULL || (strcmp(dec, match) != 0 && strcmp(dec, exclude) != 0)) {
        char buf[96];
        snprintf(buf, sizeof(buf), "%s selector: decoration must be %s or %s", what, match, exclude);
        return fail(why, whysz, "%s", buf);
    }
    if (pat != NULL && !json_is_null(pat) && !json_is_string(pat))
        return fail(why, whysz, "%s selector: pattern must be a string", what);
    const char *p = json_string_value(pat) != NULL ? json_string_value(pat) : "";
    const char *reason = NULL;
    if (berth_glob_check(p, &reason) != 0) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s pattern %.40s: %s", what, p, reason);
        return fail(why, whysz, "%s", buf);
    }
    out->excludes = strcmp(dec, exclude) == 0;
    /* Harbor's default: untagged artifacts count as matched by "matches", not by "excludes"; extras override */
    out->untagged = !out->excludes;
    const char *extras = json_string_value(json_object_get(o, "extras"));
    json_t *ex = extras != NULL ? json_loads(extras, 0, NULL) : NULL;
    if (json_is_boolean(json_object_get(ex, "untagged")))
        out->untagged = json_is_true(json_object_get(ex, "untagged"));
    json_decref(ex);
    out->pattern = strdup(p);
    return 0;
}

int berth_rule_sel_parse(berth_rule_sel_t *out, const json_t *scope, const json_t *tags, char *why, size_t whysz)
{
    memset(out, 0, sizeof(*out));
    const json_t *repos = json_object_get(scope, "repository");
    if (!json_is_array(repos) || json_array_size(repos) != 1)
        return fail(why, whysz, "%s", "scope_selectors.repository must hold one selector");
    if (!json_is_array(tags) || json_array_size(tags) != 1)
        return fail(why, whysz, "%s", "tag_selectors must hold one selector");
    int rc = parse_one(&out->repo, json_array_get(repos, 0), "repository", "repoMatches", "repoExcludes", why, whysz);
    if (rc == 0)
        rc = parse_one(&out->tag, json_array_get(tags, 0), "tag", "matches", "excludes", why, whysz);
    return rc;
}

void berth_rule_sel_dispose(berth_rule_sel_t *s)
{
    free(s->repo.pattern);
    free(s->tag.pattern);
    memset(s, 0, sizeof(*s));
}

static int takes(const berth_selector_t *sel, const char *name)
{
    int m = sel->pattern == NULL || sel->pattern[0] == '\0' || berth_glob_match(sel->pattern, name) == 1;
    return sel->excludes ? !m : m;
}

int berth_rule_sel_repo(const berth_rule_sel_t *s, const char *repo)
{
    return takes(&s->repo, repo);
}

int berth_rule_sel_tag(const berth_rule_sel_t *s, const char *tag)
{
    return takes(&s->tag, tag);
}

int berth_rule_sel_artifact(const berth_rule_sel_t *s, const char *const *tags, size_t ntags)
{
    if (ntags == 0)
        return s->tag.excludes ? !s->tag.untagged : s->tag.untagged;
    for (size_t i = 0; i < ntags; i++)
        if (takes(&s->tag, tags[i]))
            return 1;
    return 0;
}

const char *berth_rule_sel_describe(const berth_rule_sel_t *s, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "repositories %s %s, tags %s %s", s->repo.excludes ? "excluding" : "matching",
             s->repo.pattern != NULL && s->repo.pattern[0] ? s->repo.pattern : "**", s->tag.excludes ? "excluding" : "matching",
             s->tag.pattern != NULL && s->tag.pattern[0] ? s->tag.pattern : "**");
    return buf;
}
