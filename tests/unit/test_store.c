/* registry/storage/store.c on a real temporary directory: upload files, their locks, and commit into place. */
#include "registry/storage/store.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void count(const char *id, double age, void *data)
{
    (void)id;
    (void)age;
    (*(int *)data)++;
}

static int read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len);
    close(fd);
    return (int)n;
}

int main(void)
{
    char root[] = "/tmp/berth-test-store-XXXXXX";
    berth_err_t err = {0};
    berth_store_t *s = NULL;
    int fd = -1, fd2 = -1, n = 0;
    int64_t size = -1;
    const char data[] = "layer bytes";
    berth_digest_t d;
    char path[4096], buf[64];

    ok(mkdtemp(root) != NULL && berth_store_open(&s, root, &err) == BERTH_OK, "a store opens on an empty directory");
    ok(berth_store_upload_open(s, "u1", 0, &fd, &size, &err) == BERTH_ENOTFOUND, "an unknown upload is not found");
    berth_err_clear(&err);
    ok(berth_store_upload_open(s, "u1", 1, &fd, &size, &err) == BERTH_OK && size == 0, "created, empty");
    ok(berth_store_write_all(fd, data, sizeof(data) - 1) == 0, "bytes appended");
    ok(berth_store_upload_open(s, "u1", 0, &fd2, &size, &err) == BERTH_ECONFLICT,
       "a second writer is refused while the first holds it");
    berth_err_clear(&err);
    ok(berth_store_upload_size(s, "u1", &size) == BERTH_OK && size == (int64_t)sizeof(data) - 1, "its size is what was written");
    ok(berth_store_upload_each(s, count, &n) == 1 && n == 1, "the purge walk sees one upload");

    berth_digest_of(&d, BERTH_DIGEST_SHA256, data, sizeof(data) - 1);
    ok(berth_store_upload_commit(s, "u1", fd, &d, &err) == BERTH_OK, "commit");
    close(fd);
    berth_store_blob_path(s, &d, path, sizeof(path));
    int got = read_file(path, buf, sizeof(buf));
    ok(got == (int)sizeof(data) - 1 && memcmp(buf, data, (size_t)got) == 0, "the blob path holds exactly the bytes");
    ok(berth_store_upload_size(s, "u1", &size) == BERTH_ENOTFOUND, "the upload file is gone after commit");

    /* the same content again: the upload is dropped, the stored blob stays */
    ok(berth_store_upload_open(s, "u2", 1, &fd, &size, &err) == BERTH_OK && berth_store_write_all(fd, data, sizeof(data) - 1) == 0,
       "a second upload of the same bytes");
    ok(berth_store_upload_commit(s, "u2", fd, &d, &err) == BERTH_OK, "committing an already stored blob succeeds");
    close(fd);
    got = read_file(path, buf, sizeof(buf));
    ok(got == (int)sizeof(data) - 1 && berth_store_upload_size(s, "u2", &size) == BERTH_ENOTFOUND, "blob intact, upload dropped");

    ok(berth_store_upload_open(s, "u3", 1, &fd, &size, &err) == BERTH_OK, "a third upload");
    close(fd);
    berth_store_upload_remove(s, "u3");
    berth_store_upload_remove(s, "u3");
    ok(berth_store_upload_size(s, "u3", &size) == BERTH_ENOTFOUND, "remove deletes it; removing twice is fine");

    berth_store_close(s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ok(system(cmd) == 0, "cleanup"); // NOLINT(cert-env33-c): removes the test's own mkdtemp directory
    return tap_done();
}
