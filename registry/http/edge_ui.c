#include "registry/http/edge_ui.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "registry/http/edge.h"

/* Everything berthd answers itself; the UI never shadows these (issue #11: they keep working exactly as now). */
#define BACKEND_PREFIXES "^/(v2|api|c|service|metrics)(/|$)"

/*
 * No inline script or style anywhere: the bundle is one module plus its chunks and one stylesheet. Inline style
 * *attributes* set through the DOM (CSSOM) are not governed by style-src, which is what charts use.
 */
#define CSP                                                                                                                        \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "                    \
    "font-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

/* add_header in a location replaces every inherited one, so each UI location repeats the security headers */
#define SECURITY_HEADERS                                                                                                           \
    "      add_header Content-Security-Policy \"" CSP "\" always;\n"                                                               \
    "      add_header X-Frame-Options DENY always;\n"                                                                              \
    "      add_header Referrer-Policy same-origin always;\n"                                                                       \
    "      add_header X-Content-Type-Options nosniff always;\n"

/* the generated nginx.conf includes no mime.types of the host's: the UI needs only these */
#define UI_TYPES                                                                                                                   \
    "      types { text/html html; text/css css; text/javascript js; image/svg+xml svg; application/json json; }\n"                \
    "      default_type application/octet-stream;\n"                                                                               \
    "      gzip_static on; gzip_vary on; etag on;\n"

void berth_edge_ui_locations(FILE *f, const char *ui_dir)
{
    if (ui_dir == NULL || ui_dir[0] == '\0') {
        fprintf(f, "    location / { proxy_pass http://berth_api; proxy_read_timeout 300s; " BERTH_EDGE_API_RETRY " }\n");
        return;
    }
    fprintf(f,
            "    location ~ " BACKEND_PREFIXES " { proxy_pass http://berth_api; proxy_read_timeout 300s; " BERTH_EDGE_API_RETRY
            " }\n"
            /* names carry a content hash: a new build is a new name, so the old one may be cached for ever */
            "    location ^~ /assets/ {\n"
            "      root %s;\n" UI_TYPES "      try_files $uri =404;\n"
            "      add_header Cache-Control \"public, max-age=31536000, immutable\" always;\n" SECURITY_HEADERS "    }\n"
            /* client-side routes (/projects/x/…) are index.html, which is revalidated so a deploy shows at once */
            "    location / {\n"
            "      root %s;\n" UI_TYPES "      try_files $uri /index.html;\n"
            "      add_header Cache-Control \"no-cache\" always;\n" SECURITY_HEADERS "    }\n",
            ui_dir, ui_dir);
}

int berth_edge_ui_check(const char *ui_dir, char *errbuf, size_t errlen)
{
    if (ui_dir == NULL || ui_dir[0] == '\0')
        return 0;
    char path[4096];
    /* nginx.conf cannot quote everything: refuse what would break its syntax */
    if (ui_dir[0] != '/' || strpbrk(ui_dir, " \t\n;{}\"'$\\") != NULL) {
        snprintf(errbuf, errlen, "ui.dir must be an absolute path without spaces, quotes, ';', '{', '}' or '$': %s", ui_dir);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/index.html", ui_dir);
    if (access(path, R_OK) != 0) {
        snprintf(errbuf, errlen, "ui.dir %s holds no index.html (%s); build it with webui/build.sh", ui_dir, strerror(errno));
        return -1;
    }
    return 0;
}
