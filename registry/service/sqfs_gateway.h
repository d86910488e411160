/*
 * The HPC image gateway (issue 15): each image manifest of a project with metadata.hpc_squashfs = push (on push)
 * or pull (on the first request for its squashfs) is flattened once into a squashfs (registry/gateway/), stored
 * as a blob and attached to the manifest as a referrer artifact (artifactType application/vnd.berth.rootfs.
 * squashfs.v1), and optionally published as <gateway.publish_dir>/<repository>/<digest>.sqsh for jobs to read.
 *
 * The queue is the sqfs_jobs table: `gateway.workers` threads claim jobs FOR UPDATE SKIP LOCKED with a lease they
 * renew while converting, so several berthd on one database convert each manifest once, and a job whose berthd
 * died is taken up again when its lease runs out (at once by the same instance after a restart). Failures of the
 * image itself (a corrupt layer) fail the job with the reason; others are retried with back-off.
 * Change events only queue work in memory; all database and file work happens on the gateway's threads.
 */
#ifndef BERTH_SERVICE_SQFS_GATEWAY_H
#define BERTH_SERVICE_SQFS_GATEWAY_H

#include <stdio.h>

#include "registry/service/events.h"
#include "registry/service/registry.h"

#define BERTH_SQFS_ARTIFACT_TYPE "application/vnd.berth.rootfs.squashfs.v1"

typedef struct st_berth_sqfs_gateway_conf_t {
    const char *publish_dir; /* NULL or "": nothing published */
    const char *compressor;
    int workers, threads, lease_seconds, keep_devices;
    const char *instance; /* this berthd, stable across restarts (host and address) */
} berth_sqfs_gateway_conf_t;

int berth_sqfs_gateway_start(berth_registry_t *reg, const berth_sqfs_gateway_conf_t *conf);
void berth_sqfs_gateway_stop(void);
/** The change-event subscriber: pushes may start conversions, deletions remove jobs and published files. */
void berth_sqfs_gateway_event(const berth_event_t *ev, void *ctx);
/** 0 when `pattern` (metadata.hpc_squashfs_tags, one doublestar pattern; "" = every tag) is well formed. */
int berth_sqfs_gateway_patterns_check(const char *pattern, const char **why);
/**
 * The squashfs job of manifest `digest` in `repo` as JSON (*json malloc'd). When none exists and the project's
 * hpc_squashfs is push or pull, one is queued first (*created = 1). BERTH_ENOTFOUND when none exists and the
 * project's setting is off. Blocking.
 */
int berth_sqfs_gateway_request(berth_dbconn_t *c, const char *repo, const char *digest, char **json, int *created,
                               berth_err_t *err);
/** Prometheus lines (jobs by status, conversions, bytes, seconds). */
void berth_sqfs_gateway_metrics(FILE *f);

#endif
