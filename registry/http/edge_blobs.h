/*
 * The edge's fast path for blob GET/HEAD by digest (issue #18): nginx asks berthd whether this credential may
 * read this blob with a HEAD subrequest (auth_request) and keeps a positive answer for about a second, keyed on
 * the Authorization header, the method and the raw URI, so a burst of nodes sharing credentials costs berthd one
 * question per second per blob instead of one proxied request each. Only content-addressed blob paths take it,
 * never manifests or tags; a refusal, an error or an answer that names no file is never kept and is answered by
 * the normal proxied path, so clients see exactly what berthd says. The kept answers are files whose header holds
 * the key (the credential): they live only on a tmpfs (/dev/shm), in a directory of berthd's own, wiped at start
 * and stop; without a tmpfs the fast path is off. Whenever berthd forgets its own decisions or a repository's cached
 * answers, the kept decisions are voided too, so a revocation or a blob DELETE is seen at once (a decision read
 * just before it and stored just after lives at most its 1-2 s).
 */
#ifndef BERTH_HTTP_EDGE_BLOBS_H
#define BERTH_HTTP_EDGE_BLOBS_H

#include <stddef.h>
#include <stdio.h>

/* what every proxied request carries to berthd (nginx inherits proxy_set_header only when a level sets none); a
 * client's X-Berth-Decision is dropped, only the decision subrequest sends one */
#define BERTH_EDGE_PROXY_HEADERS                                                                                                   \
    "proxy_set_header Connection \"\"; proxy_set_header Host $http_host; proxy_set_header X-Real-IP $remote_addr; "                \
    "proxy_set_header X-Forwarded-Proto $scheme; proxy_set_header X-Berth-Decision \"\";"

/** Seconds a positive decision is kept by the edge (nginx counts whole seconds: an entry lives 1–2 s) */
#define BERTH_EDGE_DECISION_SECONDS 1

/**
 * Make an empty private directory for the kept decisions on a tmpfs, named after `run_dir` (so a restart finds
 * and wipes its predecessor's). 0 when made (berth_edge_decisions_path() names it); -1 when there is no tmpfs or
 * it cannot be made.
 */
int berth_edge_decisions_dir(const char *run_dir);

/** That directory, or NULL when the fast path is off. */
const char *berth_edge_decisions_path(void);

/** Remove that directory and everything in it (at stop). */
void berth_edge_decisions_remove(void);

/**
 * Void every kept decision at once: called when a right may have been taken away or a repository's content
 * changed (the same moments berthd forgets its own gate decisions and read cache). Any thread.
 */
void berth_edge_decisions_forget(void);

/**
 * The http-level lines: the cache zone in `dir` and the maps the locations use. `blob_prefix` is berthd's
 * X-Accel-Redirect prefix ("/_berth/blobs/": letters, '_' and '/', no regex character).
 */
void berth_edge_decisions_http(FILE *f, const char *dir, const char *blob_prefix);

/**
 * The server-level locations: blob GET/HEAD by digest served from `blob_root` after a kept or fresh decision,
 * the decision subrequest, and @berth_api, the normal proxied path everything else falls back to.
 */
void berth_edge_decisions_locations(FILE *f, const char *blob_root);

/** The headers of a blob sent from a file, its digest taken from nginx variable `digest_var` (with the '$'). */
void berth_edge_blob_headers(FILE *f, const char *digest_var);

#endif
