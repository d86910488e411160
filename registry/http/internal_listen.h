/*
 * Where berthd's internal listeners (h2o's API listener, libmicrohttpd's upload listener) take the edge's
 * requests: Unix sockets in the run directory, which only berthd's user can open and which cost every proxied
 * request, and every connection the edge opens in a burst, far less kernel work than loopback TCP.
 *
 * A Unix connect to a full accept queue fails at once (EAGAIN: nginx answers 502, the edge's 503) where a TCP
 * SYN waits and is retried, so the API listener also has a loopback port the edge uses as a backup when the
 * socket's queue is full (a burst of thousands of clients, or net.core.somaxconn at 128). Uploads need none: each
 * body holds a listener thread, and past uploads.max_connections plus the queue a client gets 503 + Retry-After.
 * The run directory is claimed (a lock) so two instances never take each other's sockets.
 */
#ifndef BERTH_HTTP_INTERNAL_LISTEN_H
#define BERTH_HTTP_INTERNAL_LISTEN_H

#include <stddef.h>

#define BERTH_INTERNAL_ADDR_MAX 160 /* "unix:<path>" fits when the path fits a socket (108 bytes) */

typedef struct st_berth_internal_t {
    int api_fd, api_backup_fd, upload_fd; /* listening descriptors; api_backup_fd -1 when api_fd is TCP itself */
    char api[BERTH_INTERNAL_ADDR_MAX], api_backup[BERTH_INTERNAL_ADDR_MAX], upload[BERTH_INTERNAL_ADDR_MAX];
    /* nginx's upstream addresses: "unix:<path>" or "127.0.0.1:<port>"; api_backup "" when there is none */
} berth_internal_t;

/**
 * Claim `run_dir` (made 0750 if missing; it must be a directory of berthd's user that no one else may write, and
 * no other berthd may hold it) and listen in it. Sockets fall back to loopback ports, logged, when the directory's
 * path is too long for a socket or one cannot be made there. 0, or -1 with one line in errbuf.
 */
int berth_internal_listen(berth_internal_t *out, const char *run_dir, char *errbuf, size_t errlen);

/** Remove the sockets (after the listeners stopped); the run directory's claim ends with the process. */
void berth_internal_unlink(const berth_internal_t *in);

#endif
