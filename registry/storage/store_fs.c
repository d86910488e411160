/*
 * The filesystem driver. Tree under the storage root:
 *
 *   blobs/<alg>/<hex[0:2]>/<hex>   content-addressed, immutable, shared by all repositories
 *   uploads/<id>                   an upload session's bytes; its length is the session offset
 *
 * Uploads and blobs share one filesystem so a finished upload becomes a blob by rename(2): a blob path only ever
 * holds complete, verified content. The edge sends blob files itself (X-Accel-Redirect, sendfile, Range).
 */
#include "registry/storage/store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "registry/storage/store_driver.h"

/* roots are capped well below PATH_MAX so every path built from one fits */
#define ROOT_MAX 3000

typedef struct {
    berth_store_t super;
    char root[ROOT_MAX];
} fs_t;

typedef struct {
    berth_store_upload_t super;
    int fd;
} fs_upload_t;

#define FS(s) ((fs_t *)(s))

static int io_error(const fs_t *s, const char *what, const char *id, int errnum, berth_err_t *err);
static int errno_full(int errnum);

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0750) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(tmp, 0750) != 0 && errno != EEXIST ? -1 : 0;
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int berth_store_open(berth_store_t **out, const char *root, berth_err_t *err)
{
    if (strlen(root) >= ROOT_MAX)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "storage root path is too long");
    fs_t *s = calloc(1, sizeof(*s));
    s->super.ops = &berth_store_fs_ops;
    s->super.min_free = -1;
    snprintf(s->root, sizeof(s->root), "%s", root);
    char p[PATH_MAX + 256];
    const char *subdirs[] = {"blobs/sha256", "blobs/sha512", "uploads"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, subdirs[i]);
        if (mkdir_p(p) != 0) {
            int e = errno;
            free(s);
            return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot create %s: %s", p, strerror(e));
        }
    }
    *out = &s->super;
    return 0;
}

static void fs_close(berth_store_t *s)
{
    free(s);
}

static const char *alg_name(berth_digest_alg_t a)
{
    return a == BERTH_DIGEST_SHA256 ? "sha256" : "sha512";
}

static void blob_path(const fs_t *s, const berth_digest_t *d, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/blobs/%s/%.2s/%s", s->root, alg_name(d->alg), berth_digest_hex(d), berth_digest_hex(d));
}

static void upload_path(const fs_t *s, const char *id, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/uploads/%s", s->root, id);
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Bytes [off, off+len) of a file into sink (len -1: to the end) */
static int read_file(const char *path, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, NULL);
        if (err != NULL)
            err->code = BERTH_ENOTFOUND;
        return BERTH_ENOTFOUND;
    }
    if (fd < 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot open %s: %s", path, strerror(errno));
    size_t bufsz = 1 << 20;
    char *buf = malloc(bufsz);
    int rc = 0;
    int64_t left = len;
    while (len < 0 || left > 0) {
        size_t want = len < 0 || left > (int64_t)bufsz ? bufsz : (size_t)left;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n == 0 && len >= 0)) {
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "cannot read %s: %s", path,
                               n < 0 ? strerror(errno) : "shorter than expected");
            break;
        }
        if (n == 0)
            break;
        if (sink(buf, (size_t)n, arg) != 0) {
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "reading %s stopped by its receiver", path);
            break;
        }
        off += n;
        left -= n;
    }
    free(buf);
    close(fd);
    return rc;
}

static int fs_blob_stat(berth_store_t *st, const berth_digest_t *d, int64_t *size_out, berth_err_t *err)
{
    char p[PATH_MAX + 256];
    struct stat sb;
    blob_path(FS(st), d, p, sizeof(p));
    if (stat(p, &sb) != 0) {
        berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, NULL);
        if (err != NULL)
            err->code = BERTH_ENOTFOUND;
        return BERTH_ENOTFOUND;
    }
    *size_out = sb.st_size;
    return 0;
}

static int fs_blob_read(berth_store_t *st, const berth_digest_t *d, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg,
                        berth_err_t *err)
{
    char p[PATH_MAX + 256];
    blob_path(FS(st), d, p, sizeof(p));
    return read_file(p, off, len, sink, arg, err);
}

