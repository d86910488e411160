/* One squashfs conversion job of the gateway (sqfs_gateway.h), from a claimed sqfs_jobs row to its end. */
#ifndef BERTH_SERVICE_SQFS_JOB_H
#define BERTH_SERVICE_SQFS_JOB_H

#include <stdint.h>

#include "core/digest.h"
#include "registry/service/sqfs_gateway.h"

typedef struct st_berth_sqfs_job_t {
    long long id;
    char repo[256];
    char digest[BERTH_DIGEST_MAX];
    int attempts;
} berth_sqfs_job_t;

/** Figures for /metrics, summed over every job this process ran. */
typedef struct st_berth_sqfs_job_totals_t {
    uint64_t done, failed, retried, bytes_in, bytes_out;
    double seconds;
    uint64_t running;
} berth_sqfs_job_totals_t;

/**
 * Convert, store, attach, publish and record the job (status done, failed with the reason, or queued again).
 * `stopping(data)` is polled between steps and during the conversion: nonzero gives the job back (queued).
 */
void berth_sqfs_job_run(berth_registry_t *reg, const berth_sqfs_gateway_conf_t *conf, const berth_sqfs_job_t *job,
                        int (*stopping)(void *), void *stop_data);
/** "<publish_dir>/<repo>/<digest>.sqsh"; 0, or BERTH_ETOOBIG when it does not fit. */
int berth_sqfs_job_publish_path(const char *publish_dir, const char *repo, const char *digest, char *out, size_t outsz);
void berth_sqfs_job_totals(berth_sqfs_job_totals_t *out);

#endif
