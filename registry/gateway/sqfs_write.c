#include "registry/gateway/sqfs_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <sqfs/block.h>
#include <sqfs/block_processor.h>
#include <sqfs/block_writer.h>
#include <sqfs/compressor.h>
#include <sqfs/dir_writer.h>
#include <sqfs/error.h>
#include <sqfs/frag_table.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/meta_writer.h>
#include <sqfs/super.h>
#include <sqfs/xattr_writer.h>

/* libsquashfs writes through this: positional I/O on the caller's descriptor, errno kept for the report */
typedef struct {
    sqfs_file_t base;
    int fd;
    uint64_t size;
    int errnum;
} fdfile_t;

static void fdfile_destroy(sqfs_object_t *o)
{
    free(o);
}

static sqfs_object_t *fdfile_copy(const sqfs_object_t *o)
{
    (void)o;
    return NULL; /* writable files are never copied (io.h) */
}

static int fdfile_read_at(sqfs_file_t *f, sqfs_u64 off, void *buf, size_t size)
{
    fdfile_t *ff = (fdfile_t *)f;
    if (off + size > ff->size)
        return SQFS_ERROR_OUT_OF_BOUNDS;
    while (size > 0) {
        ssize_t n = pread(ff->fd, buf, size, (off_t)off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            ff->errnum = n < 0 ? errno : EIO;
            return SQFS_ERROR_IO;
        }
        buf = (char *)buf + n;
        off += (sqfs_u64)n;
        size -= (size_t)n;
    }
    return 0;
}

static int fdfile_write_at(sqfs_file_t *f, sqfs_u64 off, const void *buf, size_t size)
{
    fdfile_t *ff = (fdfile_t *)f;
    uint64_t end = off + size;
    while (size > 0) {
        ssize_t n = pwrite(ff->fd, buf, size, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ff->errnum = errno;
            return SQFS_ERROR_IO;
        }
        buf = (const char *)buf + n;
        off += (sqfs_u64)n;
        size -= (size_t)n;
    }
    if (end > ff->size)
        ff->size = end;
    return 0;
}

static sqfs_u64 fdfile_get_size(const sqfs_file_t *f)
{
    return ((const fdfile_t *)f)->size;
}

static int fdfile_truncate(sqfs_file_t *f, sqfs_u64 size)
{
    fdfile_t *ff = (fdfile_t *)f;
    if (ftruncate(ff->fd, (off_t)size) != 0) {
        ff->errnum = errno;
        return SQFS_ERROR_IO;
    }
    ff->size = size;
    return 0;
}

struct st_berth_sqfs_writer_t {
    fdfile_t *file;
    sqfs_compressor_t *cmp;
    sqfs_super_t super;
    sqfs_block_writer_t *blkwr;
    sqfs_frag_table_t *frag;
    sqfs_block_processor_t *proc;
    sqfs_id_table_t *ids;
    sqfs_xattr_writer_t *xwr;
    sqfs_meta_writer_t *im, *dm;
    sqfs_dir_writer_t *dirwr;
    uint32_t next_ino;
    size_t dir_bytes;
    unsigned threads;
};

static int fail(berth_sqfs_writer_t *w, int sqfs_rc, const char *what, berth_err_t *err)
{
    if (w != NULL && w->file->errnum != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "squashfs: %s: %s", what, strerror(w->file->errnum));
    return berth_err_set(err, BERTH_OCI_INTERNAL, "squashfs: %s failed (libsquashfs error %d)", what, sqfs_rc);
}

int berth_sqfs_compressor_id(const char *name, int *id_out)
{
    static const struct {
        const char *name;
        int id;
    } table[] = {{"zstd", SQFS_COMP_ZSTD}, {"gzip", SQFS_COMP_GZIP}, {"xz", SQFS_COMP_XZ}, {"lz4", SQFS_COMP_LZ4}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(name != NULL && name[0] ? name : "zstd", table[i].name) == 0) {
            *id_out = table[i].id;
            return 0;
        }
    return BERTH_EINVAL;
}

