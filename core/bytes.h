/* Byte counts for people: "2.1 MiB", the way Harbor's quota messages write them. */
#ifndef BERTH_CORE_BYTES_H
#define BERTH_CORE_BYTES_H

#include <stdint.h>

#define BERTH_BYTES_HUMAN_MAX 24

/** `n` in the largest binary unit that keeps it at least 1, one decimal ("512 B", "1.0 KiB", "2.1 MiB"); into out. */
const char *berth_bytes_human(int64_t n, char out[BERTH_BYTES_HUMAN_MAX]);

#endif
