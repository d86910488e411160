/*
 * Which requests came through this berthd's own edge. Only those may say who the client is (X-Real-IP: the log-in
 * back-off, the upload limits per address and the audit log read it) and how it came (X-Forwarded-Proto: the 401
 * challenge's realm). The internal listeners are Unix sockets only berthd's user opens, but the API listener's
 * backup port (internal_listen.h) is a loopback port any local process can reach; the edge adds a
 * secret drawn at every start (proxy_set_header replaces whatever a client sent under that name), and a request
 * without it is taken as the local caller it is.
 */
#ifndef BERTH_HTTP_EDGE_TRUST_H
#define BERTH_HTTP_EDGE_TRUST_H

#include <stddef.h>

#define BERTH_EDGE_TRUST_HEADER "X-Berth-Edge"

/** Draw the secret (once; later calls keep it). 0, or -1 when no random bytes could be had. */
int berth_edge_trust_init(void);
/** The secret as the edge sends it (hex), for its configuration; "" before berth_edge_trust_init. */
const char *berth_edge_trust_secret(void);
/** 1 if `value` (`len` bytes, NULL for a missing header) is the secret, compared in constant time. */
int berth_edge_trusted(const char *value, size_t len);

#endif