unsigned berth_sqfs_threads(unsigned asked)
{
    if (asked > 0)
        return asked > 32 ? 32 : asked;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 32 ? 32 : (unsigned)n;
}

int berth_sqfs_writer_new(berth_sqfs_writer_t **out, int fd, const berth_sqfs_opts_t *opts, berth_err_t *err)
{
    berth_sqfs_writer_t *w = calloc(1, sizeof(*w));
    int comp, rc;
    size_t bs = opts->block_size ? opts->block_size : SQFS_DEFAULT_BLOCK_SIZE;
    unsigned threads = berth_sqfs_threads(opts->threads);
    size_t backlog = opts->backlog ? opts->backlog : 4 * threads;
    *out = NULL;
    w->threads = threads;
    w->file = calloc(1, sizeof(*w->file));
    w->file->base.base.destroy = fdfile_destroy;
    w->file->base.base.copy = fdfile_copy;
    w->file->base.read_at = fdfile_read_at;
    w->file->base.write_at = fdfile_write_at;
    w->file->base.get_size = fdfile_get_size;
    w->file->base.truncate = fdfile_truncate;
    w->file->fd = fd;
    if (berth_sqfs_compressor_id(opts->compressor, &comp) != 0) {
        berth_sqfs_writer_free(w);
        return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "squashfs compressor \"%.40s\" is not one of zstd, gzip, xz, lz4",
                             opts->compressor);
    }
    sqfs_compressor_config_t cfg;
    if ((rc = sqfs_compressor_config_init(&cfg, (SQFS_COMPRESSOR)comp, bs, 0)) != 0 ||
        (rc = sqfs_compressor_create(&cfg, &w->cmp)) != 0) {
        berth_sqfs_writer_free(w);
        return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "squashfs: compressor %s with block size %zu refused (%d)",
                             opts->compressor ? opts->compressor : "zstd", bs, rc);
    }
    /* mtime 0: the same layers always give the same bytes, so a conversion is reproducible */
    if ((rc = sqfs_super_init(&w->super, bs, 0, (SQFS_COMPRESSOR)comp)) != 0 ||
        (rc = sqfs_super_write(&w->super, &w->file->base)) != 0) {
        int r = fail(w, rc, "writing the superblock", err);
        berth_sqfs_writer_free(w);
        return r;
    }
    rc = w->cmp->write_options(w->cmp, &w->file->base);
    if (rc < 0) {
        int r = fail(w, rc, "writing compressor options", err);
        berth_sqfs_writer_free(w);
        return r;
    }
    if (rc > 0)
        w->super.flags |= SQFS_FLAG_COMPRESSOR_OPTIONS;
    w->blkwr = sqfs_block_writer_create(&w->file->base, SQFS_DEVBLK_SIZE, 0);
    w->frag = sqfs_frag_table_create(0);
    w->proc = w->blkwr && w->frag ? sqfs_block_processor_create(bs, w->cmp, threads, backlog, w->blkwr, w->frag) : NULL;
    w->ids = sqfs_id_table_create(0);
    w->xwr = sqfs_xattr_writer_create(0);
    w->im = sqfs_meta_writer_create(&w->file->base, w->cmp, 0);
    /* directories are written after the inodes, so their table waits in memory (part of the stated bound) */
    w->dm = sqfs_meta_writer_create(&w->file->base, w->cmp, SQFS_META_WRITER_KEEP_IN_MEMORY);
    w->dirwr = w->dm != NULL ? sqfs_dir_writer_create(w->dm, 0) : NULL;
    if (w->proc == NULL || w->ids == NULL || w->xwr == NULL || w->im == NULL || w->dirwr == NULL) {
        berth_sqfs_writer_free(w);
        return berth_err_set(err, BERTH_OCI_INTERNAL, "squashfs: cannot create the writer (out of memory or threads)");
    }
    *out = w;
    return 0;
}

void berth_sqfs_writer_free(berth_sqfs_writer_t *w)
{
    if (w == NULL)
        return;
    sqfs_destroy(w->dirwr);
    sqfs_destroy(w->dm);
    sqfs_destroy(w->im);
    sqfs_destroy(w->xwr);
    sqfs_destroy(w->ids);
    sqfs_destroy(w->proc);
    sqfs_destroy(w->frag);
    sqfs_destroy(w->blkwr);
    sqfs_destroy(w->cmp);
    sqfs_destroy(w->file);
    free(w);
}

