/*
 * libmicrohttpd server for the upload routes (/v2/<name>/blobs/uploads/...). h2o 2.2.5 buffers whole request
 * bodies before any handler runs (docs/design.md); libmicrohttpd hands us each piece as it
 * arrives, so checks happen before the body is read and bytes are hashed and written once, in O(1) memory.
 * One thread per connection: the blocking work of an upload (disk, SQL) is that thread's alone.
 */
#ifndef BERTH_HTTP_UPLOAD_SERVER_H
#define BERTH_HTTP_UPLOAD_SERVER_H

#include "registry/service/registry.h"

typedef struct st_berth_upload_server_t berth_upload_server_t;

/** Serve uploads on the listening descriptor `fd` (registry/http/internal_listen.h), which the server owns from here. */
int berth_upload_server_start(berth_upload_server_t **out, berth_registry_t *reg, unsigned max_connections, unsigned idle_timeout,
                              int fd);
/** Stop accepting and wait for running uploads to end. */
void berth_upload_server_stop(berth_upload_server_t *s);

#endif