static int fs_blob_remove(berth_store_t *st, const berth_digest_t *d, berth_err_t *err)
{
    char p[PATH_MAX + 256];
    blob_path(FS(st), d, p, sizeof(p));
    if (unlink(p) != 0 && errno != ENOENT)
        return io_error(FS(st), "unlink of blob", d->str, errno, err);
    return 0;
}

/* one blobs/<alg>/<ab>/ directory: files whose name is a digest of that algorithm filed in the right place */
static int blob_dir_each(const char *dir, berth_digest_alg_t alg, const char *prefix, time_t now, berth_store_blob_fn cb,
                         void *cb_data)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int stop = 0;
    struct dirent *e;
    while (!stop && (e = readdir(d)) != NULL) {
        struct stat st;
        char text[BERTH_DIGEST_MAX + 1];
        berth_digest_t dg;
        size_t nlen = strlen(e->d_name);
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, 2) != 0 || nlen + 8 > sizeof(text))
            continue;
        snprintf(text, sizeof(text), "%s:%.*s", alg == BERTH_DIGEST_SHA256 ? "sha256" : "sha512", (int)nlen, e->d_name);
        if (berth_digest_parse(&dg, text, strlen(text), NULL) != 0 || dg.alg != alg)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        stop = cb(&dg, (int64_t)st.st_size, difftime(now, st.st_mtime), cb_data);
    }
    closedir(d);
    return stop;
}

static int fs_blob_each(berth_store_t *st, berth_store_blob_fn cb, void *cb_data)
{
    static const struct {
        const char *name;
        berth_digest_alg_t alg;
    } algs[] = {{"sha256", BERTH_DIGEST_SHA256}, {"sha512", BERTH_DIGEST_SHA512}};
    time_t now = time(NULL);
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        char top[PATH_MAX + 256];
        snprintf(top, sizeof(top), "%s/blobs/%s", FS(st)->root, algs[a].name);
        DIR *d = opendir(top);
        if (d == NULL)
            continue;
        struct dirent *e;
        int stop = 0;
        while (!stop && (e = readdir(d)) != NULL) {
            if (strlen(e->d_name) != 2 || !isxdigit((unsigned char)e->d_name[0]) || !isxdigit((unsigned char)e->d_name[1]))
                continue;
            char sub[PATH_MAX + 256];
            snprintf(sub, sizeof(sub), "%.*s/%.2s", PATH_MAX, top, e->d_name);
            stop = blob_dir_each(sub, algs[a].alg, e->d_name, now, cb, cb_data);
        }
        closedir(d);
        if (stop)
            return 1;
    }
    return 0;
}

static void fs_blob_serve(berth_store_t *st, const berth_digest_t *d, int64_t size, const char *method, berth_resp_t *resp)
{
    (void)size, (void)method; /* the edge answers HEAD from the file too: the file is the truth */
    char rel[BERTH_DIGEST_MAX + 16];
    berth_store__blob_relpath(d, rel, sizeof(rel));
    berth_resp_header(resp, "x-accel-redirect", "%s%s", st->edge_prefix, rel);
    berth_resp_body(resp, 200, NULL, 0, "application/octet-stream");
}

static void fs_edge(const berth_store_t *st, berth_store_edge_t *out)
{
    static __thread char dir[ROOT_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/blobs", FS(st)->root);
    out->dir = dir;
}

static int fs_upload_open(berth_store_t *st, const char *id, int create, berth_store_upload_t **out, int64_t *size_out,
                          berth_err_t *err)
{
    fs_t *s = FS(st);
    char p[PATH_MAX + 256];
    upload_path(s, id, p, sizeof(p));
    int fd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0640);
    if (fd < 0)
        return errno == ENOENT ? berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL)
                               : io_error(s, "open of upload", id, errno, err);
    /* one writer per session: a second concurrent PATCH must not interleave bytes */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        berth_err_set(err, BERTH_OCI_RANGE_INVALID, "upload is in use by another request");
        if (err != NULL)
            err->code = BERTH_ECONFLICT;
        return BERTH_ECONFLICT;
    }
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) {
        close(fd);
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot seek upload");
    }
    fs_upload_t *u = calloc(1, sizeof(*u));
    u->super.store = st;
    snprintf(u->super.id, sizeof(u->super.id), "%s", id);
    u->fd = fd;
    *out = &u->super;
    *size_out = end;
    return 0;
}

