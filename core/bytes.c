#include "core/bytes.h"

#include <stdio.h>

const char *berth_bytes_human(int64_t n, char out[BERTH_BYTES_HUMAN_MAX])
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024 && n > -1024) {
        snprintf(out, BERTH_BYTES_HUMAN_MAX, "%lld B", (long long)n);
        return out;
    }
    double v = (double)n;
    size_t u = 0;
    v /= 1024;
    while ((v >= 1024 || v <= -1024) && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(out, BERTH_BYTES_HUMAN_MAX, "%.1f %s", v, units[u]);
    return out;
}
