#include "registry/http/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/audit.h"
#include "auth/password.h"
#include "registry/http/access_log.h"
#include "registry/http/edge_blobs.h"
#include "registry/http/edge_pulls.h"
#include "registry/service/cache.h"
#include "registry/service/gc.h"
#include "registry/service/proxy.h"
#include "registry/service/sqfs_gateway.h"
#include "registry/service/upload.h"

enum { M_GET, M_HEAD, M_PUT, M_POST, M_PATCH, M_DELETE, M_OTHER, M__COUNT };
static const char *method_names[M__COUNT] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OTHER"};
static const int statuses[] = {200, 201, 202, 204, 206, 304, 400, 401, 403, 404, 405, 413, 416, 429, 500, 503, 507};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]) + 1) /* last slot: any other */

static uint64_t requests[BERTH_ROUTE__COUNT][M__COUNT][NSTATUS];
static uint64_t bytes_in_total, bytes_out_total;

static int method_index(const char *m)
{
    for (int i = 0; i < M_OTHER; i++)
        if (strcmp(m, method_names[i]) == 0)
            return i;
    return M_OTHER;
}

static size_t status_index(int status)
{
    for (size_t i = 0; i + 1 < NSTATUS; i++)
        if (statuses[i] == status)
            return i;
    return NSTATUS - 1;
}

void berth_metrics_request(berth_route_kind_t route, const char *method, int status, uint64_t bytes_in, uint64_t bytes_out)
{
    if (route >= BERTH_ROUTE__COUNT)
        route = BERTH_ROUTE_NONE;
    __atomic_add_fetch(&requests[route][method_index(method)][status_index(status)], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bytes_in_total, bytes_in, __ATOMIC_RELAXED);
    __atomic_add_fetch(&bytes_out_total, bytes_out, __ATOMIC_RELAXED);
}

static uint64_t auth_shed_total;

void berth_metrics_auth_shed(void)
{
    __atomic_add_fetch(&auth_shed_total, 1, __ATOMIC_RELAXED);
}

