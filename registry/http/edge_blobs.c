#include "registry/http/edge_blobs.h"

#include <errno.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

#define TMPFS "/dev/shm"
#define TMPFS_MAGIC_NUMBER 0x01021994
#define BASIC_MAX 1000  /* characters of a Basic value the edge takes; each segment between '/' at most NAME_MAX */
#define BEARER_PIECES 9 /* a Bearer token is cut into at most this many pieces (nginx's captures: $1..$9) */
#define BEARER_PIECE NAME_MAX
#define BEARER_MAX (BEARER_PIECES * BEARER_PIECE)

static char dir_path[4096]; /* "" when off */
static char blob_dir[4096]; /* where the links point */
static int dir_ready;       /* __atomic: dir_path may be read */
static long live;           /* __atomic: links kept, as the janitor last counted them plus those made since */
static pthread_t janitor;
static pthread_mutex_t janitor_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t janitor_cv = PTHREAD_COND_INITIALIZER;
static int janitor_on, janitor_stop; /* under janitor_mu */

const char *berth_edge_decisions_path(void)
{
    return __atomic_load_n(&dir_ready, __ATOMIC_ACQUIRE) ? dir_path : NULL;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* "<dir>.pid" names the berthd that owns <dir> */
static int write_owner(void)
{
    char p[sizeof(dir_path) + 8];
    snprintf(p, sizeof(p), "%s.pid", dir_path);
    FILE *f = fopen(p, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f) == 0 ? 0 : -1;
}

/*
 * The directories of this user's berthd instances that died without stopping (SIGKILL, a crash) and whose run_dir
 * will not start again to wipe them: their names hold credentials, so they go as soon as any instance starts.
 */
static void remove_orphans(void)
{
    char pattern[128];
    snprintf(pattern, sizeof(pattern), TMPFS "/berth-edge-%u-*.pid", (unsigned)geteuid());
    glob_t g;
    if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        char line[32] = "";
        if (f != NULL) {
            if (fgets(line, sizeof(line), f) == NULL)
                line[0] = '\0';
            fclose(f);
        }
        long pid = strtol(line, NULL, 10);
        /* a file that reads as no pid may be being written by an instance starting now: kept */
        if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            size_t n = strlen(g.gl_pathv[i]);
            g.gl_pathv[i][n - 4] = '\0'; /* the directory: the name without ".pid" */
            remove_tree(g.gl_pathv[i]);
            g.gl_pathv[i][n - 4] = '.';
            unlink(g.gl_pathv[i]);
        }
    }
    globfree(&g);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* the clock of the file times */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double ctime_s(const struct stat *sb)
{
    return (double)sb->st_ctim.tv_sec + (double)sb->st_ctim.tv_nsec / 1e9;
}

/* the janitor's pass: nftw passes no argument, and only the janitor thread sweeps */
static __thread double sweep_now;
static __thread long sweep_kept;

static int sweep_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    if (flag == FTW_SL) {
        if (sweep_now - ctime_s(sb) >= BERTH_EDGE_DECISION_MS / 1e3)
            unlink(path);
        else
            sweep_kept++;
    } else if (flag == FTW_DP && ftw->level > 0) {
        /* fails while it holds anything: kept. Children come first, so a credential's directories go in the pass
         * that removes its last link; one made just now for a link may go too (berth_edge_decisions_keep retries) */
        rmdir(path);
    }
    return 0;
}

static void *janitor_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&janitor_mu);
    while (!janitor_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)BERTH_EDGE_DECISION_MS * 1000000L / 4;
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&janitor_cv, &janitor_mu, &until);
        if (janitor_stop)
            break;
        pthread_mutex_unlock(&janitor_mu);
        sweep_now = now_s();
        sweep_kept = 0;
        nftw(dir_path, sweep_one, 16, FTW_DEPTH | FTW_PHYS);
        __atomic_store_n(&live, sweep_kept, __ATOMIC_RELAXED);
        pthread_mutex_lock(&janitor_mu);
    }
    pthread_mutex_unlock(&janitor_mu);
    return NULL;
}

void berth_edge_decisions_remove(void)
{
    if (!__atomic_exchange_n(&dir_ready, 0, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&janitor_mu);
    int on = janitor_on;
    janitor_stop = 1;
    janitor_on = 0;
    pthread_cond_signal(&janitor_cv);
    pthread_mutex_unlock(&janitor_mu);
    if (on)
        pthread_join(janitor, NULL);
    remove_tree(dir_path);
    char p[sizeof(dir_path) + 8];
    snprintf(p, sizeof(p), "%s.pid", dir_path);
    unlink(p);
}

static int unlink_link(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_SL)
        unlink(path);
    return 0;
}

