#include "registry/http/listen_check.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int berth_listen_check(const char *addr, const char *key, const char *env, char *errbuf, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0' || (size_t)(colon - addr) >= sizeof(host)) {
        snprintf(errbuf, errlen, "%s \"%s\" is not host:port (set %s=host:port)", key, addr, env);
        return -1;
    }
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') { /* [::1]:5000 */
        h++;
        hlen -= 2;
    }
    snprintf(host, sizeof(host), "%.*s", (int)hlen, h);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    int gai = getaddrinfo(host[0] != '\0' && strcmp(host, "*") != 0 ? host : NULL, colon + 1, &hints, &res);
    if (gai != 0) {
        snprintf(errbuf, errlen, "%s %s: %s (set %s=host:port)", key, addr, gai_strerror(gai), env);
        return -1;
    }
    int rc = 0, err = 0;
    for (struct addrinfo *ai = res; ai != NULL && rc == 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1) != 0) {
            err = errno;
            rc = -1;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (rc == 0)
        return 0;
    if (err == EADDRINUSE)
        snprintf(errbuf, errlen,
                 "%s is already in use by another program (Address already in use): choose another port with %s "
                 "(%s=host:port), or stop what listens there",
                 addr, key, env);
    else if (err == EACCES)
        snprintf(errbuf, errlen, "%s needs privileges to listen on (%s): choose a port above 1023 with %s (%s=host:port)", addr,
                 strerror(err), key, env);
    else
        snprintf(errbuf, errlen, "cannot listen on %s (%s): check %s (%s=host:port)", addr, strerror(err), key, env);
    return -1;
}
