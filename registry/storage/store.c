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

/* roots are capped well below PATH_MAX so every path built from one fits */
#define ROOT_MAX 3000

struct st_berth_store_t {
    char root[ROOT_MAX];
    int64_t min_free; /* -1: min(1 GiB, 2 % of the file system) */
    int below;        /* last state logged, so each crossing is logged once */
};

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
    berth_store_t *s = calloc(1, sizeof(*s));
    snprintf(s->root, sizeof(s->root), "%s", root);
    s->min_free = -1;
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
    *out = s;
    return 0;
}

void berth_store_close(berth_store_t *s)
{
    free(s);
}

const char *berth_store_root(const berth_store_t *s)
{
    return s->root;
}

static const char *alg_name(berth_digest_alg_t a)
{
    return a == BERTH_DIGEST_SHA256 ? "sha256" : "sha512";
}

void berth_store_blob_relpath(const berth_digest_t *d, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/%.2s/%s", alg_name(d->alg), berth_digest_hex(d), berth_digest_hex(d));
}

void berth_store_blob_path(const berth_store_t *s, const berth_digest_t *d, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/blobs/%s/%.2s/%s", s->root, alg_name(d->alg), berth_digest_hex(d), berth_digest_hex(d));
}

static void upload_path(const berth_store_t *s, const char *id, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/uploads/%s", s->root, id);
}

int berth_store_upload_open(const berth_store_t *s, const char *id, int create, int *fd_out, int64_t *size_out, berth_err_t *err)
{
    char p[PATH_MAX + 256];
    upload_path(s, id, p, sizeof(p));
    int fd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0640);
    if (fd < 0)
        return errno == ENOENT ? berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL)
                               : berth_store_io_error(s, "open of upload", id, errno, err);
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
    *fd_out = fd;
    *size_out = end;
    return 0;
}

int berth_store_upload_open_read(const berth_store_t *s, const char *id, int *fd_out)
{
    char p[PATH_MAX + 256];
    upload_path(s, id, p, sizeof(p));
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return BERTH_ENOTFOUND;
    *fd_out = fd;
    return 0;
}

int berth_store_upload_size(const berth_store_t *s, const char *id, int64_t *size_out)
{
    char p[PATH_MAX + 256];
    struct stat st;
    upload_path(s, id, p, sizeof(p));
    if (stat(p, &st) != 0)
        return BERTH_ENOTFOUND;
    *size_out = st.st_size;
    return 0;
}

int berth_store_upload_sync(const berth_store_t *s, const char *id, int fd, berth_err_t *err)
{
    if (fdatasync(fd) != 0)
        return berth_store_io_error(s, "fsync of upload", id, errno, err);
    return 0;
}

int berth_store_upload_place(const berth_store_t *s, const char *id, const berth_digest_t *d, berth_err_t *err)
{
    char src[PATH_MAX + 256], dst[PATH_MAX + 256], dir[PATH_MAX + 256];
    upload_path(s, id, src, sizeof(src));
    berth_store_blob_path(s, d, dst, sizeof(dst));
    snprintf(dir, sizeof(dir), "%s/blobs/%s/%.2s", s->root, alg_name(d->alg), berth_digest_hex(d));
    if (mkdir_p(dir) != 0)
        return berth_store_io_error(s, "creating the blob directory for", id, errno, err);
    struct stat st;
    if (stat(dst, &st) == 0) {
        /* same digest, same bytes: content addressing makes the second copy redundant */
        unlink(src);
        return 0;
    }
    if (rename(src, dst) != 0)
        return berth_store_io_error(s, "rename into place of upload", id, errno, err);
    if (fsync_dir(dir) != 0)
        return berth_store_io_error(s, "fsync of the blob directory for", id, errno, err);
    char uploads[PATH_MAX + 256];
    snprintf(uploads, sizeof(uploads), "%s/uploads", s->root);
    fsync_dir(uploads);
    return 0;
}

int berth_store_upload_commit(const berth_store_t *s, const char *id, int fd, const berth_digest_t *d, berth_err_t *err)
{
    int rc = berth_store_upload_sync(s, id, fd, err);
    return rc != 0 ? rc : berth_store_upload_place(s, id, d, err);
}

int berth_store_blob_remove(const berth_store_t *s, const berth_digest_t *d, berth_err_t *err)
{
    char path[PATH_MAX + 256];
    berth_store_blob_path(s, d, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT)
        return berth_store_io_error(s, "unlink of blob", d->str, errno, err);
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

int berth_store_blob_each(const berth_store_t *s, berth_store_blob_fn cb, void *cb_data)
{
    static const struct {
        const char *name;
        berth_digest_alg_t alg;
    } algs[] = {{"sha256", BERTH_DIGEST_SHA256}, {"sha512", BERTH_DIGEST_SHA512}};
    time_t now = time(NULL);
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        char top[PATH_MAX + 256];
        snprintf(top, sizeof(top), "%s/blobs/%s", s->root, algs[a].name);
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

int berth_store_upload_each(const berth_store_t *s, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data)
{
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

void berth_store_upload_remove(const berth_store_t *s, const char *id)
{
    char p[PATH_MAX + 256];
    upload_path(s, id, p, sizeof(p));
    if (unlink(p) != 0 && errno != ENOENT)
        berth_log_warn("cannot remove upload %s: %s", id, strerror(errno));
}

void berth_store_set_reserve(berth_store_t *s, int64_t min_free)
{
    s->min_free = min_free;
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

int berth_store_space(berth_store_t *s, berth_store_space_t *out)
{
    struct statvfs v;
    memset(out, 0, sizeof(*out));
    if (statvfs(s->root, &v) != 0)
        return BERTH_ERROR;
    out->free_bytes = (int64_t)v.f_bavail * (int64_t)v.f_frsize;
    out->total_bytes = (int64_t)v.f_blocks * (int64_t)v.f_frsize;
    out->reserve_bytes = s->min_free;
    if (s->min_free < 0) {
        int64_t two_percent = out->total_bytes / 50;
        out->reserve_bytes = two_percent < ((int64_t)1 << 30) ? two_percent : ((int64_t)1 << 30);
    }
    out->below_reserve = out->free_bytes < out->reserve_bytes;
    int was = __atomic_exchange_n(&s->below, out->below_reserve, __ATOMIC_RELAXED);
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

int berth_store_check_reserve(berth_store_t *s, berth_err_t *err)
{
    berth_store_space_t sp;
    if (berth_store_space(s, &sp) != 0 || !sp.below_reserve)
        return 0;
    return berth_err_set(err, BERTH_OCI_STORAGE_FULL, "upload refused: %lld bytes free, reserve %lld", (long long)sp.free_bytes,
                         (long long)sp.reserve_bytes);
}

int berth_store_errno_full(int errnum)
{
    return errnum == ENOSPC || errnum == EDQUOT;
}

int berth_store_io_error(const berth_store_t *s, const char *what, const char *id, int errnum, berth_err_t *err)
{
    char fb[24];
    return berth_err_set(err, berth_store_errno_full(errnum) ? BERTH_OCI_STORAGE_FULL : BERTH_OCI_INTERNAL,
                         "%s %s failed: %s (errno %d) on the %s file system of %s", what, id, strerror(errnum), errnum,
                         fs_name(s->root, fb, sizeof(fb)), s->root);
}

int berth_store_write_all(int fd, const void *buf, size_t len)
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
