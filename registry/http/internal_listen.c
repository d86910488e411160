#include "registry/http/internal_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "registry/http/limits.h"

#define UNIX_PREFIX "unix:"

static int listen_unix(const char *sock_path, char *upstream, size_t upstream_size)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path, sock_path, strlen(sock_path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(sock_path); /* a previous run's socket: the run directory is this instance's own */
    /* owner only (connect needs write permission), set before listen: until then nobody can connect */
    if (fd >= 0 && bind(fd, (struct sockaddr *)&un, sizeof(un)) == 0 && chmod(sock_path, 0600) == 0 &&
        listen(fd, berth_limits_backlog()) == 0) {
        snprintf(upstream, upstream_size, UNIX_PREFIX "%s", sock_path);
        return fd;
    }
    berth_log_err("internal listener %s: %s", sock_path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

int berth_internal_listen(const char *sock_path, char *upstream, size_t upstream_size)
{
    struct sockaddr_un un;
    if (sock_path != NULL && strlen(sock_path) < sizeof(un.sun_path) && strlen(UNIX_PREFIX) + strlen(sock_path) < upstream_size)
        return listen_unix(sock_path, upstream, upstream_size);
    if (sock_path != NULL)
        berth_log_warn("internal listener: %s is longer than a Unix socket path may be (%zu bytes); using a loopback TCP port",
                       sock_path, sizeof(un.sun_path) - 1);
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
    snprintf(upstream, upstream_size, "127.0.0.1:%d", ntohs(addr.sin_port));
    return fd;
}

void berth_internal_unlink(const char *upstream)
{
    if (upstream != NULL && strncmp(upstream, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0)
        unlink(upstream + strlen(UNIX_PREFIX));
}
