/*
 * The edge: a private nginx that berthd configures, starts and stops. It owns the client-facing socket (TLS,
 * HTTP/2 via ALPN), streams upload bodies unbuffered to the libmicrohttpd server, proxies the rest to h2o, and
 * sends blob files with sendfile once h2o has authorised them (X-Accel-Redirect).
 */
#ifndef BERTH_HTTP_EDGE_H
#define BERTH_HTTP_EDGE_H

#include <sys/types.h>

#include "registry/http/limits.h"

/* Where the edge proxies to berthd's API listener: only a failed connect (the socket's queue full, at once) moves
 * a request to the backup port; one that was sent, or timed out, is never sent again (nginx's default would) */
#define BERTH_EDGE_API_RETRY "proxy_next_upstream error; proxy_next_upstream_timeout 1s;"

/* idle keep-alive connections each nginx worker keeps to berthd's internal listener */
#define BERTH_EDGE_UPSTREAM_IDLE 256

typedef struct st_berth_edge_conf_t {
    const char *nginx;      /* binary */
    const char *run_dir;    /* conf, pid, temp dirs */
    const char *listen;     /* host:port, plain HTTP/1.1 */
    const char *tls_listen; /* host:port or NULL */
    const char *tls_cert, *tls_key;
    const char *blob_root;     /* filesystem driver: <storage>/blobs; NULL with the s3 driver */
    const char *blob_upstream; /* s3 driver: "scheme://host:port" the edge proxies presigned blob URLs to */
    const char *blob_host;     /* s3 driver: the Host header the presigned URLs were signed for */
    int blob_timeout_s;        /* s3 driver: a gateway silent this long answers 503 */
    int blob_tls_verify;       /* s3 driver, https gateway: verify its certificate (storage.s3.tls_verify) */
    const char *blob_ca_file;  /* s3 driver: CA bundle to verify it with (storage.s3.ca_file); NULL: OpenSSL's default */
    const char *blob_prefix;
    const char *blob_head_prefix;  /* s3 driver: berthd's X-Accel-Redirect prefix for a HEAD (never kept by the edge) */
    long long blob_cache_bytes;    /* s3 driver: what the edge keeps of the blobs it proxies, in run_dir/blobcache (0: off) */
    long long blob_cache_min_free; /* ... and the free space it leaves on that file system (-1: min(1 GiB, 2 %)) */
    const char *ui_dir;            /* built web UI served at "/" (registry/http/edge_ui.c), or NULL */
    const char *api_upstream;    /* berthd's internal listeners for nginx's upstream blocks: "unix:<path>" or "127.0.0.1:<port>" */
    const char *api_backup;      /* "": none; else the API's loopback port, used when its socket's queue is full */
    const char *upload_upstream; /* (registry/http/internal_listen.h) */
    int workers;
    int upload_idle_timeout;      /* seconds an upload body may stall before the edge cuts it (uploads.idle_timeout_seconds) */
    int upload_connections;       /* threads of the upload listener (uploads.max_connections) */
    int decision_cache;           /* edge.decision_cache: keep blob decisions about a second (edge_blobs.h) */
    long decision_inodes;         /* edge.decision_inodes: at most this many links and directories for them */
    const berth_limits_t *limits; /* descriptors, worker_connections, backlog */
} berth_edge_conf_t;

/** Write nginx.conf into run_dir and start nginx in the foreground as a child. Returns its pid or -1. */
pid_t berth_edge_start(const berth_edge_conf_t *conf);
/** Ask nginx to finish in-flight requests and exit (SIGQUIT), waiting up to `timeout_s`; then SIGKILL. */
void berth_edge_stop(pid_t pid, int timeout_s);

#endif
