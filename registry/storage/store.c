#include "registry/storage/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "registry/core/log.h"

/* roots are capped well below PATH_MAX so every path built from one fits */
#define ROOT_MAX 3000

struct st_berth_store_t {
    char root[ROOT_MAX];
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
                               : berth_err_set(err, BERTH_OCI_INTERNAL, "cannot open upload: %s", strerror(errno));
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

int berth_store_upload_commit(const berth_store_t *s, const char *id, int fd, const berth_digest_t *d, berth_err_t *err)
{
    char src[PATH_MAX + 256], dst[PATH_MAX + 256], dir[PATH_MAX + 256];
    upload_path(s, id, src, sizeof(src));
    berth_store_blob_path(s, d, dst, sizeof(dst));
    snprintf(dir, sizeof(dir), "%s/blobs/%s/%.2s", s->root, alg_name(d->alg), berth_digest_hex(d));
    if (fdatasync(fd) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "fsync of upload failed: %s", strerror(errno));
    if (mkdir_p(dir) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dst, &st) == 0) {
        /* same digest, same bytes: content addressing makes the second copy redundant */
        unlink(src);
        return 0;
    }
    if (rename(src, dst) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot move upload into place: %s", strerror(errno));
    if (fsync_dir(dir) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "fsync of blob directory failed: %s", strerror(errno));
    char uploads[PATH_MAX + 256];
    snprintf(uploads, sizeof(uploads), "%s/uploads", s->root);
    fsync_dir(uploads);
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