void berth_edge_decisions_forget(void)
{
    const char *dir = berth_edge_decisions_path();
    if (dir != NULL)
        nftw(dir, unlink_link, 16, FTW_PHYS);
}

int berth_edge_decisions_dir(const char *run_dir, const char *blob_root)
{
    struct statfs fs;
    if (statfs(TMPFS, &fs) != 0 || (uint32_t)fs.f_type != TMPFS_MAGIC_NUMBER) {
        berth_log_info("edge: %s is no tmpfs: blob GETs by digest are decided by berthd one by one", TMPFS);
        return -1;
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a of run_dir: one directory per instance, found again at restart */
    for (const char *p = run_dir; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(dir_path, sizeof(dir_path), TMPFS "/berth-edge-%u-%016llx", (unsigned)geteuid(), (unsigned long long)h);
    snprintf(blob_dir, sizeof(blob_dir), "%s", blob_root);
    remove_tree(dir_path); /* a predecessor's links (and the credentials in their names) go */
    remove_orphans();
    if (mkdir(dir_path, 0700) != 0 || write_owner() != 0) {
        berth_log_warn("edge: cannot create %s (%s): blob GETs by digest are decided by berthd one by one", dir_path,
                       strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&janitor_mu);
    janitor_stop = 0;
    janitor_on = pthread_create(&janitor, NULL, janitor_main, NULL) == 0;
    pthread_mutex_unlock(&janitor_mu);
    if (!janitor_on) {
        berth_log_warn("edge: cannot start the janitor of %s: blob GETs by digest are decided by berthd one by one", dir_path);
        remove_tree(dir_path);
        return -1;
    }
    __atomic_store_n(&dir_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

static int in(char c, const char *set)
{
    return c != '\0' && strchr(set, c) != NULL;
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* Basic: [A-Za-z0-9+=] segments of 1..NAME_MAX separated by single '/' (base64 has no '.': no "." or ".." name) */
static int basic_ok(const char *v, size_t n)
{
    if (n == 0 || n > BASIC_MAX)
        return 0;
    size_t seg = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '/') {
            if (seg == 0)
                return 0;
            seg = 0;
        } else if (in(v[i], ALNUM "+=") && ++seg <= NAME_MAX) {
            continue;
        } else {
            return 0;
        }
    }
    return seg > 0;
}

/* Bearer: three non-empty [A-Za-z0-9_-] parts joined by '.', as a JWT is (no piece can then be "." or "..") */
static int bearer_ok(const char *v, size_t n)
{
    if (n == 0 || n > BEARER_MAX)
        return 0;
    int dots = 0;
    size_t part = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '.') {
            if (part == 0 || ++dots > 2)
                return 0;
            part = 0;
        } else if (in(v[i], ALNUM "_-")) {
            part++;
        } else {
            return 0;
        }
    }
    return dots == 2 && part > 0;
}

int berth_edge_cred_path(const char *a, char *out, size_t cap)
{
    size_t w = 0;
    if (a == NULL || *a == '\0') {
        w = (size_t)snprintf(out, cap, "-");
    } else if (strncmp(a, "Basic ", 6) == 0 && basic_ok(a + 6, strlen(a + 6))) {
        w = (size_t)snprintf(out, cap, "b/%s", a + 6);
    } else if (strncmp(a, "Bearer ", 7) == 0 && bearer_ok(a + 7, strlen(a + 7))) {
        const char *v = a + 7;
        size_t n = strlen(v);
        w = (size_t)snprintf(out, cap, "t");
        for (size_t i = 0; i < n && w < cap; i += BEARER_PIECE)
            w += (size_t)snprintf(out + w, cap - w, "/%.*s", (int)(n - i < BEARER_PIECE ? n - i : BEARER_PIECE), v + i);
    } else {
        return -1;
    }
    return w < cap ? 0 : -1;
}

/* a repository name as the edge's location takes it: [a-z0-9][a-z0-9._-]* components joined by single '/' */
static int repo_ok(const char *r)
{
    size_t seg = 0;
    for (const char *p = r; *p != '\0'; p++) {
        if (*p == '/') {
            if (seg == 0)
                return 0;
            seg = 0;
        } else if (seg == 0 ? in(*p, "abcdefghijklmnopqrstuvwxyz0123456789") : in(*p, "abcdefghijklmnopqrstuvwxyz0123456789._-")) {
            if (++seg > NAME_MAX)
                return 0;
        } else {
            return 0;
        }
    }
    return seg > 0;
}

static int hex_ok(const char *h)
{
    size_t n = 0;
    while (in(h[n], "0123456789abcdef"))
        n++;
    return n == 64 && h[n] == '\0';
}

/* every directory of `path` below the decisions directory (the name's last part is the link's) */
static int make_parents(char *path)
{
    size_t root = strlen(dir_path);
    for (char *p = path + root + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        int rc = mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
        *p = '/';
        if (rc != 0)
            return -1;
    }
    return 0;
}

void berth_edge_decisions_keep(const char *authorization, const char *repository, const char *digest)
{
    const char *dir = berth_edge_decisions_path();
    if (dir == NULL || digest == NULL || strncmp(digest, "sha256:", 7) != 0 || !hex_ok(digest + 7) || !repo_ok(repository) ||
        __atomic_load_n(&live, __ATOMIC_RELAXED) >= BERTH_EDGE_DECISIONS_MAX)
        return;
    const char *hex = digest + 7;
    char cred[BEARER_MAX + BEARER_PIECES + 8], path[PATH_MAX], target[PATH_MAX];
    if (berth_edge_cred_path(authorization, cred, sizeof(cred)) != 0)
        return;
    int n = snprintf(path, sizeof(path), "%s/%s/~/%s/%s", dir, cred, repository, hex);
    int m = snprintf(target, sizeof(target), "%s/sha256/%.2s/%s", blob_dir, hex, hex);
    if (n < 0 || (size_t)n >= sizeof(path) || m < 0 || (size_t)m >= sizeof(target))
        return;
    /* twice: the janitor may remove an empty directory between make_parents and symlink */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (symlink(target, path) == 0) {
            __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
            return;
        }
        if (errno != ENOENT || make_parents(path) != 0)
            return; /* EEXIST: kept already, it goes when that one does */
    }
}

void berth_edge_decisions_http(FILE *f)
{
    /* berth_edge_cred_path, as a map: the lookahead checks the whole value, the captures cut it; any other header
     * names no link ("" makes "/~/…", which berthd never makes) */
    fprintf(f,
            "  map $http_authorization $berth_cred {\n"
            "    default \"\";\n"
            "    \"\" \"-\";\n"
            "    \"~^Basic (?=[A-Za-z0-9+=]{1,%d}(?:/[A-Za-z0-9+=]{1,%d})*$)(.{1,%d})$\" \"b/$1\";\n"
            "    \"~^Bearer (?=[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$)(.{1,%d})",
            NAME_MAX, NAME_MAX, BASIC_MAX, BEARER_PIECE);
    for (int i = 1; i < BEARER_PIECES; i++)
        fprintf(f, "(.{0,%d})", BEARER_PIECE);
    fprintf(f, "$\" \"t");
    for (int i = 1; i <= BEARER_PIECES; i++)
        fprintf(f, "/$%d", i);
    fprintf(f, "\";\n  }\n");
}

void berth_edge_blob_headers(FILE *f, const char *digest_var)
{
    fprintf(f,
            "      etag off;\n"
            "      default_type application/octet-stream;\n"
            "      add_header docker-content-digest %s always;\n"
            "      add_header etag \"\\\"%s\\\"\" always;\n"
            "      add_header docker-distribution-api-version registry/2.0 always;\n"
            "      add_header cache-control \"max-age=31536000\" always;\n",
            digest_var, digest_var);
}

void berth_edge_decisions_locations(FILE *f, const char *dir)
{
    fprintf(f,
            /* the names berthd keeps links for (repo_ok): any other path is berthd's */
            "    location ~ \"^/v2/(?<berth_repo>[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*)/blobs/"
            "(?<berth_digest>sha256:(?<berth_hex>[0-9a-f]{64}))$\" {\n"
            /* DELETE and the rest: as before (only `return` is safe inside `if`) */
            "      if ($request_method !~ ^(GET|HEAD)$) { return 418; }\n"
            /* no link, or one gone between the look and the open: berthd answers, refusals included */
            "      error_page 403 404 418 500 = @berth_api;\n"
            "      error_page 416 = @blob_range;\n"
            "      root %s;\n"
            /* a removed link must be missed at once, not found again through a kept descriptor */
            "      open_file_cache off;\n"
            "      try_files /$berth_cred/~/$berth_repo/$berth_hex @berth_api;\n",
            dir);
    berth_edge_blob_headers(f, "$berth_digest");
    fprintf(f, "    }\n"
               "    location @berth_api { proxy_pass http://berth_api; proxy_read_timeout 300s; recursive_error_pages on; }\n");
}
