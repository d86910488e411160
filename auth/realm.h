/*
 * The token realm a 401 challenge names. berthd answers behind its own edge on several addresses (plain HTTP,
 * TLS) and under whatever name clients use, so the realm follows the scheme and Host the client used: a client
 * on https is never sent to http to hand over its password. An operator's external_url stands, except that it
 * never downgrades an https client.
 */
#ifndef BERTH_AUTH_REALM_H
#define BERTH_AUTH_REALM_H

#include <stddef.h>

#include "core/resp.h"

/** Whether external_url was configured (1) or is berthd's default http://<http.addr> (0). Call once at start. */
void berth_realm_configure(int external_url_set);
/**
 * Rewrite the realm of a 401 response's Bearer challenge for a client that came with `proto` ("https" or
 * "http", X-Forwarded-Proto from the edge) and `host` (its Host header); either may be NULL. Other responses,
 * and hosts that are not a plain host[:port], are left alone.
 */
void berth_realm_for_client(berth_resp_t *resp, const char *proto, size_t proto_len, const char *host, size_t host_len);

#endif
