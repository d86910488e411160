#include "registry/service/blob_archive.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (4 << 20) /* one ranged read per chunk: a GET on s3, a pread on the filesystem */

typedef struct {
    berth_store_t *store;
    berth_digest_t d;
    int64_t off, size;
    char *buf;
    size_t len;
} reader_t;

static int fill(const char *data, size_t len, void *arg)
{
    reader_t *r = arg;
    if (r->len + len > CHUNK)
        return -1;
    memcpy(r->buf + r->len, data, len);
    r->len += len;
    return 0;
}

static la_ssize_t on_read(struct archive *a, void *arg, const void **out)
{
    reader_t *r = arg;
    r->len = 0;
    int64_t want = r->size - r->off < CHUNK ? r->size - r->off : CHUNK;
    if (want <= 0)
        return 0;
    berth_err_t err;
    if (berth_store_blob_read(r->store, &r->d, r->off, want, fill, r, &err) != 0 || r->len != (size_t)want) {
        archive_set_error(a, EIO, "blob %s: %s", r->d.str, err.msg);
        return -1;
    }
    r->off += want;
    *out = r->buf;
    return (la_ssize_t)r->len;
}

static int on_close(struct archive *a, void *arg)
{
    (void)a;
    reader_t *r = arg;
    free(r->buf);
    free(r);
    return ARCHIVE_OK;
}

struct archive *berth_blob_archive_open(berth_store_t *store, const berth_digest_t *d)
{
    int64_t size;
    if (berth_store_blob_stat(store, d, &size, NULL) != 0)
        return NULL;
    reader_t *r = calloc(1, sizeof(*r));
    r->store = store;
    r->d = *d;
    r->size = size;
    r->buf = malloc(CHUNK);
    struct archive *a = archive_read_new();
    archive_read_support_filter_all(a); /* gzip, zstd, none */
    archive_read_support_format_tar(a);
    if (archive_read_open(a, r, NULL, on_read, on_close) != ARCHIVE_OK) { /* on_close has freed r */
        archive_read_free(a);
        return NULL;
    }
    return a;
}
