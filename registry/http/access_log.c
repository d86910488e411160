#include "registry/http/access_log.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;

int berth_access_log_open(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    if (strcmp(path, "-") == 0) {
        log_fd = STDOUT_FILENO;
        return 0;
    }
    log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    return log_fd < 0 ? -1 : 0;
}

void berth_access_log(const char *remote, const char *method, const char *path, int status, uint64_t bytes_in,
                      uint64_t bytes_out, double ms, const char *route)
{
    if (log_fd < 0)
        return;
    char ts[40];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);
    /* the query string can carry nothing secret here (digests, paging), but Authorization is never logged */
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:f,s:s}", "ts", ts, "remote", remote ? remote : "-", "method", method,
                          "path", path, "status", status, "bytes_in", (json_int_t)bytes_in, "bytes_out", (json_int_t)bytes_out,
                          "ms", ms, "route", route);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        return;
    size_t len = strlen(s);
    s[len] = '\n';
    ssize_t w = write(log_fd, s, len + 1);
    (void)w;
    free(s);
}
