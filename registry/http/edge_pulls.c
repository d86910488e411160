#include "registry/http/edge_pulls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/audit.h"
#include "core/bgloop.h"
#include "core/log.h"

#define PERIOD_MS 1000
/* the file as nginx writes it, then moved aside once (nginx may still be writing to it), then twice (read) */
static const char *const stage[] = {BERTH_EDGE_PULLS_LOG, BERTH_EDGE_PULLS_LOG ".1", BERTH_EDGE_PULLS_LOG ".2"};
#define STAGES (int)(sizeof(stage) / sizeof(stage[0]))

static char dir[4096];
static pid_t edge = -1; /* __atomic */
static berth_bgloop_t *loop;
static unsigned long bad;        /* lines that were not one, since start (only the loop's thread and stop touch it) */
static unsigned long pulls_read; /* __atomic: pulls read */

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int nibble(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* the next space-separated field of [*p, end): its start and length, NULL past the end */
static const char *field(const char **p, const char *end, size_t *n)
{
    const char *s = *p;
    const char *sp = memchr(s, ' ', (size_t)(end - s));
    *n = (size_t)((sp != NULL ? sp : end) - s);
    *p = sp != NULL ? sp + 1 : end;
    return *n > 0 ? s : NULL;
}

int berth_edge_pulls_parse(const char *line, size_t len, berth_edge_pull_t *out)
{
    const char *p = line, *end = line + len;
    size_t rn, wn, hn, un;
    const char *remote = field(&p, end, &rn), *who = field(&p, end, &wn), *hex = field(&p, end, &hn), *uri = field(&p, end, &un);
    int anonymous = who != NULL && wn == 1 && who[0] == '-'; /* nginx writes an empty variable as "-" */
    if (remote == NULL || rn >= 64 || who == NULL || (!anonymous && wn % 2 != 0) || wn / 2 >= sizeof(out->who) || hex == NULL ||
        hn != 64 || uri == NULL || p != end || un < 16 || strncmp(uri, "/v2/", 4) != 0)
        return -1;
    char *addr = out->remote, *name = out->who, path[sizeof(out->repo) + sizeof(out->ref) + 16];
    for (size_t i = 0; i < rn; i++) /* an IPv4 or IPv6 address */
        if (!is_hex((char)(remote[i] | 0x20)) && remote[i] != '.' && remote[i] != ':')
            return -1;
    snprintf(addr, sizeof(out->remote), "%.*s", (int)rn, remote);
    if (anonymous) {
        name[0] = '\0';
    } else {
        for (size_t i = 0; i < wn; i++)
            if (!is_hex(who[i]))
                return -1;
        for (size_t i = 0; i < wn / 2; i++)
            if ((name[i] = (char)(nibble(who[2 * i]) << 4 | nibble(who[2 * i + 1]))) == '\0')
                return -1;
        name[wn / 2] = '\0';
    }
    for (size_t i = 0; i < hn; i++)
        if (!is_hex(hex[i]))
            return -1;
    snprintf(out->digest, sizeof(out->digest), "sha256:%.64s", hex);
    if (un >= sizeof(path))
        return -1;
    memcpy(path, uri + 4, un - 4);
    path[un - 4] = '\0';
    char *m = NULL;
    for (char *s = path; (s = strstr(s, "/manifests/")) != NULL; s++)
        m = s; /* the last one: a repository may be named ".../manifests/..." */
    size_t repo_len = m != NULL ? (size_t)(m - path) : 0, ref_len = m != NULL ? strlen(m + 11) : 0;
    if (repo_len == 0 || repo_len >= sizeof(out->repo) || ref_len == 0 || ref_len >= sizeof(out->ref))
        return -1;
    memcpy(out->repo, path, repo_len);
    out->repo[repo_len] = '\0';
    memcpy(out->ref, m + 11, ref_len + 1);
    return 0;
}

static void read_file(const char *name)
{
    char path[sizeof(dir) + 32], line[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        if (errno != ENOENT) /* kept: the file before it is not moved onto it */
            berth_log_warn("edge pulls: cannot read %s: %s", path, strerror(errno));
        return;
    }
    if (unlink(path) != 0) /* first: a berthd killed while reading loses these lines rather than audit them twice */
        berth_log_warn("edge pulls: cannot remove %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') { /* longer than any line nginx writes here: skipped whole */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            bad++;
            continue;
        }
        berth_edge_pull_t p;
        if (berth_edge_pulls_parse(line, n - 1, &p) == 0) {
            berth_audit_pull(p.who, p.remote, p.repo, p.ref, p.digest);
            __atomic_add_fetch(&pulls_read, 1, __ATOMIC_RELAXED);
        } else
            bad++;
    }
    fclose(f);
}

static int move(int from, int to)
{
    char a[sizeof(dir) + 32], b[sizeof(dir) + 32];
    snprintf(a, sizeof(a), "%s/%s", dir, stage[from]);
    snprintf(b, sizeof(b), "%s/%s", dir, stage[to]);
    struct stat st;
    if (lstat(a, &st) != 0 || (from == 0 && st.st_size == 0))
        return 0;
    if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE) != 0) { /* EEXIST: that one is not read yet */
        if (errno != EEXIST)
            berth_log_warn("edge pulls: cannot move %s: %s", a, strerror(errno));
        return 0;
    }
    return 1;
}

static void tick(void *data, int stopping)
{
    (void)data;
    if (stopping)
        return; /* berth_edge_pulls_stop reads what is left, once the edge has stopped */
    read_file(stage[STAGES - 1]);
    for (int s = STAGES - 2; s >= 1; s--)
        move(s, s + 1);
    pid_t pid = __atomic_load_n(&edge, __ATOMIC_ACQUIRE);
    if (pid > 0 && move(0, 1))
        kill(pid, SIGUSR1); /* nginx reopens its logs: new lines go to a new pulls.log */
}

static void read_all(void)
{
    for (int s = STAGES - 1; s >= 0; s--)
        read_file(stage[s]);
    if (bad > 0)
        berth_log_warn("edge pulls: %lu lines of the edge's pull log were not pulls (ignored)", bad);
    bad = 0;
}

int berth_edge_pulls_start(const char *run_dir)
{
    snprintf(dir, sizeof(dir), "%s/" BERTH_EDGE_PULLS_DIR, run_dir);
    if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || chmod(dir, 0700) != 0) {
        berth_log_err("edge pulls: cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    read_all();
    return berth_bgloop_start(&loop, "berth-edge-pull", PERIOD_MS, tick, NULL) == 0 ? 0 : -1;
}

unsigned long berth_edge_pulls_read(void)
{
    return __atomic_load_n(&pulls_read, __ATOMIC_RELAXED);
}

void berth_edge_pulls_edge(pid_t pid)
{
    __atomic_store_n(&edge, pid, __ATOMIC_RELEASE);
}

void berth_edge_pulls_pause(void)
{
    berth_edge_pulls_edge(-1);
    berth_bgloop_stop(loop);
    loop = NULL;
}

void berth_edge_pulls_stop(void)
{
    berth_edge_pulls_pause();
    read_all();
}
