#include "registry/gateway/sqfs_convert.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry/gateway/sqfs_tree.h"
#include "registry/gateway/sqfs_write.h"

#define READ_BLOCK (1 << 16)
#define MAX_XATTRS 128
#define PROGRESS_EVERY (16u << 20)

/* libarchive pulls a layer through the caller's reader, READ_BLOCK at a time */
typedef struct {
    berth_sqfs_read_fn read;
    void *ctx;
    size_t layer;
    uint64_t off;
    char *buf;
} source_t;

static la_ssize_t source_read(struct archive *a, void *data, const void **out)
{
    source_t *src = data;
    size_t got = 0;
    if (src->read(src->ctx, src->layer, src->off, src->buf, READ_BLOCK, &got) != 0) {
        archive_set_error(a, EIO, "the layer's bytes cannot be read from storage");
        return -1;
    }
    src->off += got;
    *out = src->buf;
    return (la_ssize_t)got;
}

static int source_close(struct archive *a, void *data)
{
    (void)a;
    source_t *src = data;
    free(src->buf);
    free(src);
    return ARCHIVE_OK;
}

static struct archive *open_layer(berth_sqfs_read_fn read, void *ctx, size_t i, size_t n, berth_err_t *err)
{
    struct archive *a = archive_read_new();
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_format_tar(a);
    source_t *src = calloc(1, sizeof(*src));
    *src = (source_t){.read = read, .ctx = ctx, .layer = i, .buf = malloc(READ_BLOCK)};
    if (archive_read_open(a, src, NULL, source_read, source_close) != ARCHIVE_OK) {
        berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer %zu of %zu: not a tar layer: %.160s", i + 1, n,
                      archive_error_string(a) ? archive_error_string(a) : "unreadable");
        archive_read_free(a);
        return NULL;
    }
    return a;
}

static int layer_error(struct archive *a, size_t i, size_t n, berth_err_t *err)
{
    const char *why = archive_error_string(a);
    return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer %zu of %zu is corrupt or truncated: %.180s", i + 1, n,
                         why != NULL ? why : "unreadable");
}

static int entry_of(struct archive_entry *ae, berth_sqfs_entry_t *e, berth_sqfs_xattr_t *xa)
{
    memset(e, 0, sizeof(*e));
    e->path = archive_entry_pathname(ae);
    if (e->path == NULL)
        return -1;
    e->perm = archive_entry_perm(ae);
    e->uid = (uint32_t)archive_entry_uid(ae);
    e->gid = (uint32_t)archive_entry_gid(ae);
    e->mtime = archive_entry_mtime(ae);
    if (archive_entry_hardlink(ae) != NULL) {
        e->type = BERTH_SQFS_HARDLINK;
        e->target = archive_entry_hardlink(ae);
    } else {
        switch (archive_entry_filetype(ae)) {
        case AE_IFREG: e->type = BERTH_SQFS_REG; break;
        case AE_IFDIR: e->type = BERTH_SQFS_DIR; break;
        case AE_IFLNK: e->type = BERTH_SQFS_SYMLINK; break;
        case AE_IFCHR: e->type = BERTH_SQFS_CHR; break;
        case AE_IFBLK: e->type = BERTH_SQFS_BLK; break;
        case AE_IFIFO: e->type = BERTH_SQFS_FIFO; break;
        case AE_IFSOCK: e->type = BERTH_SQFS_SOCK; break;
        default: return -1;
        }
        e->target = archive_entry_symlink(ae);
        e->size = e->type == BERTH_SQFS_REG ? (uint64_t)archive_entry_size(ae) : 0;
        e->rdev = (uint64_t)archive_entry_rdev(ae);
    }
    const char *name;
    const void *value;
    size_t len;
    archive_entry_xattr_reset(ae);
    while (e->nxattrs < MAX_XATTRS && archive_entry_xattr_next(ae, &name, &value, &len) == ARCHIVE_OK) {
        xa[e->nxattrs].key = (char *)name;
        xa[e->nxattrs].value = (void *)value;
        xa[e->nxattrs].len = len;
        e->nxattrs++;
    }
    e->xattrs = xa;
    return 0;
}

/* Pass 1: headers only */
static int read_headers(berth_sqfs_tree_t *t, berth_sqfs_read_fn read, void *ctx, size_t i, size_t n, const berth_sqfs_opts_t *o,
                        berth_err_t *err)
{
    struct archive *a = open_layer(read, ctx, i, n, err);
    struct archive_entry *ae;
    berth_sqfs_xattr_t xa[MAX_XATTRS];
    berth_sqfs_entry_t e;
    long ordinal = 0;
    int rc = 0, r;
    if (a == NULL)
        return BERTH_EINVAL;
    while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if (entry_of(ae, &e, xa) != 0) {
            rc = berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer %zu of %zu: entry %ld has no usable name or type", i + 1, n,
                               ordinal);
            break;
        }
        berth_err_t why = {0};
        if ((rc = berth_sqfs_tree_apply(t, (int)i, ordinal, &e, o->keep_devices, &why)) != 0) {
            berth_err_set(err, why.oci, "layer %zu of %zu: %.200s", i + 1, n, why.msg);
            break;
        }
        ordinal++;
    }
    if (rc == 0 && r != ARCHIVE_EOF)
        rc = layer_error(a, i, n, err);
    archive_read_free(a);
    return rc;
}

