/* JSON-lines access log: one line per request, written by a thread of its own. */
#ifndef BERTH_HTTP_ACCESS_LOG_H
#define BERTH_HTTP_ACCESS_LOG_H

#include <stdint.h>

/** "-" for stdout, a path (appended), or NULL to disable. Returns 0 or -1. */
int berth_access_log_open(const char *path);
void berth_access_log(const char *remote, const char *method, const char *path, int status, uint64_t bytes_in, uint64_t bytes_out,
                      double ms, const char *route);

/** Wait until every queued line is written (at shutdown). */
void berth_access_log_flush(void);
/** Lines dropped because the writer fell behind (for /metrics). */
unsigned long berth_access_log_dropped(void);

#endif