char *berth_metrics_render(berth_db_t *db, berth_store_t *store, long worker_queue, long auth_queue, size_t *len_out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "# HELP berth_http_requests_total Requests answered by berthd, by route, method and status.\n"
               "# TYPE berth_http_requests_total counter\n");
    for (int r = 0; r < BERTH_ROUTE__COUNT; r++)
        for (int m = 0; m < M__COUNT; m++)
            for (size_t s = 0; s < NSTATUS; s++) {
                uint64_t v = __atomic_load_n(&requests[r][m][s], __ATOMIC_RELAXED);
                if (v == 0)
                    continue;
                char st[8];
                if (s + 1 < NSTATUS)
                    snprintf(st, sizeof(st), "%d", statuses[s]);
                else
                    snprintf(st, sizeof(st), "other");
                fprintf(f, "berth_http_requests_total{route=\"%s\",method=\"%s\",status=\"%s\"} %llu\n",
                        berth_route_label((berth_route_kind_t)r), method_names[m], st, (unsigned long long)v);
            }
    fprintf(f, "# TYPE berth_http_received_bytes_total counter\nberth_http_received_bytes_total %llu\n",
            (unsigned long long)__atomic_load_n(&bytes_in_total, __ATOMIC_RELAXED));
    fprintf(f, "# TYPE berth_http_sent_bytes_total counter\nberth_http_sent_bytes_total %llu\n",
            (unsigned long long)__atomic_load_n(&bytes_out_total, __ATOMIC_RELAXED));
    fprintf(f,
            "# HELP berth_audit_dropped_total Audit events lost (queue full or database unreachable).\n"
            "# TYPE berth_audit_dropped_total counter\nberth_audit_dropped_total %lu\n",
            berth_audit_dropped());
    fprintf(f,
            "# HELP berth_edge_manifest_pulls_total Manifest GETs the edge answered from a kept decision (read from its log).\n"
            "# TYPE berth_edge_manifest_pulls_total counter\nberth_edge_manifest_pulls_total %lu\n"
            "# HELP berth_edge_kept_manifest_bytes Bytes of manifests the edge holds for kept decisions.\n"
            "# TYPE berth_edge_kept_manifest_bytes gauge\nberth_edge_kept_manifest_bytes %ld\n",
            berth_edge_pulls_read(), berth_edge_decisions_bytes());
    fprintf(f,
            "# HELP berth_upload_streams Upload requests currently streaming a body.\n"
            "# TYPE berth_upload_streams gauge\nberth_upload_streams %ld\n",
            berth_upload_active());
    fprintf(f,
            "# HELP berth_upload_hash_states Upload sessions whose running hash is held in memory.\n"
            "# TYPE berth_upload_hash_states gauge\nberth_upload_hash_states %ld\n",
            berth_upload_hash_states());
    fprintf(f, "# TYPE berth_worker_queue gauge\nberth_worker_queue %ld\n", worker_queue);
    berth_sqfs_gateway_metrics(f);
    fprintf(f,
            "# HELP berth_auth_queue Requests waiting for an auth worker (password hashing, LDAP).\n"
            "# TYPE berth_auth_queue gauge\nberth_auth_queue %ld\n"
            "# HELP berth_auth_shed_total Requests answered 503 because the auth workers' queue was full.\n"
            "# TYPE berth_auth_shed_total counter\nberth_auth_shed_total %llu\n",
            auth_queue, (unsigned long long)__atomic_load_n(&auth_shed_total, __ATOMIC_RELAXED));
    uint64_t argon2, remembered;
    berth_password_stats(&argon2, &remembered);
    fprintf(f,
            "# HELP berth_password_verifications_total Local passwords verified: with argon2, or as a pair that "
            "argon2 verified within the hour.\n"
            "# TYPE berth_password_verifications_total counter\n"
            "berth_password_verifications_total{by=\"argon2\"} %llu\n"
            "berth_password_verifications_total{by=\"remembered\"} %llu\n",
            (unsigned long long)argon2, (unsigned long long)remembered);
    fprintf(f, "# TYPE berth_access_log_dropped_total counter\nberth_access_log_dropped_total %lu\n", berth_access_log_dropped());
    uint64_t hits, misses;
    int cache_on;
    berth_cache_stats(&hits, &misses, &cache_on);
    fprintf(f,
            "# HELP berth_cache_hits_total Manifest and blob lookups answered from the read cache.\n"
            "# TYPE berth_cache_hits_total counter\nberth_cache_hits_total %llu\n"
            "# TYPE berth_cache_misses_total counter\nberth_cache_misses_total %llu\n"
            "# HELP berth_cache_enabled 1 while invalidations from PostgreSQL are being received.\n"
            "# TYPE berth_cache_enabled gauge\nberth_cache_enabled %d\n",
            (unsigned long long)hits, (unsigned long long)misses, cache_on);
    berth_proxy_stats_t px;
    berth_proxy_stats(&px);
    fprintf(f,
            "# HELP berth_proxy_upstream_requests_total Requests proxy-cache projects sent to their upstreams.\n"
            "# TYPE berth_proxy_upstream_requests_total counter\nberth_proxy_upstream_requests_total %llu\n"
            "# TYPE berth_proxy_upstream_bytes_total counter\nberth_proxy_upstream_bytes_total %llu\n"
            "# HELP berth_proxy_coalesced_total Pulls that joined an upstream fetch already in flight.\n"
            "# TYPE berth_proxy_coalesced_total counter\nberth_proxy_coalesced_total %llu\n"
            "# HELP berth_proxy_stale_served_total Held tags served because the upstream was down, slow or refused.\n"
            "# TYPE berth_proxy_stale_served_total counter\nberth_proxy_stale_served_total %llu\n"
            "# TYPE berth_proxy_fetch_failures_total counter\nberth_proxy_fetch_failures_total %llu\n"
            "# HELP berth_proxy_digest_mismatch_total Upstream content refused because it did not match its digest.\n"
            "# TYPE berth_proxy_digest_mismatch_total counter\nberth_proxy_digest_mismatch_total %llu\n"
            "# HELP berth_proxy_streamed_total Blob pulls answered while the blob was still arriving from the upstream.\n"
            "# TYPE berth_proxy_streamed_total counter\nberth_proxy_streamed_total %llu\n",
            (unsigned long long)px.upstream_requests, (unsigned long long)px.upstream_bytes, (unsigned long long)px.coalesced,
            (unsigned long long)px.stale_served, (unsigned long long)px.failures, (unsigned long long)px.digest_mismatch,
            (unsigned long long)px.streamed);
    if (db != NULL) {
        int size, in_use;
        unsigned long waits, errors;
        berth_db_stats(db, &size, &in_use, &waits, &errors);
        fprintf(f,
                "# TYPE berth_db_pool_size gauge\nberth_db_pool_size %d\n"
                "# TYPE berth_db_pool_in_use gauge\nberth_db_pool_in_use %d\n"
                "# TYPE berth_db_pool_waits_total counter\nberth_db_pool_waits_total %lu\n"
                "# TYPE berth_db_connect_errors_total counter\nberth_db_connect_errors_total %lu\n",
                size, in_use, waits, errors);
        int down;
        unsigned long timeouts;
        berth_db_health(db, &down, &timeouts);
        fprintf(f,
                "# HELP berth_db_down 1 while the database misses its deadline and requests that need it get 503.\n"
                "# TYPE berth_db_down gauge\nberth_db_down %d\n"
                "# HELP berth_db_deadline_exceeded_total Round trips dropped at database.deadline_ms.\n"
                "# TYPE berth_db_deadline_exceeded_total counter\nberth_db_deadline_exceeded_total %lu\n",
                down, timeouts);
    }
    berth_gc_metrics(f);
    /* statvfs on the loop: a local metadata call; a storage file system that hangs it has stopped blob GETs
     * through the edge as well, so there is nothing left for the loop to serve meanwhile */
    berth_store_space_t sp;
    if (store != NULL && berth_store_space(store, &sp) == 0)
        fprintf(f,
                "# HELP berth_storage_free_bytes Space available to berthd on the storage file system.\n"
                "# TYPE berth_storage_free_bytes gauge\nberth_storage_free_bytes %lld\n"
                "# TYPE berth_storage_total_bytes gauge\nberth_storage_total_bytes %lld\n"
                "# HELP berth_storage_reserve_bytes storage.min_free_bytes in effect.\n"
                "# TYPE berth_storage_reserve_bytes gauge\nberth_storage_reserve_bytes %lld\n"
                "# HELP berth_storage_below_reserve 1 while new uploads are refused for lack of space.\n"
                "# TYPE berth_storage_below_reserve gauge\nberth_storage_below_reserve %d\n",
                (long long)sp.free_bytes, (long long)sp.total_bytes, (long long)sp.reserve_bytes, sp.below_reserve);
    fclose(f);
    *len_out = len;
    return buf;
}