int berth_sqfs_writer_begin_file(berth_sqfs_writer_t *w, berth_sqfs_inode_t *ino, berth_err_t *err)
{
    int rc = sqfs_block_processor_begin_file(w->proc, (sqfs_inode_generic_t **)&ino->sq, NULL, 0);
    return rc != 0 ? fail(w, rc, "starting a file", err) : 0;
}

int berth_sqfs_writer_append(berth_sqfs_writer_t *w, const void *data, size_t len, berth_err_t *err)
{
    int rc = sqfs_block_processor_append(w->proc, data, len);
    return rc != 0 ? fail(w, rc, "writing file data", err) : 0;
}

int berth_sqfs_writer_end_file(berth_sqfs_writer_t *w, berth_err_t *err)
{
    int rc = sqfs_block_processor_end_file(w->proc);
    return rc != 0 ? fail(w, rc, "ending a file", err) : 0;
}

/* ---- inodes and directories ------------------------------------------------------------------------------- */

static uint16_t mode_of(const berth_sqfs_inode_t *ino)
{
    static const uint16_t type_bits[] = {
        [BERTH_SQFS_REG] = SQFS_INODE_MODE_REG,     [BERTH_SQFS_DIR] = SQFS_INODE_MODE_DIR,
        [BERTH_SQFS_SYMLINK] = SQFS_INODE_MODE_LNK, [BERTH_SQFS_CHR] = SQFS_INODE_MODE_CHR,
        [BERTH_SQFS_BLK] = SQFS_INODE_MODE_BLK,     [BERTH_SQFS_FIFO] = SQFS_INODE_MODE_FIFO,
        [BERTH_SQFS_SOCK] = SQFS_INODE_MODE_SOCK,   [BERTH_SQFS_HARDLINK] = SQFS_INODE_MODE_REG,
    };
    return (uint16_t)(type_bits[ino->type] | (ino->perm & 07777));
}

/* Only these namespaces exist in squashfs; others (system.*) are dropped like mksquashfs does */
static int xattr_supported(const char *key)
{
    return strncmp(key, "user.", 5) == 0 || strncmp(key, "trusted.", 8) == 0 || strncmp(key, "security.", 9) == 0;
}

static int xattr_index(berth_sqfs_writer_t *w, const berth_sqfs_inode_t *ino, uint32_t *idx)
{
    int any = 0, rc;
    *idx = 0xFFFFFFFF;
    for (size_t i = 0; i < ino->nxattrs; i++)
        any |= xattr_supported(ino->xattrs[i].key);
    if (!any)
        return 0;
    if ((rc = sqfs_xattr_writer_begin(w->xwr, 0)) != 0)
        return rc;
    for (size_t i = 0; i < ino->nxattrs; i++)
        if (xattr_supported(ino->xattrs[i].key) &&
            (rc = sqfs_xattr_writer_add(w->xwr, ino->xattrs[i].key, ino->xattrs[i].value, ino->xattrs[i].len)) != 0)
            return rc;
    return sqfs_xattr_writer_end(w->xwr, idx);
}

/* The common fields, then the inode into the inode table; its reference is remembered for directory entries */
static int write_inode(berth_sqfs_writer_t *w, berth_sqfs_inode_t *ino, sqfs_inode_generic_t *sq)
{
    uint32_t xidx;
    sqfs_u32 offset;
    sqfs_u64 block;
    int rc;
    sq->base.mode = mode_of(ino);
    sq->base.mod_time = ino->mtime < 0 ? 0 : ino->mtime > (int64_t)UINT32_MAX ? UINT32_MAX : (sqfs_u32)ino->mtime;
    sq->base.inode_number = ino->ino;
    if ((rc = xattr_index(w, ino, &xidx)) != 0 || (rc = sqfs_inode_set_xattr_index(sq, xidx)) != 0 ||
        (rc = sqfs_id_table_id_to_index(w->ids, ino->uid, &sq->base.uid_idx)) != 0 ||
        (rc = sqfs_id_table_id_to_index(w->ids, ino->gid, &sq->base.gid_idx)) != 0)
        return rc;
    sqfs_meta_writer_get_position(w->im, &block, &offset);
    ino->ref = (block << 16) | offset;
    ino->written = 1;
    return sqfs_meta_writer_write_inode(w->im, sq);
}