static int fs_upload_write(berth_store_upload_t *bu, const void *buf, size_t len, berth_err_t *err)
{
    fs_upload_t *u = (fs_upload_t *)bu;
    if (write_all(u->fd, buf, len) != 0) {
        int e = errno;
        io_error(FS(bu->store), "write to upload", bu->id, e, err);
        if (errno_full(e) && ftruncate(u->fd, 0) != 0) /* give the space back at once */
            berth_log_warn("cannot truncate upload %s: %s", bu->id, strerror(errno));
        return err != NULL ? err->code : BERTH_ERROR;
    }
    return 0;
}

static int fs_upload_close(berth_store_upload_t *bu, berth_err_t *err)
{
    (void)err;
    fs_upload_t *u = (fs_upload_t *)bu;
    if (u->fd >= 0)
        close(u->fd);
    free(u);
    return 0;
}

static int fs_upload_read(berth_store_t *st, const char *id, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err)
{
    char p[PATH_MAX + 256];
    upload_path(FS(st), id, p, sizeof(p));
    return read_file(p, 0, len, sink, arg, err);
}

static int fs_upload_open_read(berth_store_t *st, const char *id, int *fd_out)
{
    char p[PATH_MAX + 256];
    upload_path(FS(st), id, p, sizeof(p));
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return BERTH_ENOTFOUND;
    *fd_out = fd;
    return 0;
}

static int fs_upload_size(berth_store_t *st, const char *id, int64_t *size_out)
{
    fs_t *s = FS(st);
    char p[PATH_MAX + 256];
    struct stat sb;
    upload_path(s, id, p, sizeof(p));
    if (stat(p, &sb) != 0)
        return BERTH_ENOTFOUND;
    *size_out = sb.st_size;
    return 0;
}

static int fs_upload_prepare(berth_store_upload_t *bu, const berth_digest_t *d, int verified, berth_err_t *err)
{
    fs_t *s = FS(bu->store);
    const char *id = bu->id;
    int fd = ((fs_upload_t *)bu)->fd;
    char src[PATH_MAX + 256];
    upload_path(s, id, src, sizeof(src));
    if (!verified) { /* read it back */
        berth_hash_t *h = berth_hash_new(d->alg);
        berth_digest_t got;
        int rc = read_file(src, 0, -1, berth_store__hash_sink, h, err);
        berth_hash_peek(h, &got);
        berth_hash_free(h);
        if (rc != 0)
            return rc;
        if (!berth_digest_equal(&got, d)) {
            berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "content digest %s does not match %s", got.str, d->str);
            if (err != NULL)
                err->code = BERTH_EDIGEST;
            return BERTH_EDIGEST;
        }
    }
    if (fdatasync(fd) != 0)
        return io_error(s, "fsync of upload", id, errno, err);
    return 0;
}

static int fs_upload_place(berth_store_t *st, const char *id, const berth_digest_t *d, berth_err_t *err)
{
    fs_t *s = FS(st);
    char src[PATH_MAX + 256], dst[PATH_MAX + 256], dir[PATH_MAX + 256];
    upload_path(s, id, src, sizeof(src));
    blob_path(s, d, dst, sizeof(dst));
    snprintf(dir, sizeof(dir), "%s/blobs/%s/%.2s", s->root, alg_name(d->alg), berth_digest_hex(d));
    if (mkdir_p(dir) != 0)
        return io_error(s, "creating the blob directory for", id, errno, err);
    struct stat sb;
    if (stat(dst, &sb) == 0) {
        /* same digest, same bytes: content addressing makes the second copy redundant */
        unlink(src);
        return 0;
    }
    if (rename(src, dst) != 0)
        return io_error(s, "rename into place of upload", id, errno, err);
    if (fsync_dir(dir) != 0)
        return io_error(s, "fsync of the blob directory for", id, errno, err);
    char uploads[PATH_MAX + 256];
    snprintf(uploads, sizeof(uploads), "%s/uploads", s->root);
    fsync_dir(uploads);
    return 0;
}

static int fs_upload_each(berth_store_t *st, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data)
{
    fs_t *s = FS(st);
    char dir[PATH_MAX + 256];
    snprintf(dir, sizeof(dir), "%s/uploads", s->root);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int n = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        cb(e->d_name, difftime(now, st.st_mtime), cb_data);
        n++;
    }
    closedir(d);
    return n;
}

