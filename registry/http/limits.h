/*
 * Operating-system limits that decide how many clients Berth can hold at once: the descriptor limit
 * (RLIMIT_NOFILE) and the listen backlog (net.core.somaxconn). The edge is sized from them, not from constants.
 */
#ifndef BERTH_HTTP_LIMITS_H
#define BERTH_HTTP_LIMITS_H

typedef struct st_berth_limits_t {
    long nofile; /* descriptor limit after raising the soft limit to the hard one */
    long nofile_hard;
    int backlog;            /* for every listen(): net.core.somaxconn (the kernel caps any larger value to it) */
    long worker_nofile;     /* per nginx worker (worker_rlimit_nofile): below nofile, so it needs no privilege */
    int worker_connections; /* per nginx worker: downstream + upstream connections, at most nofile */
    int upstream_max_conns; /* per nginx worker and internal listener: keeps berthd under its own descriptor limit */
} berth_limits_t;

/**
 * Raise this process's RLIMIT_NOFILE soft limit to its hard limit (nginx, started later, inherits it) and size
 * the edge from the result for `edge_workers` nginx workers. Logs the figures, and a warning naming the limit
 * to raise when they hold fewer clients than a large burst needs.
 */
void berth_limits_init(berth_limits_t *out, int edge_workers);
/**
 * Size the edge for a descriptor limit `nofile` and `edge_workers` nginx workers (no system calls, no log):
 * fills worker_nofile, worker_connections and upstream_max_conns; returns how many clients it holds at once.
 */
long berth_limits_size(berth_limits_t *out, long nofile, int edge_workers);
/**
 * Share a worker's upstream_max_conns between the API's socket and its loopback backup port (used when the
 * socket's queue is full, internal_listen.h), given the idle upstream connections a worker pools (`idle`).
 * Where the worker's own descriptors bound its upstream connections within upstream_max_conns, each gets all
 * of it (a burst that fills the socket's queue needs thousands on the backup); else the backup gets an eighth.
 */
void berth_limits_api_split(const berth_limits_t *l, int idle, int *socket_conns, int *backup_conns);
/** The backlog for listen(2) (berth_limits_init must have run; 4096 before). */
int berth_limits_backlog(void);

#endif
