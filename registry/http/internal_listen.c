#include "registry/http/internal_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "registry/http/limits.h"

#define UNIX_PREFIX "unix:"
#define LONGEST_NAME "upload.sock" /* both sockets are Unix ones or neither */

static int listen_tcp(char *addr_out, size_t size)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t alen = sizeof(addr);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, berth_limits_backlog()) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
        berth_log_err("internal listener: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(addr_out, size, "127.0.0.1:%d", ntohs(addr.sin_port));
    return fd;
}

/* -1 (logged) when the socket cannot be made: the caller falls back to a port */
static int listen_unix(const char *run_dir, const char *name, char *addr_out, size_t size)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof(un.sun_path), "%s/%s", run_dir, name);
    unlink(un.sun_path); /* a previous run's: the run directory is claimed, so it is no live instance's */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* owner only (connect needs write permission), set before listen: until then nobody can connect */
    if (fd >= 0 && bind(fd, (struct sockaddr *)&un, sizeof(un)) == 0 && chmod(un.sun_path, 0600) == 0 &&
        listen(fd, berth_limits_backlog()) == 0) {
        snprintf(addr_out, size, UNIX_PREFIX "%s", un.sun_path);
        return fd;
    }
    berth_log_warn("internal listener %s: %s; using a loopback port, which any local process can reach", un.sun_path,
                   strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(un.sun_path);
    return -1;
}

/* The directory exists, is berthd's own and writable by no one else, and no other berthd holds it */
static int claim(const char *run_dir, char *errbuf, size_t errlen)
{
    if (mkdir(run_dir, 0750) != 0 && errno != EEXIST) {
        snprintf(errbuf, errlen, "cannot create the run directory %s: %s", run_dir, strerror(errno));
        return -1;
    }
    int dir = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dir < 0 || fstat(dir, &st) != 0) {
        snprintf(errbuf, errlen, "cannot open the run directory %s: %s", run_dir, strerror(errno));
        if (dir >= 0)
            close(dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(errbuf, errlen, "the run directory %s belongs to uid %u, not to berthd's user (%u)", run_dir, (unsigned)st.st_uid,
                 (unsigned)geteuid());
        close(dir);
        return -1;
    }
    if ((st.st_mode & 022) != 0 && fchmod(dir, st.st_mode & 07755) != 0) { /* others could swap the sockets */
        snprintf(errbuf, errlen, "cannot make the run directory %s private: %s", run_dir, strerror(errno));
        close(dir);
        return -1;
    }
    int lock = openat(dir, "berthd.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    close(dir);
    if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0 && (errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP)) {
        /* a file system without locks (NFS with nolock, Lustre without flock): run unguarded, and say so */
        berth_log_warn("cannot lock the run directory %s (%s): nothing stops a second berthd from using it; give each "
                       "instance its own local run_dir",
                       run_dir, strerror(errno));
        return lock;
    }
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) {
        int busy = lock >= 0 && errno == EWOULDBLOCK;
        snprintf(errbuf, errlen,
                 busy ? "another berthd is running with the run directory %s: give each instance its own (run_dir, "
                        "BERTH_RUN_DIR)"
                      : "cannot lock the run directory %s: %s",
                 run_dir, strerror(errno));
        if (lock >= 0)
            close(lock);
        return -1;
    }
    return lock; /* held, and never closed: the claim ends with the process */
}

int berth_internal_listen(berth_internal_t *out, const char *run_dir, char *errbuf, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->api_fd = out->api_backup_fd = out->upload_fd = -1;
    if (claim(run_dir, errbuf, errlen) < 0)
        return -1;
    struct sockaddr_un un;
    int fits = strlen(run_dir) + 1 + strlen(LONGEST_NAME) < sizeof(un.sun_path);
    if (!fits)
        berth_log_warn("internal listeners: %s is too long for a Unix socket's path (%zu bytes with its name); using loopback "
                       "ports, which any local process can reach",
                       run_dir, sizeof(un.sun_path) - 1);
    if (fits && (out->api_fd = listen_unix(run_dir, "api.sock", out->api, sizeof(out->api))) >= 0 &&
        (out->api_backup_fd = listen_tcp(out->api_backup, sizeof(out->api_backup))) < 0)
        goto Fail;
    if (out->api_fd < 0 && (out->api_fd = listen_tcp(out->api, sizeof(out->api))) < 0)
        goto Fail;
    if (fits)
        out->upload_fd = listen_unix(run_dir, "upload.sock", out->upload, sizeof(out->upload));
    if (out->upload_fd < 0 && (out->upload_fd = listen_tcp(out->upload, sizeof(out->upload))) < 0)
        goto Fail;
    return 0;
Fail:
    snprintf(errbuf, errlen, "cannot listen for the edge in %s (see above)", run_dir);
    int fds[] = {out->api_fd, out->api_backup_fd, out->upload_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    berth_internal_unlink(out);
    return -1;
}

static void unlink_addr(const char *addr)
{
    if (strncmp(addr, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0)
        unlink(addr + strlen(UNIX_PREFIX));
}

void berth_internal_unlink(const berth_internal_t *in)
{
    unlink_addr(in->api);
    unlink_addr(in->upload);
}
