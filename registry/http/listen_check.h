/*
 * Before anything starts: can the edge listen where it is told to? nginx would otherwise die later with a bind
 * error naming neither the setting nor how to change it (the first thing a new operator with a busy port sees).
 */
#ifndef BERTH_HTTP_LISTEN_CHECK_H
#define BERTH_HTTP_LISTEN_CHECK_H

#include <stddef.h>

/**
 * Try to bind `addr` (host:port, [v6]:port) as nginx will (SO_REUSEADDR) and let go at once. 0 when it is free;
 * -1 with one line in errbuf naming the address, the setting `key` and its environment variable `env`.
 */
int berth_listen_check(const char *addr, const char *key, const char *env, char *errbuf, size_t errlen);

#endif
