/*
 * Proxy-cache projects (issue #14, Harbor's model): a project created with a registry_id answers a pull it cannot
 * serve by fetching from that endpoint, storing what it fetched through the ordinary paths (manifest store,
 * blob commit: quotas, change events, GC and retention apply), and serving it; later pulls are local.
 *
 * A /v2 handler that lacks something fills a berth_proxy_need_t (v2.c) instead of answering; the caller hands it
 * to berth_proxy_fetch and runs the request again when `done` says so. Fetches run on the proxy's own threads,
 * never on the request workers, and are coalesced: concurrent requests for one manifest or blob share one
 * upstream request in this process (a table of flights) and across every berthd on the database (a session
 * advisory lock, after which the holder finds the work done).
 *
 * Freshness: a tag held locally is compared with the upstream (HEAD) at most every proxy.manifest_ttl seconds;
 * when the upstream fails, is slow or answers 429, the held copy is served (a log line and
 * berth_proxy_stale_served_total). A digest held locally never needs the upstream. Referrers pass through the
 * same way: a referrers request stores the upstream's referrer manifests (at most every TTL) and answers from them.
 */
#ifndef BERTH_SERVICE_PROXY_H
#define BERTH_SERVICE_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/err.h"
#include "core/ref.h"

struct st_berth_registry_t;

typedef enum {
    BERTH_PROXY_NONE = 0,
    BERTH_PROXY_TAG,       /* a manifest by tag: fetched when absent, revalidated when held and older than the TTL */
    BERTH_PROXY_DIGEST,    /* a manifest by digest, absent here */
    BERTH_PROXY_BLOB,      /* a blob, absent from the repository */
    BERTH_PROXY_REFERRERS, /* the referrers of a digest: the upstream's list, at most every TTL; those not held are stored */
    BERTH_PROXY_BLOB_HEAD, /* a HEAD of a blob absent from the repository: the upstream's HEAD, nothing fetched or stored */
} berth_proxy_kind_t;

/** What a request needs from the upstream. Plain data: the request's job carries it to the fetch. */
typedef struct st_berth_proxy_need_t {
    berth_proxy_kind_t kind;
    char repo[BERTH_NAME_MAX + 1]; /* the local repository, "<project>/<upstream name>" */
    char ref[BERTH_REF_MAX + 1];   /* tag or digest */
    long long registry_id;         /* the project's endpoint */
    long speed_kb;                 /* proxy_speed_kb: download cap in KiB/s, <= 0 none */
    char cached[BERTH_DIGEST_MAX]; /* TAG: the digest held now ("" none), served when the upstream fails */
} berth_proxy_need_t;

typedef struct st_berth_proxy_conf_t {
    int workers;      /* proxy.workers: upstream fetches at once (4) */
    int manifest_ttl; /* proxy.manifest_ttl: seconds between upstream checks of a held tag (60) */
} berth_proxy_conf_t;

int berth_proxy_start(struct st_berth_registry_t *reg, const berth_proxy_conf_t *conf, berth_err_t *err);
/** Finish fetches in flight (their waiters get their answer), then join the threads. */
void berth_proxy_stop(void);
/**
 * What an upstream HEAD said of a blob not held here (BERTH_PROXY_BLOB_HEAD): 1 with *size while the answer is
 * younger than proxy.manifest_ttl (*size -1: the upstream answered 404, kept at most 60 s), 0 none. A HEAD is
 * answered from it without asking the upstream or fetching the body.
 */
int berth_proxy_head_lookup(const char *repo, const char *digest, int64_t *size);
/** proxy.manifest_ttl in seconds. */
int berth_proxy_manifest_ttl(void);
/** The name under which the upstream check of `kind` on `ref` is timed (the tag; "referrers/<digest>"); "" none. */
void berth_proxy_check_name(berth_proxy_kind_t kind, const char *ref, char *out, size_t outsz);

/**
 * Called once per request from a proxy thread when the fetch it waited for ended: rc 0 (run the request again:
 * what it needs is here, or the held copy stands), or a negative code with `err` saying what to answer.
 */
typedef void (*berth_proxy_done_fn)(void *ctx, int rc, const berth_err_t *err);

/** Start the fetch `need` names, or join the one in flight. Never blocks on the network or the database. */
void berth_proxy_fetch(const berth_proxy_need_t *need, berth_proxy_done_fn done, void *ctx);

/*
 * Stream while storing: a blob fetch can be read while it grows. The request that started the fetch may ask to
 * stream it; it then gets the stream as soon as the upstream answered 200 (from a proxy thread) and reads the
 * bytes as they land in the store's file, while the others wait for the verified blob. The stream says
 * "complete" only once the digest matched and the blob is stored; a mismatch says "failed" (the reader must
 * abort its response: the client never receives a body that looks complete).
 */
typedef struct st_berth_proxy_stream_t berth_proxy_stream_t;
typedef void (*berth_proxy_start_fn)(void *ctx, berth_proxy_stream_t *s);

/** As berth_proxy_fetch, for a blob; when this request starts the fetch, `start` replaces `done` once bytes come. */
void berth_proxy_fetch_stream(const berth_proxy_need_t *need, berth_proxy_start_fn start, berth_proxy_done_fn done, void *ctx);
/** 0 while bytes arrive, 1 complete (verified and stored), -1 failed. *have: bytes in the file; *total: length, -1 unknown. */
int berth_proxy_stream_state(berth_proxy_stream_t *s, int64_t *have, int64_t *total);
/** A read-only descriptor of the growing file (pread it; owned by the stream). */
int berth_proxy_stream_fd(const berth_proxy_stream_t *s);
const char *berth_proxy_stream_digest(const berth_proxy_stream_t *s);
void berth_proxy_stream_release(berth_proxy_stream_t *s);

typedef struct st_berth_proxy_stats_t {
    uint64_t upstream_requests; /* requests sent to upstreams (HEAD and GET of manifests and blobs) */
    uint64_t upstream_bytes;    /* blob and manifest bytes received */
    uint64_t coalesced;         /* requests that joined a fetch already in flight */
    uint64_t stale_served;      /* held tags served because the upstream failed */
    uint64_t failures;          /* fetches that ended in an error for their requests */
    uint64_t digest_mismatch;   /* upstream content that did not match its digest (nothing stored) */
    uint64_t streamed;          /* requests answered while their blob was still arriving */
} berth_proxy_stats_t;
void berth_proxy_stats(berth_proxy_stats_t *out);

#endif
