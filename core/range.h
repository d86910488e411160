/* Content-Range of chunked uploads ("<start>-<end>", optionally "bytes <start>-<end>/<total|*>"). */
#ifndef BERTH_CORE_RANGE_H
#define BERTH_CORE_RANGE_H

#include <stddef.h>
#include <stdint.h>

/** Parse into inclusive [*start, *end]; returns 0, or -1 when malformed or end < start. */
int berth_range_parse(const char *s, size_t len, uint64_t *start, uint64_t *end);

#endif
