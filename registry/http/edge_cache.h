/*
 * The edge's kept blob slices (storage.s3.edge_cache_bytes, edge.c) of blobs that are gone. berthd never lets the
 * edge send them (a request is decided before the edge looks at its cache), but their bytes would stay on the disk
 * until nginx evicts them; after a blob is deleted and collected, an operator expects its bytes gone from every
 * instance. Each instance's janitor reads the key nginx writes into every cache file ("KEY: " + the object's path
 * + the slice's range), asks the database which of those blobs have no row any more, and empties their files (the
 * bytes go; nginx evicts the entries later, edge_cache.c says why they are not removed).
 */
#ifndef BERTH_HTTP_EDGE_CACHE_H
#define BERTH_HTTP_EDGE_CACHE_H

#include <stddef.h>

#include "sql/db.h"

/** The blob a cache file holds a slice of, from its key: "<alg>:<hex>" into out. 0, or -1 when it holds none. */
int berth_edge_cache_file_digest(const char *path, char *out, size_t outsz);

/** Empty the files under `dir` (nginx's levels=1:2 tree) whose blob has no row. Returns the count emptied. */
int berth_edge_cache_forget_gone(const char *dir, berth_dbconn_t *c);

#endif
