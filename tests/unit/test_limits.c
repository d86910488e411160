/*
 * The edge's sizing from the descriptor limit (registry/http/limits.c), for the limits operators run with: nginx
 * must start without its "worker_connections exceed open file resource limit" warning (slots ≤ the limit it
 * inherits), a worker's descriptors must run out while more than 1/16 of its slots are free (below that nginx
 * closes keep-alive clients to reuse slots, and a request on its way sees a reset), and a worker must never ask
 * for more descriptors than the hard limit allows an unprivileged process.
 */
#include "registry/http/limits.h"
#include "tests/unit/tap.h"

int main(void)
{
    static const long nofiles[] = {1024, 4096, 20000, 65536, 100000, 1048576};
    static const int workers[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof(nofiles) / sizeof(nofiles[0]); i++) {
        for (size_t w = 0; w < sizeof(workers) / sizeof(workers[0]); w++) {
            berth_limits_t l = {0};
            long nofile = nofiles[i];
            long clients = berth_limits_size(&l, nofile, workers[w]);
            ok(l.worker_connections <= nofile, "nofile %ld, %d workers: worker_connections %d within the limit", nofile, workers[w],
               l.worker_connections);
            ok(l.worker_nofile <= nofile, "worker_rlimit_nofile %ld needs no privilege", l.worker_nofile);
            ok(l.worker_connections - l.worker_nofile > l.worker_connections / 16,
               "descriptors (%ld) run out while more than 1/16 of %d slots are free", l.worker_nofile, l.worker_connections);
            ok(l.upstream_max_conns >= 64 && (long)l.upstream_max_conns * workers[w] <= nofile,
               "upstream max_conns %d per worker keeps berthd within its limit", l.upstream_max_conns);
            int sock = 0, backup = 0;
            berth_limits_api_split(&l, 320, &sock, &backup);
            long reach = (l.worker_nofile + 320) / 2; /* the most upstream connections a worker can hold */
            ok(sock > 0 && backup > 0 && (reach <= l.upstream_max_conns || sock + backup <= l.upstream_max_conns),
               "API socket %d + backup %d: a worker stays within berthd's share %d (it can hold %ld)", sock, backup,
               l.upstream_max_conns, reach);
            ok(clients >= 0 && clients * 2 <= (long)workers[w] * l.worker_nofile, "about %ld clients at once", clients);
        }
    }
    /* the figure the 10,000-client burst runs with: 20,000 descriptors, 2 workers hold it */
    berth_limits_t l = {0};
    ok(berth_limits_size(&l, 20000, 2) >= 10000, "20,000 descriptors and 2 workers hold a 10,000-client burst");
    /* a burst past the socket's queue (somaxconn) goes to the backup port: at 20,000 descriptors it may take all
     * a worker's upstream connections (an eighth of them was too few: 503s in a 9,000-client burst under ASan) */
    int sock = 0, backup = 0;
    berth_limits_api_split(&l, 320, &sock, &backup);
    ok(backup == l.upstream_max_conns && sock == l.upstream_max_conns, "20,000 descriptors: socket %d, backup %d", sock, backup);
    berth_limits_size(&l, 2048, 2);
    berth_limits_api_split(&l, 320, &sock, &backup);
    ok(sock + backup <= l.upstream_max_conns && backup >= l.upstream_max_conns / 8,
       "2,048 descriptors: socket %d + backup %d share %d", sock, backup, l.upstream_max_conns);
    return tap_done();
}
