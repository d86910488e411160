/* UTF-8 at the edges: every text that reaches PostgreSQL, a JSON body or a log line is checked here first. */
#ifndef BERTH_CORE_UTF8_H
#define BERTH_CORE_UTF8_H

#include <stddef.h>

/**
 * 1 if the `len` bytes at s are well-formed UTF-8 (Unicode Table 3-7: no overlong forms, no surrogates, nothing
 * above U+10FFFF, no sequence cut short), else 0. NUL bytes are well-formed here; callers that need C strings
 * refuse them separately.
 */
int berth_utf8_valid(const void *s, size_t len);

/**
 * Copy the NUL-terminated `in` into out (outsz > 0), replacing each ill-formed sequence with U+FFFD and never
 * cutting a character at the end, so the result is always valid UTF-8. Returns the length written.
 */
size_t berth_utf8_scrub(const char *in, char *out, size_t outsz);

#endif
