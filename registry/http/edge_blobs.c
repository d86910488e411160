#include "registry/http/edge_blobs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/log.h"

#define TMPFS "/dev/shm"
#define TMPFS_MAGIC_NUMBER 0x01021994

static char dir_path[4096]; /* "" when off */
static int dir_ready;       /* __atomic: dir_path may be read */

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

/* "<dir>.pid" names the berthd that owns <dir> (beside it: nginx's cache loader removes foreign files inside) */
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
 * will not start again to wipe them: their keys hold credentials, so they go as soon as any instance starts.
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

void berth_edge_decisions_remove(void)
{
    if (!__atomic_exchange_n(&dir_ready, 0, __ATOMIC_ACQ_REL))
        return;
    remove_tree(dir_path);
    char p[sizeof(dir_path) + 8];
    snprintf(p, sizeof(p), "%s.pid", dir_path);
    unlink(p);
}

/*
 * An entry is made void by zeroing the first field of nginx's cache file header, its format version: nginx then
 * reads it as a miss (logged at info, below the edge's level), asks berthd and replaces the file. Unlinking it
 * instead would make nginx's cache manager log a crit "unlink() failed" for each one it later expires.
 */
static int void_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag != FTW_F || sb->st_size < (off_t)sizeof(unsigned long))
        return 0;
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        const unsigned long zero = 0;
        if (pwrite(fd, &zero, sizeof(zero), 0) != (ssize_t)sizeof(zero))
            berth_log_warn("edge: cannot void the kept decision %s: %s", path, strerror(errno));
        close(fd);
    }
    return 0;
}

void berth_edge_decisions_forget(void)
{
    const char *dir = berth_edge_decisions_path();
    if (dir != NULL)
        nftw(dir, void_one, 16, FTW_PHYS);
}

int berth_edge_decisions_dir(const char *run_dir)
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
    remove_tree(dir_path); /* a predecessor's answers (and the credentials in their keys) go */
    remove_orphans();
    if (mkdir(dir_path, 0700) != 0 || write_owner() != 0) {
        berth_log_warn("edge: cannot create %s (%s): blob GETs by digest are decided by berthd one by one", dir_path,
                       strerror(errno));
        return -1;
    }
    __atomic_store_n(&dir_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

void berth_edge_decisions_http(FILE *f, const char *dir, const char *blob_prefix)
{
    /* 1 MiB of keys holds about 8,000 entries; inactive entries go after 10 s, files are a page each on the tmpfs */
    fprintf(f,
            "  proxy_cache_path %s levels=1 keys_zone=berth_decisions:4m max_size=64m inactive=10s use_temp_path=off;\n"
            "  map $upstream_http_x_accel_redirect $berth_names_no_file { \"\" 1; default 0; }\n"
            /* berthd's X-Accel-Redirect target -> the file below the blob root; "/-" (never a file) otherwise */
            "  map $berth_blob $berth_blob_file { \"~^%s(sha256/[0-9a-f]{2}/[0-9a-f]{64})$\" /$1; default /-; }\n",
            dir, blob_prefix);
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

void berth_edge_decisions_locations(FILE *f, const char *blob_root)
{
    fprintf(f,
            "    location ~ \"^/v2/.+/blobs/sha256:[0-9a-f]{64}$\" {\n"
            /* DELETE and the rest: as before (only `return` is safe inside `if`) */
            "      if ($request_method !~ ^(GET|HEAD)$) { return 418; }\n"
            "      auth_request /_berth/decision;\n"
            "      auth_request_set $berth_blob $upstream_http_x_accel_redirect;\n"
            "      auth_request_set $berth_digest $upstream_http_docker_content_digest;\n"
            /* any other refusal or error of the decision, and a file gone meanwhile: berthd answers it itself */
            "      error_page 403 404 418 500 = @berth_api;\n"
            /* a 401 is answered here (auth_request copied berthd's challenge): asking berthd again would count a
             * failed login twice */
            "      error_page 401 = @berth_unauthorized;\n"
            "      error_page 416 = @blob_range;\n"
            "      root %s;\n"
            "      try_files $berth_blob_file @berth_api;\n",
            blob_root);
    berth_edge_blob_headers(f, "$berth_digest");
    fprintf(f,
            "    }\n"
            "    location = /_berth/decision {\n"
            "      internal;\n"
            "      proxy_pass http://berth_api$request_uri;\n"
            /* a HEAD marked as a decision: berthd decides and names the file, and for a proxy project's blob it
             * does not hold yet asks no upstream (the client's own request, proxied next, does that) */
            "      proxy_method HEAD;\n"
            "      proxy_pass_request_body off;\n"
            "      " BERTH_EDGE_PROXY_HEADERS "\n"
            "      proxy_set_header Content-Length \"\"; proxy_set_header X-Berth-Decision 1;\n"
            "      proxy_cache berth_decisions;\n"
            /* the credential is the whole key's first part: another credential never finds this entry (nginx
             * compares the stored key, not only its hash); the /v2 gate reads nothing else of the caller's */
            "      proxy_cache_key \"$http_authorization\\n$request_method $request_uri\";\n"
            "      proxy_cache_methods GET HEAD;\n"
            "      proxy_cache_valid 200 %ds;\n"
            "      proxy_cache_lock on; proxy_cache_lock_timeout 2s;\n"
            /* an entry voided in place (berth_edge_decisions_forget) must be read again, not through a kept fd */
            "      open_file_cache off;\n"
            /* only nginx's own validity counts; only a 200 that names a file is kept */
            "      proxy_ignore_headers X-Accel-Redirect X-Accel-Expires Expires Cache-Control Vary;\n"
            "      proxy_no_cache $berth_names_no_file;\n"
            /* every other refusal or error becomes a bare 403 here, and the main request asks berthd again to get
             * berthd's own answer */
            "      proxy_intercept_errors on;\n"
            "      error_page 300 301 302 303 304 307 308 400 403 404 405 409 416 429 500 502 503 504 507 = @berth_no;\n"
            "    }\n"
            "    location @berth_no { return 403; }\n"
            /* the gate's one 401 body (auth/gate.c refuse()) */
            "    location @berth_unauthorized {\n"
            "      default_type application/json;\n"
            "      add_header docker-distribution-api-version registry/2.0 always;\n"
            "      return 401 '{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"authentication required\",\"detail\":{}}]}';\n"
            "    }\n"
            "    location @berth_api { proxy_pass http://berth_api; proxy_read_timeout 300s; recursive_error_pages on; }\n",
            BERTH_EDGE_DECISION_SECONDS);
}
