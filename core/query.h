/* Query-string lookup with percent-decoding (for ?digest=, ?mount=, ?from=, ?n=, ?last=, ?artifactType=). */
#ifndef BERTH_CORE_QUERY_H
#define BERTH_CORE_QUERY_H

#include <stddef.h>

/**
 * Find `key` in `query` (without the leading '?') and decode its value into out (NUL-terminated).
 * Returns the decoded length, -1 when absent, -2 when malformed or longer than outsz-1.
 */
long berth_query_get(const char *query, size_t len, const char *key, char *out, size_t outsz);

/** Like berth_query_get, for the `index`-th occurrence of `key` (0-based): repeated keys such as scope=. */
long berth_query_get_nth(const char *query, size_t len, const char *key, int index, char *out, size_t outsz);

/**
 * Check a whole query string at the edge, before any lookup: 0 when every key and value decodes (valid escapes,
 * no NUL, well-formed UTF-8) and no value is longer than max_value bytes decoded; -2 malformed, -3 too long.
 * Lookups after it cannot fail silently on the same bytes.
 */
int berth_query_check(const char *query, size_t len, size_t max_value);

/**
 * Percent-decode `len` bytes of `s` (a path segment, or a form value with plus_is_space); same returns. The result
 * must be well-formed UTF-8 without NUL bytes, else -2.
 */
long berth_query_decode(const char *s, size_t len, int plus_is_space, char *out, size_t outsz);

/**
 * One term of a Harbor q= filter ("name=~foo,public=true"): the value for `key` into out. Returns 1 for an exact
 * term ("key=v"), 2 for a substring term ("key=~v"), 0 when absent or too long.
 */
int berth_query_term(const char *q, const char *key, char *out, size_t outsz);
/** The value of cookie `name` in a Cookie header; 0, or -1 when absent or too long. */
int berth_query_cookie(const char *header, const char *name, char *out, size_t outsz);

#endif