static int write_other(berth_sqfs_writer_t *w, berth_sqfs_inode_t *ino)
{
    size_t extra = ino->type == BERTH_SQFS_SYMLINK ? strlen(ino->target) : 0;
    sqfs_inode_generic_t *sq = calloc(1, sizeof(*sq) + extra + 1);
    int rc;
    if (ino->type == BERTH_SQFS_REG) {
        free(sq);
        sq = ino->sq;
        ino->sq = NULL;
        if (sq == NULL) /* its bytes were never streamed: the converter's bug, not the image's */
            return SQFS_ERROR_INTERNAL;
        if (ino->refs > 1 || sq->base.type == SQFS_INODE_EXT_FILE) {
            sqfs_inode_make_extended(sq);
            sq->data.file_ext.nlink = ino->refs;
        }
    } else if (ino->type == BERTH_SQFS_SYMLINK) {
        sq->base.type = SQFS_INODE_SLINK;
        sq->data.slink.nlink = ino->refs;
        sq->data.slink.target_size = (sqfs_u32)extra;
        memcpy(sq->extra, ino->target, extra);
    } else if (ino->type == BERTH_SQFS_CHR || ino->type == BERTH_SQFS_BLK) {
        unsigned maj = major(ino->rdev), min = minor(ino->rdev);
        sq->base.type = ino->type == BERTH_SQFS_CHR ? SQFS_INODE_CDEV : SQFS_INODE_BDEV;
        sq->data.dev.nlink = ino->refs;
        sq->data.dev.devno = (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12); /* the kernel's new_encode_dev */
    } else {
        sq->base.type = ino->type == BERTH_SQFS_FIFO ? SQFS_INODE_FIFO : SQFS_INODE_SOCKET;
        sq->data.ipc.nlink = ino->refs;
    }
    rc = write_inode(w, ino, sq);
    free(sq);
    return rc;
}

/* Non-directories first (any order), so every directory entry below can name a written inode */
static int write_others(berth_sqfs_writer_t *w, berth_sqfs_node_t *dir)
{
    int rc;
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next) {
        if (c->inode->type == BERTH_SQFS_DIR)
            rc = write_others(w, c);
        else
            rc = c->inode->written ? 0 : write_other(w, c->inode);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void number_others(berth_sqfs_writer_t *w, berth_sqfs_node_t *dir)
{
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next)
        if (c->inode->type == BERTH_SQFS_DIR)
            number_others(w, c);
        else if (c->inode->ino == 0)
            c->inode->ino = w->next_ino++;
}

static void number_dirs(berth_sqfs_writer_t *w, berth_sqfs_node_t *dir)
{
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next)
        if (c->inode->type == BERTH_SQFS_DIR)
            number_dirs(w, c);
    dir->inode->ino = w->next_ino++;
}

