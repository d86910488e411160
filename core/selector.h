/*
 * Harbor's rule selectors (immutable tag rules and retention rules): a repository selector from
 * scope_selectors.repository[0] (decoration repoMatches or repoExcludes) and a tag selector from tag_selectors[0]
 * (matches or excludes, extras {"untagged": bool}), both kind "doublestar" (core/glob.h). An empty pattern
 * matches everything, as in Harbor. Repository names are given without their project ("app", not "proj/app").
 */
#ifndef BERTH_CORE_SELECTOR_H
#define BERTH_CORE_SELECTOR_H

#include <stddef.h>

#include <jansson.h>

typedef struct st_berth_selector_t {
    int excludes;  /* repoExcludes / excludes */
    int untagged;  /* tag selector: what it says about an artifact without tags (Harbor's extras.untagged) */
    char *pattern; /* doublestar; "" matches everything */
} berth_selector_t;

typedef struct st_berth_rule_sel_t {
    berth_selector_t repo, tag;
} berth_rule_sel_t;

/**
 * Read and check a rule's selectors (Harbor's JSON). 0, or BERTH_EINVAL with a reason in why: a missing
 * selector, a kind other than doublestar, a decoration that does not belong there, a malformed pattern.
 * Release with berth_rule_sel_dispose (also after a failure).
 */
int berth_rule_sel_parse(berth_rule_sel_t *out, const json_t *scope_selectors, const json_t *tag_selectors, char *why,
                         size_t whysz);
void berth_rule_sel_dispose(berth_rule_sel_t *s);
/** 1 if the rule takes repository `repo` (short name). */
int berth_rule_sel_repo(const berth_rule_sel_t *s, const char *repo);
/** 1 if the rule's tag selector takes `tag` on its own (immutability: one tag at a time). */
int berth_rule_sel_tag(const berth_rule_sel_t *s, const char *tag);
/**
 * 1 if the tag selector takes an artifact with these tags (Harbor: matches takes it when any tag matches,
 * excludes when any tag does not; an artifact without tags is taken when `untagged` says so for matches, and
 * when it does not for excludes).
 */
int berth_rule_sel_artifact(const berth_rule_sel_t *s, const char *const *tags, size_t ntags);
/** A line for messages: "repositories matching **, tags matching v*". Into buf. */
const char *berth_rule_sel_describe(const berth_rule_sel_t *s, char *buf, size_t bufsz);

#endif
