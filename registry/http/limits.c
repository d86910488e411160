#include "registry/http/limits.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/log.h"

/* nginx touches every connection slot of every worker at start (~450 bytes each): past this the preallocation
 * costs more memory than the connections it could hold are likely to be used */
#define WORKER_CONNECTIONS_MAX 65536
/* descriptors kept back in each process for files (blobs sent, logs, the database pool, the upload files) */
#define FILE_RESERVE 1024
/* a burst this size should never wait on a limit: below it the log says which limit to raise */
#define CLIENTS_EXPECTED 10000

static int backlog = 4096;

static int read_somaxconn(void)
{
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    long v = 0;
    char line[32];
    if (f != NULL) {
        char *end;
        if (fgets(line, sizeof(line), f) != NULL && ((v = strtol(line, &end, 10)) <= 0 || v > INT_MAX || end == line))
            v = 0;
        fclose(f);
    }
    return v > 0 ? (int)v : 4096;
}

long berth_limits_size(berth_limits_t *out, long nofile, int edge_workers)
{
    int workers = edge_workers > 0 ? edge_workers : 1;
    /* The edge listens with reuseport, so the kernel shares new clients evenly between the workers: each one gets
     * its share of the descriptor limit (plus FILE_RESERVE for its files), not the whole limit. The slots cost
     * memory used or not, as nginx touches every slot of every worker at start (~450 bytes: 20,000 slots per
     * worker held 9 MiB each, twice what the clients they could serve together needed).
     * More connection slots than a worker has descriptors, so descriptors always run out first: that is EMFILE
     * on accept (nginx pauses accepting and clients wait in the backlog) or on an upstream connect (a 503 with
     * Retry-After). Slots running low is worse: below 1/16 free, nginx closes idle keep-alive clients to reuse
     * their slots ("worker_connections are not enough, reusing connections"), and a client whose request is
     * on its way sees a reset. So a worker gets an eighth more slots than descriptors, the descriptors through
     * worker_rlimit_nofile (a lowering, so unprivileged), and never more slots than the limit itself (nginx warns
     * at start when they exceed the limit it was started with). */
    long share = nofile / workers + FILE_RESERVE;
    long wc = share + share / 8;
    wc = wc > nofile ? nofile : wc;
    wc = wc > WORKER_CONNECTIONS_MAX ? WORKER_CONNECTIONS_MAX : wc;
    out->worker_connections = (int)(wc < 64 ? 64 : wc);
    out->worker_nofile = out->worker_connections - out->worker_connections / 9;
    if (out->worker_nofile > nofile)
        out->worker_nofile = nofile; /* a tiny limit: never ask for more than there is */
    long up = (nofile - FILE_RESERVE) / workers;
    out->upstream_max_conns = (int)(up < 64 ? 64 : up > WORKER_CONNECTIONS_MAX ? WORKER_CONNECTIONS_MAX : up);
    /* every client costs a worker a downstream and (while proxied) an upstream descriptor */
    long per_worker = out->worker_nofile - FILE_RESERVE;
    return per_worker > 0 ? (long)workers * per_worker / 2 : 0;
}

void berth_limits_api_split(const berth_limits_t *l, int idle, int *socket_conns, int *backup_conns)
{
    /* every upstream connection a request holds goes with a downstream one in the same worker; only pooled idle
     * ones stand alone: a worker can never hold more than this many, whatever max_conns says */
    long reach = (l->worker_nofile + idle) / 2;
    int all = l->upstream_max_conns;
    if (reach <= all) {
        *socket_conns = *backup_conns = all;
        return;
    }
    /* a small descriptor limit: both together must stay within berthd's share (past it berthd's accept fails) */
    *backup_conns = all / 8 > 0 ? all / 8 : 1;
    *socket_conns = all - *backup_conns;
}

void berth_limits_init(berth_limits_t *out, int edge_workers)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
        struct rlimit raised = {.rlim_cur = want, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            rl.rlim_cur = want;
    }
    out->nofile = (long)rl.rlim_cur;
    out->nofile_hard = rl.rlim_max == RLIM_INFINITY ? -1 : (long)rl.rlim_max;
    backlog = read_somaxconn();
    out->backlog = backlog;
    long clients = berth_limits_size(out, out->nofile, edge_workers);
    berth_log_info("limits: %ld descriptors (hard %ld), edge worker_connections %d, worker_rlimit_nofile %ld, upstream "
                   "max_conns %d per worker, listen backlog %d (net.core.somaxconn): about %ld clients at once",
                   out->nofile, out->nofile_hard, out->worker_connections, out->worker_nofile, out->upstream_max_conns,
                   out->backlog, clients);
    if (clients < CLIENTS_EXPECTED)
        berth_log_warn("limits: the descriptor limit (ulimit -n / LimitNOFILE=, now %ld) holds about %ld clients at once; "
                       "raise its hard limit to hold more (README, Operations)",
                       out->nofile, clients);
    if (backlog < 4096)
        berth_log_warn("limits: net.core.somaxconn is %d: a burst of new connections beyond it is refused or retried by "
                       "the kernel; raise it (sysctl net.core.somaxconn=4096)",
                       backlog);
}

int berth_limits_backlog(void)
{
    return backlog;
}
