/*
 * The web UI's part of the edge's nginx.conf: with a UI directory, the backend's prefixes (/v2, /api, /c,
 * /service, /metrics) are proxied as before and every other path is the single-page app — hashed assets cached
 * forever, index.html revalidated, precompressed .gz files, client-side routes answered with index.html, and
 * a strict Content-Security-Policy. Without one, "/" is proxied as it always was.
 */
#ifndef BERTH_HTTP_EDGE_UI_H
#define BERTH_HTTP_EDGE_UI_H

#include <stdio.h>

/** Write the `location` blocks for "/" into an nginx server block. `ui_dir` may be NULL or "" (no UI). */
void berth_edge_ui_locations(FILE *f, const char *ui_dir);

/** 0 if `ui_dir` holds a built UI (index.html), else -1 with a reason in errbuf. */
int berth_edge_ui_check(const char *ui_dir, char *errbuf, size_t errlen);

#endif