/* Directories children first: a directory's entries need its children's inode references */
static int write_dirs(berth_sqfs_writer_t *w, berth_sqfs_node_t *dir, berth_sqfs_stats_t *st)
{
    berth_sqfs_node_t **kids;
    size_t n, subdirs = 0;
    int rc = 0;
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next)
        if (c->inode->type == BERTH_SQFS_DIR && (rc = write_dirs(w, c, st)) != 0)
            return rc;
    berth_sqfs_tree_children(dir, &kids, &n);
    if ((rc = sqfs_dir_writer_begin(w->dirwr, 0)) != 0)
        goto Exit;
    for (size_t i = 0; i < n; i++) {
        berth_sqfs_inode_t *ci = kids[i]->inode;
        subdirs += ci->type == BERTH_SQFS_DIR;
        st->entries++;
        if ((rc = sqfs_dir_writer_add_entry(w->dirwr, kids[i]->name, ci->ino, ci->ref, mode_of(ci))) != 0)
            goto Exit;
    }
    if ((rc = sqfs_dir_writer_end(w->dirwr)) != 0)
        goto Exit;
    w->dir_bytes += sqfs_dir_writer_get_size(w->dirwr);
    uint32_t parent = dir->parent != NULL ? dir->parent->inode->ino : w->next_ino; /* the root's: one past the last */
    sqfs_inode_generic_t *sq = sqfs_dir_writer_create_inode(w->dirwr, 0, 0xFFFFFFFF, parent);
    if (sq == NULL) {
        rc = SQFS_ERROR_ALLOC;
        goto Exit;
    }
    if (sq->base.type == SQFS_INODE_DIR)
        sq->data.dir.nlink = (sqfs_u32)(2 + subdirs);
    else
        sq->data.dir_ext.nlink = (sqfs_u32)(2 + subdirs);
    rc = write_inode(w, dir->inode, sq);
    free(sq);
Exit:
    free(kids);
    return rc;
}

static void count(berth_sqfs_node_t *dir, berth_sqfs_stats_t *st)
{
    for (berth_sqfs_node_t *c = dir->child; c != NULL; c = c->next) {
        switch (c->inode->type) {
        case BERTH_SQFS_DIR:
            st->dirs++;
            count(c, st);
            break;
        case BERTH_SQFS_REG:
            if (c->inode->refs > 1)
                st->hardlinks++;
            break;
        case BERTH_SQFS_SYMLINK: st->symlinks++; break;
        default: break;
        }
    }
}

int berth_sqfs_writer_finish(berth_sqfs_writer_t *w, berth_sqfs_tree_t *t, berth_sqfs_stats_t *st, berth_err_t *err)
{
    berth_sqfs_node_t *root = berth_sqfs_tree_root(t);
    int rc;
    if ((rc = sqfs_block_processor_finish(w->proc)) != 0)
        return fail(w, rc, "writing data blocks", err);
    w->next_ino = 1;
    number_others(w, root);
    number_dirs(w, root);
    w->super.inode_count = w->next_ino - 1;
    w->super.inode_table_start = w->file->size;
    if ((rc = write_others(w, root)) != 0 || (rc = write_dirs(w, root, st)) != 0)
        return fail(w, rc, "writing inodes and directories", err);
    if ((rc = sqfs_meta_writer_flush(w->im)) != 0 || (rc = sqfs_meta_writer_flush(w->dm)) != 0)
        return fail(w, rc, "flushing the inode table", err);
    w->super.root_inode_ref = root->inode->ref;
    w->super.directory_table_start = w->file->size;
    if ((rc = sqfs_meta_write_write_to_file(w->dm)) != 0)
        return fail(w, rc, "writing the directory table", err);
    if ((rc = sqfs_frag_table_write(w->frag, &w->file->base, &w->super, w->cmp)) != 0 ||
        (rc = sqfs_id_table_write(w->ids, &w->file->base, &w->super, w->cmp)) != 0 ||
        (rc = sqfs_xattr_writer_flush(w->xwr, &w->file->base, &w->super, w->cmp)) != 0)
        return fail(w, rc, "writing the fragment, id and xattr tables", err);
    w->super.bytes_used = w->file->size;
    if ((rc = sqfs_super_write(&w->super, &w->file->base)) != 0)
        return fail(w, rc, "writing the superblock", err);
    size_t pad = (size_t)(w->file->size % SQFS_DEVBLK_SIZE);
    if (pad != 0) { /* loop devices read whole 4 KiB blocks */
        static const char zeros[SQFS_DEVBLK_SIZE];
        if ((rc = w->file->base.write_at(&w->file->base, w->file->size, zeros, SQFS_DEVBLK_SIZE - pad)) != 0)
            return fail(w, rc, "padding the image", err);
    }
    count(root, st);
    st->image_bytes = w->file->size;
    st->threads = w->threads;
    st->dir_table_bytes = w->dir_bytes;
    return 0;
}
