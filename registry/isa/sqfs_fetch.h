/* berth-isa resolve --squashfs: a node's path to an image build's squashfs (issue 15, the gateway's node side). */
#ifndef BERTH_ISA_SQFS_FETCH_H
#define BERTH_ISA_SQFS_FETCH_H

#include "replication/client.h"

/**
 * Print the path of the squashfs of manifest `digest` in repository `name` ("project/repo"): the file Berth
 * published (gateway.publish_dir) when this node sees it whole, else a download into `cache` (NULL:
 * $BERTH_SQFS_CACHE or /var/tmp/berth-sqfs) named <digest>.sqsh — resumed with Range from a partial file, the
 * blob digest verified, renamed into place atomically. Waits up to `wait` seconds (NULL: 600) while the
 * conversion is queued or running. Exit codes: 0, 1 transport or I/O, 4 the conversion failed, 5 the project
 * converts nothing.
 */
int berth_isa_squashfs(berth_client_t *client, const char *name, const char *digest, const char *cache, const char *wait);

#endif
