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
    long timeout_s;            /* per request */
} berth_client_conf_t;

typedef struct st_berth_http_t {
    long status;
    char *body; /* NUL-terminated, malloc'd (may be NULL) */
    size_t len;
    char location[2048], content_type[256], digest[160], range[64];
    long long sent; /* request body bytes put on the wire */
} berth_http_t;
void berth_http_dispose(berth_http_t *r);

berth_client_t *berth_client_new(const berth_client_conf_t *conf);
void berth_client_free(berth_client_t *c);

/**
 * One request. `path` is absolute ("/v2/…") or a full URL (upload Locations). `headers` are extra lines ("Accept: …",
 * may be NULL-terminated array or NULL). A 401 with a Bearer challenge is answered once with a token. Returns 0
 * with *out (even for HTTP errors), -1 when the transport failed (connection refused, timeout, reset).
 */
int berth_client_do(berth_client_t *c, const char *method, const char *path, const char *const *headers, const void *body,
                    size_t len, berth_http_t *out);

#endif
