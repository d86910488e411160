#include "registry/http/memory.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bgloop.h"
#include "core/err.h"

extern char **environ;

#define EDGE_TUNABLES "glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0"

char *const *berth_memory_edge_env(void)
{
    static char **env;
    if (env != NULL)
        return env;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **e = calloc(n + 2, sizeof(*e));
    if (e == NULL)
        return environ; /* nginx then runs with glibc's defaults: more memory kept after a burst, nothing else */
    size_t k = 0;
    const char *theirs = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "GLIBC_TUNABLES=", 15) == 0)
            theirs = environ[i] + 15;
        else
            e[k++] = environ[i];
    }
    size_t len = strlen("GLIBC_TUNABLES=" EDGE_TUNABLES) + (theirs != NULL ? strlen(theirs) + 2 : 1);
    char *t = malloc(len);
    if (t == NULL) {
        free(e);
        return environ;
    }
    snprintf(t, len, "GLIBC_TUNABLES=%s%s%s", EDGE_TUNABLES, theirs != NULL ? ":" : "", theirs != NULL ? theirs : "");
    e[k++] = t;
    e[k] = NULL;
    env = e;
    return env;
}

static berth_bgloop_t *loop;

static void trim_tick(void *data, int stopping)
{
    (void)data;
    if (!stopping)
        malloc_trim(0);
}

int berth_memory_trim_start(long interval_ms)
{
    return berth_bgloop_start(&loop, "berth-trim", interval_ms, trim_tick, NULL) == 0 ? 0 : BERTH_ERROR;
}

void berth_memory_trim_stop(void)
{
    berth_bgloop_stop(loop);
    loop = NULL;
}
