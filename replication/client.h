/*
 * An OCI distribution client on libcurl (Debian): Basic credentials or the Docker token dance, TLS with a CA
 * file or insecure, a bandwidth cap. One client per transfer thread; blocking.
 */
#ifndef BERTH_REPLICATION_CLIENT_H
#define BERTH_REPLICATION_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_berth_client_t berth_client_t;

typedef struct st_berth_client_conf_t {
    const char *url; /* base, e.g. http://10.77.9.2:5000 */
    const char *user, *password;
    int insecure;
    const char *ca_file;
    long max_send_bytes_per_s; /* 0: unlimited */
    long max_recv_bytes_per_s; /* 0: unlimited (proxy_speed_kb) */
    long timeout_s;            /* per request; -1: none (a stalled transfer still fails within seconds) */
    size_t max_body;           /* answers kept in memory (not a sink's) above this are cut (too_big); 0: 64 MiB */
} berth_client_conf_t;

typedef struct st_berth_http_t {
    long status;
    char *body; /* NUL-terminated, malloc'd (may be NULL) */
    size_t len;
    char location[2048], content_type[256], digest[160], range[64];
    long long sent;           /* request body bytes put on the wire */
    long long content_length; /* the answer's Content-Length (a HEAD's too), -1 unknown */
    int too_big;              /* the body passed the client's max_body: the transfer was cut (the call failed) */
} berth_http_t;
void berth_http_dispose(berth_http_t *r);

berth_client_t *berth_client_new(const berth_client_conf_t *conf);
void berth_client_free(berth_client_t *c);

/*
 * Bearer tokens are kept process-wide per credential, registry, repository and kind of access (read or write)
 * until their expires_in runs out, so the next request for that scope, from any client, skips the token server.
 */

/**
 * One request. `path` is absolute ("/v2/…") or a full URL (upload Locations). `headers` are extra lines ("Accept: …",
 * may be NULL-terminated array or NULL). A 401 with a Bearer challenge is answered once with a token. Returns 0
 * with *out (even for HTTP errors), -1 when the transport failed (connection refused, timeout, reset).
 */
int berth_client_do(berth_client_t *c, const char *method, const char *path, const char *const *headers, const void *body,
                    size_t len, berth_http_t *out);

/** Receives a 2xx response body as it arrives (`total`: its Content-Length, -1 unknown); 0 to go on, -1 to abort. */
typedef int (*berth_client_sink_fn)(void *ctx, const char *data, size_t len, int64_t total);

/**
 * A GET whose 2xx body goes to `sink` instead of out->body (other answers are kept in out->body as usual).
 * Redirects are followed (registries send blobs from elsewhere). Returns as berth_client_do; -1 also when the
 * sink aborted.
 */
int berth_client_get_to(berth_client_t *c, const char *path, const char *const *headers, berth_client_sink_fn sink, void *ctx,
                        berth_http_t *out);

#endif
