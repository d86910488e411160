/*
 * Doublestar patterns as Harbor's selectors use them (immutable tag rules, retention, replication filters; Harbor
 * calls bmatcuk/doublestar v1). Names are split on '/' into components:
 *   "**"     as a whole component matches zero or more components; at the end of a pattern, one or more
 *            (so "a/" followed by "**" matches "a/b" and "a/b/c", not "a")
 *   "*"      any run of characters within one component ("a**b" inside a component is "a*b")
 *   "?"      one character (a UTF-8 sequence counts as one), never '/'
 *   "[...]"  a class: ranges "a-z", negation "^" (or "!"), "\]" escapes; must not be empty
 *   "{a,b}"  alternatives; unlike doublestar v1 they may nest and hold '/' ("{team/app,ops/x}")
 *   "\c"     the character c
 * Matching time is bounded (no exponential backtracking): pattern bytes x name bytes x alternatives, with at most
 * BERTH_GLOB_MAX_ALTERNATIVES alternatives and BERTH_GLOB_MAX_LEN pattern bytes. Pure, no allocation beyond the
 * brace expansion buffer.
 */
#ifndef BERTH_CORE_GLOB_H
#define BERTH_CORE_GLOB_H

#include <stddef.h>

#define BERTH_GLOB_MAX_LEN 1024
#define BERTH_GLOB_MAX_ALTERNATIVES 256

/**
 * 0 if `pattern` is well formed, else BERTH_EINVAL with the reason in *why (may be NULL; a static string):
 * unbalanced braces or brackets, an empty or reversed class, a trailing backslash, too long, too many alternatives.
 */
int berth_glob_check(const char *pattern, const char **why);

/** 1 if the whole of `name` matches `pattern`, 0 if not, BERTH_EINVAL for a malformed pattern (never matches). */
int berth_glob_match(const char *pattern, const char *name);

#endif
