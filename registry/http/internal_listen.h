/*
 * The sockets berthd's internal listeners (h2o's API listener, libmicrohttpd's upload listener) take requests on:
 * only the edge is meant to connect. A Unix socket in the run directory when its path fits, else a loopback TCP port.
 * A Unix socket costs every request the edge proxies, and every connection it opens in a burst, far less kernel
 * work than TCP, and only processes that may open the run directory and the socket (its owner) can reach it.
 */
#ifndef BERTH_HTTP_INTERNAL_LISTEN_H
#define BERTH_HTTP_INTERNAL_LISTEN_H

#include <stddef.h>

/**
 * Listen on the Unix socket `sock_path` (mode 0600; a leftover one is replaced), or on 127.0.0.1 with a port the
 * kernel picks when the path is too long for a socket (logged) or NULL. `upstream` receives the address for nginx's
 * upstream block: "unix:<path>" or "127.0.0.1:<port>". Returns the listening descriptor or -1 (logged).
 */
int berth_internal_listen(const char *sock_path, char *upstream, size_t upstream_size);

/** Remove the socket that `upstream` (as berth_internal_listen wrote it) names, if it is one. */
void berth_internal_unlink(const char *upstream);

#endif