static void fs_upload_remove(berth_store_t *st, const char *id)
{
    fs_t *s = FS(st);
    char p[PATH_MAX + 256];
    upload_path(s, id, p, sizeof(p));
    if (unlink(p) != 0 && errno != ENOENT)
        berth_log_warn("cannot remove upload %s: %s", id, strerror(errno));
}

/* The storage root's file system by name, for logs: "full" means little without knowing what is full */
static const char *fs_name(const char *root, char *buf, size_t bufsz)
{
    static const struct {
        unsigned long magic;
        const char *name;
    } names[] = {{0xEF53, "ext4"},       {0x58465342, "xfs"},     {0x01021994, "tmpfs"}, {0x9123683E, "btrfs"},
                 {0x6969, "nfs"},        {0x794c7630, "overlay"}, {0x2fc12fc1, "zfs"},   {0x00c36400, "ceph"},
                 {0x0BD00BD0, "lustre"}, {0x47504653, "gpfs"},    {0x65735546, "fuse"},  {0xF2F52010, "f2fs"}};
    struct statfs f;
    if (statfs(root, &f) != 0)
        return "unknown";
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((unsigned long)f.f_type == names[i].magic)
            return names[i].name;
    snprintf(buf, bufsz, "0x%lx", (unsigned long)f.f_type);
    return buf;
}

static int fs_space(berth_store_t *st, berth_store_space_t *out)
{
    fs_t *s = FS(st);
    struct statvfs v;
    if (statvfs(s->root, &v) != 0)
        return BERTH_ERROR;
    out->free_bytes = (int64_t)v.f_bavail * (int64_t)v.f_frsize;
    out->total_bytes = (int64_t)v.f_blocks * (int64_t)v.f_frsize;
    out->reserve_bytes = st->min_free;
    if (st->min_free < 0) {
        int64_t two_percent = out->total_bytes / 50;
        out->reserve_bytes = two_percent < ((int64_t)1 << 30) ? two_percent : ((int64_t)1 << 30);
    }
    out->below_reserve = out->free_bytes < out->reserve_bytes;
    int was = __atomic_exchange_n(&st->below, out->below_reserve, __ATOMIC_RELAXED);
    char fb[24];
    if (out->below_reserve && !was)
        berth_log_warn("storage %s (%s): %lld bytes free, below the reserve of %lld (storage.min_free_bytes): new uploads "
                       "are refused until space is freed",
                       s->root, fs_name(s->root, fb, sizeof(fb)), (long long)out->free_bytes, (long long)out->reserve_bytes);
    else if (!out->below_reserve && was)
        berth_log_warn("storage %s: %lld bytes free, above the reserve again: uploads are accepted", s->root,
                       (long long)out->free_bytes);
    return 0;
}

static int errno_full(int errnum)
{
    return errnum == ENOSPC || errnum == EDQUOT;
}

static int io_error(const fs_t *s, const char *what, const char *id, int errnum, berth_err_t *err)
{
    char fb[24];
    return berth_err_set(err, errno_full(errnum) ? BERTH_OCI_STORAGE_FULL : BERTH_OCI_INTERNAL,
                         "%s %s failed: %s (errno %d) on the %s file system of %s", what, id, strerror(errnum), errnum,
                         fs_name(s->root, fb, sizeof(fb)), s->root);
}

const berth_store_ops_t berth_store_fs_ops = {.name = "filesystem",
                                              .close = fs_close,
                                              .blob_stat = fs_blob_stat,
                                              .blob_read = fs_blob_read,
                                              .blob_remove = fs_blob_remove,
                                              .blob_each = fs_blob_each,
                                              .blob_serve = fs_blob_serve,
                                              .upload_open = fs_upload_open,
                                              .upload_write = fs_upload_write,
                                              .upload_prepare = fs_upload_prepare,
                                              .upload_place = fs_upload_place,
                                              .upload_close = fs_upload_close,
                                              .upload_read = fs_upload_read,
                                              .upload_size = fs_upload_size,
                                              .upload_open_read = fs_upload_open_read,
                                              .upload_each = fs_upload_each,
                                              .upload_remove = fs_upload_remove,
                                              .space = fs_space,
                                              .edge = fs_edge};