typedef struct {
    const berth_sqfs_opts_t *o;
    uint64_t done, total, next_report;
} progress_t;

static int report(progress_t *p, berth_err_t *err)
{
    if (p->o->progress == NULL || p->done < p->next_report)
        return 0;
    p->next_report = p->done + PROGRESS_EVERY;
    if (p->o->progress(p->done, p->total, p->o->progress_data) != 0)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "conversion stopped");
    return 0;
}

/* Pass 2: the bytes of the files this layer gives the final tree, files[*k] onwards */
static int read_contents(berth_sqfs_writer_t *w, berth_sqfs_read_fn read, void *ctx, size_t i, size_t n, berth_sqfs_inode_t **files,
                         size_t nfiles, size_t *k, progress_t *p, berth_err_t *err)
{
    struct archive *a = open_layer(read, ctx, i, n, err);
    struct archive_entry *ae;
    long ordinal = 0;
    int rc = 0, r = ARCHIVE_OK;
    char *buf = malloc(READ_BLOCK);
    if (a == NULL) {
        free(buf);
        return BERTH_EINVAL;
    }
    while (*k < nfiles && files[*k]->layer == (int)i &&
           ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN)) {
        if (ordinal++ != files[*k]->ordinal)
            continue;
        berth_sqfs_inode_t *ino = files[(*k)++];
        if ((rc = berth_sqfs_writer_begin_file(w, ino, err)) != 0)
            break;
        uint64_t got = 0;
        la_ssize_t m;
        while ((m = archive_read_data(a, buf, READ_BLOCK)) > 0) {
            got += (uint64_t)m;
            p->done += (uint64_t)m;
            if ((rc = berth_sqfs_writer_append(w, buf, (size_t)m, err)) != 0 || (rc = report(p, err)) != 0)
                break;
        }
        if (rc != 0)
            break;
        if (m < 0 || got != ino->size) {
            rc = layer_error(a, i, n, err);
            break;
        }
        if ((rc = berth_sqfs_writer_end_file(w, err)) != 0)
            break;
    }
    if (rc == 0 && r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF)
        rc = layer_error(a, i, n, err);
    else if (rc == 0 && *k < nfiles && files[*k]->layer == (int)i)
        rc = berth_err_set(err, BERTH_OCI_BAD_REQUEST, "layer %zu of %zu ended before its entry %ld", i + 1, n, files[*k]->ordinal);
    archive_read_free(a);
    free(buf);
    return rc;
}

int berth_sqfs_convert(size_t nlayers, berth_sqfs_read_fn read, void *read_ctx, int out_fd, const berth_sqfs_opts_t *opts,
                       berth_sqfs_stats_t *stats, berth_err_t *err)
{
    berth_sqfs_opts_t o = *opts;
    berth_sqfs_tree_t *t = berth_sqfs_tree_new(o.max_tree_bytes ? o.max_tree_bytes : (size_t)1 << 30);
    berth_sqfs_writer_t *w = NULL;
    berth_sqfs_inode_t **files = NULL;
    size_t nfiles = 0, k = 0;
    progress_t p = {.o = &o};
    int rc = 0;
    memset(stats, 0, sizeof(*stats));
    for (size_t i = 0; i < nlayers && rc == 0; i++)
        rc = read_headers(t, read, read_ctx, i, nlayers, &o, err);
    if (rc != 0)
        goto Exit;
    berth_sqfs_tree_files(t, &files, &nfiles);
    for (size_t j = 0; j < nfiles; j++)
        p.total += files[j]->size;
    if ((rc = berth_sqfs_writer_new(&w, out_fd, &o, err)) != 0)
        goto Exit;
    for (size_t i = 0; i < nlayers && rc == 0; i++)
        if (k < nfiles && files[k]->layer == (int)i)
            rc = read_contents(w, read, read_ctx, i, nlayers, files, nfiles, &k, &p, err);
    if (rc != 0)
        goto Exit;
    if ((rc = berth_sqfs_writer_finish(w, t, stats, err)) != 0)
        goto Exit;
    stats->files = nfiles;
    stats->content_bytes = p.total;
    if (o.progress != NULL)
        o.progress(p.total, p.total, o.progress_data);
Exit:
    berth_sqfs_tree_bytes(t, &stats->tree_peak_bytes);
    berth_sqfs_writer_free(w);
    free(files);
    berth_sqfs_tree_free(t);
    return rc;
}
