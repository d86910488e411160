/* Leveled logging to stderr; the access log is separate (registry/http/access_log.c). */
#ifndef BERTH_CORE_LOG_H
#define BERTH_CORE_LOG_H

typedef enum { BERTH_LOG_ERR = 0, BERTH_LOG_WARN, BERTH_LOG_INFO, BERTH_LOG_DEBUG } berth_log_level_t;

/** Set the threshold ("error", "warn", "info", "debug"); returns -1 for an unknown name. */
int berth_log_set_level(const char *name);
/** Log one line. Never pass secrets: callers log names and ids, never credentials. */
void berth_log(berth_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Now as RFC 3339 UTC with milliseconds ("2026-12-03T17:23:30.569Z"): log lines, the access log, the API. */
void berth_log_now(char out[32]);

#define berth_log_err(...) berth_log(BERTH_LOG_ERR, __VA_ARGS__)
#define berth_log_warn(...) berth_log(BERTH_LOG_WARN, __VA_ARGS__)
#define berth_log_info(...) berth_log(BERTH_LOG_INFO, __VA_ARGS__)
#define berth_log_debug(...) berth_log(BERTH_LOG_DEBUG, __VA_ARGS__)

#endif
