#include "registry/http/edge_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/log.h"
#include "registry/service/gc.h"

#define BATCH 500 /* digests per question to the database */

typedef struct {
    char digest[BERTH_DIGEST_MAX];
    char name[40]; /* "<c>/<cc>/<32 hex>" under the cache directory: 8 GiB of small blobs is ~40,000 files */
} slice_t;

typedef struct {
    slice_t *v;
    size_t n, cap;
} slices_t;

int berth_edge_cache_file_digest(const char *path, char *out, size_t outsz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[4096]; /* nginx's binary header, then "\nKEY: <key>\n", then the response's headers */
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n <= 0)
        return -1;
    const char *k = memmem(buf, (size_t)n, "\nKEY: ", 6);
    const char *end = k != NULL ? memchr(k + 6, '\n', (size_t)(buf + n - (k + 6))) : NULL;
    if (end == NULL)
        return -1;
    /* the key: the object's path ("…/blobs/<alg>/<ab>/<hex>", store_s3.c's blob_key) and "bytes=<from>-<to>" */
    char key[1024];
    size_t kl = (size_t)(end - (k + 6));
    if (kl >= sizeof(key))
        return -1;
    memcpy(key, k + 6, kl);
    key[kl] = '\0';
    char *range = strstr(key, "bytes=");
    if (range == NULL)
        return -1;
    *range = '\0';
    char *p = NULL;
    for (char *q = strstr(key, "/blobs/"); q != NULL; q = strstr(q + 1, "/blobs/"))
        p = q;
    char alg[8], ab[3], hex[160], text[sizeof(alg) + sizeof(hex) + 2];
    int used = 0;
    if (p == NULL || sscanf(p, "/blobs/%7[a-z0-9]/%2[0-9a-f]/%159[0-9a-f]%n", alg, ab, hex, &used) != 3 || p[used] != '\0' ||
        strncmp(hex, ab, 2) != 0)
        return -1;
    snprintf(text, sizeof(text), "%s:%s", alg, hex);
    berth_digest_t d;
    if (berth_digest_parse(&d, text, strlen(text), NULL) != 0)
        return -1;
    snprintf(out, outsz, "%s", d.str);
    return 0;
}

static int is_name(const char *s, size_t len)
{
    if (strlen(s) != len)
        return 0;
    for (; *s != '\0'; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

/* nginx's levels=1:2 tree: <root>/<c>/<cc>/<32 hex>; anything else (temp files being written) is left alone */
static void collect(const char *root, const char *rel, int level, slices_t *s)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s%s%s", root, rel[0] != '\0' ? "/" : "", rel) >= (int)sizeof(dir))
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    static const size_t names[] = {1, 2, 32};
    while ((e = readdir(d)) != NULL) {
        char name[40], path[PATH_MAX];
        if (!is_name(e->d_name, names[level]))
            continue;
        if (snprintf(name, sizeof(name), "%s%s%s", rel, rel[0] != '\0' ? "/" : "", e->d_name) >= (int)sizeof(name))
            continue;
        if (level < 2) {
            collect(root, name, level + 1, s);
            continue;
        }
        if (snprintf(path, sizeof(path), "%s/%s", root, name) >= (int)sizeof(path))
            continue;
        char digest[BERTH_DIGEST_MAX];
        if (berth_edge_cache_file_digest(path, digest, sizeof(digest)) != 0)
            continue;
        if (s->n == s->cap) {
            s->cap = s->cap > 0 ? s->cap * 2 : 256;
            s->v = realloc(s->v, s->cap * sizeof(*s->v));
            if (s->v == NULL)
                abort();
        }
        snprintf(s->v[s->n].digest, sizeof(s->v[s->n].digest), "%s", digest);
        snprintf(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name);
        s->n++;
    }
    closedir(d);
}

static int by_digest(const void *a, const void *b)
{
    return strcmp(((const slice_t *)a)->digest, ((const slice_t *)b)->digest);
}

/*
 * Empty the slices of the batch's digests that have no row; `from`..`to` are the slices of those digests. Emptied,
 * not removed: nginx still counts the entry and unlinks its file when it evicts it, and a file already gone makes
 * that a [crit] line each. A request never reaches an emptied slice (berthd refuses a blob with no row), and if the
 * digest is pushed again nginx reads the empty file as unusable and fetches the slice anew.
 */
static int forget_batch(const char *root, berth_dbconn_t *c, json_t *batch, slice_t *from, slice_t *to)
{
    berth_err_t err;
    json_t *gone = berth_gc_unowned(c, batch, &err);
    if (gone == NULL) {
        berth_log_warn("edge cache: %s", err.msg);
        return 0;
    }
    int removed = 0;
    for (slice_t *x = from; x < to; x++) {
        size_t i;
        json_t *v;
        json_array_foreach(gone, i, v)
        {
            const char *g = json_string_value(v);
            char path[PATH_MAX];
            if (g == NULL || strcmp(g, x->digest) != 0)
                continue;
            if (snprintf(path, sizeof(path), "%s/%s", root, x->name) < (int)sizeof(path) && truncate(path, 0) == 0)
                removed++;
            break;
        }
    }
    json_decref(gone);
    return removed;
}

int berth_edge_cache_forget_gone(const char *dir, berth_dbconn_t *c)
{
    slices_t s = {0};
    collect(dir, "", 0, &s);
    if (s.n == 0)
        return 0;
    qsort(s.v, s.n, sizeof(*s.v), by_digest);
    int removed = 0;
    json_t *batch = json_array();
    size_t start = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (i == 0 || strcmp(s.v[i].digest, s.v[i - 1].digest) != 0) {
            if (json_array_size(batch) == BATCH) {
                removed += forget_batch(dir, c, batch, s.v + start, s.v + i);
                json_array_clear(batch);
                start = i;
            }
            json_array_append_new(batch, json_string(s.v[i].digest));
        }
    }
    if (json_array_size(batch) > 0)
        removed += forget_batch(dir, c, batch, s.v + start, s.v + s.n);
    json_decref(batch);
    free(s.v);
    if (removed > 0)
        berth_log_info("edge cache: emptied %d kept slice(s) of blobs that are gone", removed);
    return removed;
}
