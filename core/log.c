#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static berth_log_level_t threshold = BERTH_LOG_INFO;
static const char *names[] = {"error", "warn", "info", "debug"};

int berth_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            threshold = (berth_log_level_t)i;
            return 0;
        }
    }
    return -1;
}

void berth_log_now(char out[32])
{
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03ldZ", now.tv_nsec / 1000000);
}

void berth_log(berth_log_level_t level, const char *fmt, ...)
{
    if (level > threshold)
        return;
    char line[1024], ts[32];
    berth_log_now(ts);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* one fprintf per line: stdio locks the stream, so lines from threads do not interleave */
    fprintf(stderr, "%s %s berthd: %s\n", ts, names[level], line);
}
