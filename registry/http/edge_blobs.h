/*
 * The edge's fast path for blob GET/HEAD by digest (issue #18), and for manifests (berth_edge_decisions_keep_manifest
 * below). When berthd has answered such a request with the blob's file, it keeps that decision for about a second (0.5-1 s) as
 * a symbolic link to the file, named after the whole Authorization header, the repository and the digest:
 * <dir>/<bucket>/<repository>/~/<credential>/<hex>. nginx serves a later request with the same credential and URI through that link
 * as a static file (try_files), with no subrequest and no proxied request, so a burst of nodes sharing credentials costs berthd
 * about one request per second per blob and the edge no more memory per client than a static file server. A request that finds no
 * link is proxied to berthd as before, which answers it (refusals included) and keeps the link when it serves the file.
 *
 * The names hold credentials: they live only on a tmpfs (/dev/shm), in a directory of berthd's own (0700), wiped at
 * start and stop; without a tmpfs the fast path is off. The name is built from the header by the same rule on both
 * sides (berth_edge_cred_path and the map of berth_edge_decisions_http), only from characters that cannot form "."
 * or ".." and from no empty segment, so two different credentials never share a name and nothing leaves the
 * directory; a header the rule does not take is always asked of berthd.
 *
 * Lifetime and bounds: links end by the wall clock, not by berthd. They go in bucket directories named for half
 * seconds ("<seconds>a", "<seconds>b"); a link is made in the bucket of now and of the next half second, and nginx
 * looks only in the bucket of its own now (a map of $msec), so a link is found for 0.5-1 s whatever the load and
 * whatever berthd does meanwhile (stopped, frozen). A janitor thread renames the buckets nginx no longer looks in
 * away whole and removes them in the background. A forget renames every bucket away at once (a right taken away) or
 * each bucket's directory of one repository (its content changed), and a decision read before it makes no link after it (the epoch
 * checked under the lock the renames take). Every inode below the buckets is counted, directories too, and none is made past the
 * bound; names deeper than a few components are asked of berthd every time.
 */
#ifndef BERTH_HTTP_EDGE_BLOBS_H
#define BERTH_HTTP_EDGE_BLOBS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* what every proxied request carries to berthd (nginx inherits proxy_set_header only when a level sets none) */
#define BERTH_EDGE_PROXY_HEADERS                                                                                                   \
    "proxy_set_header Connection \"\"; proxy_set_header Host $http_host; proxy_set_header X-Real-IP $remote_addr; "                \
    "proxy_set_header X-Forwarded-Proto $scheme;"

/** A manifest larger than this is always answered by berthd; all kept manifests together take at most
 * BERTH_EDGE_MANIFEST_BYTES of the tmpfs */
#define BERTH_EDGE_MANIFEST_MAX (256 << 10)
#define BERTH_EDGE_MANIFEST_BYTES (16L << 20) /* a container's /dev/shm is often 64 MiB */

/** By default at most this many inodes (links and their directories) at once below the buckets */
#define BERTH_EDGE_DECISIONS_MAX 65536

/**
 * Make an empty private directory for the kept decisions on a tmpfs, named after `run_dir` (so a restart finds
 * and wipes its predecessor's), for links to the files below `blob_root`, at most `max_inodes` inodes below its
 * buckets (<= 0: BERTH_EDGE_DECISIONS_MAX), and start its janitor. 0 when made (berth_edge_decisions_path() names
 * it); -1 when there is no tmpfs or it cannot be made.
 */
int berth_edge_decisions_dir(const char *run_dir, const char *blob_root, long max_inodes);

/** That directory, or NULL when the fast path is off. */
const char *berth_edge_decisions_path(void);

/** Stop the janitor and remove that directory and everything in it (at stop). */
void berth_edge_decisions_remove(void);

/**
 * Void every kept decision at once: called when a right may have been taken away (the moments berthd forgets its
 * own gate decisions). Any thread.
 */
void berth_edge_decisions_forget(void);

/**
 * Void the kept decisions of one repository (NULL: all): called when its content changed, as berthd's read cache
 * forgets it. Every forget voids the decisions read before it from being kept. Any thread.
 */
void berth_edge_decisions_forget_repo(const char *repository);

/** Bytes of the manifests kept now (for /metrics and tests) */
long berth_edge_decisions_bytes(void);

/** The forget epoch: read before a request's decision is, and handed to berth_edge_decisions_keep. */
uint64_t berth_edge_decisions_epoch(void);

/**
 * Keep "the caller with this Authorization header (NULL: none) may read blob `digest` of `repository`": called
 * once berthd has answered a GET/HEAD of it with its file, `decided` being berth_edge_decisions_epoch() as it was
 * before that answer was decided. Does nothing when the fast path is off, a forget came since `decided`, the
 * header or the names fall outside the rule or are too deep, or the bound would be passed. Any thread; never
 * blocks on a disk (it may wait the microseconds of a rotation's renames).
 */
void berth_edge_decisions_keep(const char *authorization, const char *repository, const char *digest, uint64_t decided);

/**
 * Keep "the caller with this Authorization header may read manifest `ref` (a tag or a digest) of `repository`":
 * called once berthd has answered a GET of it with `content`, `media_type` and `digest`, for the caller named
 * `who` ("" anonymous), `decided` as for berth_edge_decisions_keep. The edge then answers this caller's GET and
 * HEAD of it from the tmpfs for 0.625-1.25 s, and logs each GET it answers so berthd's audit log has it
 * (registry/http/edge_pulls.h). Only single manifests of the common media types are kept (an index depends on the
 * client's Accept header); a change of the repository, as for blobs, forgets them at once.
 */
void berth_edge_decisions_keep_manifest(const char *authorization, const char *repository, const char *ref, const char *digest,
                                        const char *media_type, const char *who, const char *content, size_t len, uint64_t decided);

/**
 * The part of a link's name that the Authorization header gives, as the edge's map builds it: "-" for none,
 * "b/<value>" for Basic, "t/<value in NAME_MAX-character pieces>" for a Bearer token shaped like a JWT. 0 with `out`
 * filled, -1 when the edge does not take this header (it then always asks berthd).
 */
int berth_edge_cred_path(const char *authorization, char *out, size_t cap);

/** The http-level lines: the map that turns the Authorization header into that part of a name. */
void berth_edge_decisions_http(FILE *f);

/**
 * The server-level locations: blob and manifest GET/HEAD served through a kept decision in `dir` (manifest GETs
 * so answered logged to `pulls_log`, edge_pulls.h), and @berth_api, the normal proxied path everything else
 * falls back to.
 */
void berth_edge_decisions_locations(FILE *f, const char *dir, const char *pulls_log);

/** The headers of a blob sent from a file, its digest taken from nginx variable `digest_var` (with the '$'). */
void berth_edge_blob_headers(FILE *f, const char *digest_var);

#endif
