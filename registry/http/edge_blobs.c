#include "registry/http/edge_blobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "core/ref.h"
#include "registry/http/edge.h"

#define TMPFS "/dev/shm"
#define TMPFS_MAGIC_NUMBER 0x01021994
#define BASIC_MAX 1000  /* characters of a Basic value the edge takes; each segment between '/' at most NAME_MAX */
#define BEARER_PIECES 9 /* a Bearer token is cut into at most this many pieces (nginx's captures: $1..$9) */
#define BEARER_PIECE NAME_MAX
#define BEARER_MAX (BEARER_PIECES * BEARER_PIECE)
/* deeper names are asked of berthd every time: each component is a directory made on the loop thread */
#define KEEP_TOKEN_PARTS (1 + BEARER_PIECES) /* "t" and a token's pieces */
#define KEEP_BASIC_PARTS (1 + 5)             /* "b" and a Basic value of at most 5 segments (four '/') */
#define KEEP_REPO_PARTS 6
/* a kept manifest's link is named "<hex>-<who in hex>.<ext>": NAME_MAX bounds who */
#define WHO_MAX ((NAME_MAX - 64 - 1 - 4) / 2)
/* links go in bucket directories named for the half second of wall-clock time nginx looks in them: "<seconds>a" for
 * .000-.499, "<seconds>b" for .500-.999 (the map of $msec in berth_edge_decisions_http). A link is made in the
 * bucket of now and of the next half second and nginx looks only in the bucket of its own now, so a link is found
 * for 0.5-1 s after it was made, whatever berthd does meanwhile: a stopped or frozen berthd's edge stops finding its
 * links on time by itself. The janitor only removes the buckets nginx no longer looks in. */
#define BUCKET_MS 500
#define BUCKET_NAME 24 /* "<seconds>a" */
#define KEEP_BUCKETS 2 /* now's and the next */
/* <dir>/BLOBS links to the blob root, and every kept link points through it: a target under 128 bytes is kept in
 * the inode, a longer one costs tmpfs a page of its own */
#define BLOBS "b"

static char dir_path[4096]; /* "" when off */
static int dir_ready;       /* __atomic: dir_path may be read */
static long live;           /* __atomic: inodes below the buckets (directories and links) made and not yet removed */
static long max_live = BERTH_EDGE_DECISIONS_MAX;
static long live_bytes;    /* __atomic: bytes of the manifests kept below the buckets (their only regular files) */
static uint64_t epoch = 1; /* __atomic: moves at every forget, under buckets_lock held for writing */
/* readers: keep, while it makes its links; writer: the janitor or a forget renaming buckets away. A writer-preferring
 * lock, so a stream of keeps cannot hold a forget back */
static pthread_rwlock_t buckets_lock;
static unsigned long trash; /* names of renamed-away buckets, ".<n>": no name the edge's try_files looks up */
static pthread_t janitor;
static pthread_mutex_t janitor_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t janitor_cv;
static int janitor_on, janitor_stop; /* under janitor_mu */

const char *berth_edge_decisions_path(void)
{
    return __atomic_load_n(&dir_ready, __ATOMIC_ACQUIRE) ? dir_path : NULL;
}

long berth_edge_decisions_bytes(void)
{
    return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

uint64_t berth_edge_decisions_epoch(void)
{
    return __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
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

static void mono_add(struct timespec *t, long ms)
{
    long ns = t->tv_nsec + ms * 1000000L;
    t->tv_sec += ns / 1000000000L;
    t->tv_nsec = ns % 1000000000L;
}

static int mono_passed(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/*
 * Remove what directory `fd` holds, each entry by its name relative to its directory (a path from the root is
 * ~2 KiB for a token's link, and resolving it cost ~20 us an inode), counting every inode off `live`. Stops with 1
 * when `until` (if any) has passed; what is left goes in a later pass.
 */
static int empty_dir(int fd, const struct timespec *until, unsigned *calls)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (until != NULL && ++*calls % 256 == 0 && mono_passed(until)) {
            rc = 1; /* the next rotation is due */
            break;
        }
        int flags = 0;
        struct stat st;
        long bytes = 0; /* a kept manifest's: its content is the only regular file here */
        if (e->d_type == DT_REG && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            bytes = (long)st.st_size;
        if (e->d_type == DT_DIR) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub >= 0 ? empty_dir(sub, until, calls) : 0;
            flags = AT_REMOVEDIR;
        }
        if (rc == 0 && unlinkat(dirfd(d), e->d_name, flags) == 0) {
            __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
            __atomic_sub_fetch(&live_bytes, bytes, __ATOMIC_RELAXED);
        }
    }
    closedir(d);
    return rc;
}

/* A renamed-away (or unrenamable) tree `path` emptied and removed; a bucket directory itself was never counted, a
 * repository's "~" directory was */
static int empty_tree(const char *path, const struct timespec *until, int top_counted)
{
    unsigned calls = 0;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int rc = empty_dir(fd, until, &calls);
    if (rc == 0 && rmdir(path) == 0 && top_counted)
        __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
    return rc;
}

/* The bucket of wall-clock time `t`: half seconds since the epoch, as nginx's $msec names them */
static int64_t bucket_of(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 2 + (t->tv_nsec >= 500000000L);
}

static int64_t bucket_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return bucket_of(&t);
}

static void bucket_name(int64_t b, char out[BUCKET_NAME])
{
    snprintf(out, BUCKET_NAME, "%lld%c", (long long)(b / 2), b % 2 != 0 ? 'b' : 'a');
}

/* a bucket's name back to its number; -1 for any other name ("b", ".<n>") */
static int64_t bucket_parse(const char *name)
{
    int64_t sec = 0;
    size_t i = 0;
    for (; name[i] >= '0' && name[i] <= '9' && i < 18; i++)
        sec = sec * 10 + (name[i] - '0');
    if (i == 0 || (name[i] != 'a' && name[i] != 'b') || name[i + 1] != '\0')
        return -1;
    return sec * 2 + (name[i] == 'b');
}

/* `from` goes whole, in one rename into the trash (buckets_lock held for writing); `top_counted` as for empty_tree */
static void retire_path(const char *from, const char *trash_prefix, int top_counted)
{
    char to[sizeof(dir_path) + 32];
    snprintf(to, sizeof(to), "%s/%s%lu", dir_path, trash_prefix, trash++);
    if (rename(from, to) != 0 && errno != ENOENT) {
        /* its links must not outlive this moment: removed here, however long it takes */
        berth_log_warn("edge: cannot rename %s away (%s): emptied in place", from, strerror(errno));
        empty_tree(from, NULL, top_counted);
    }
}

/* Bucket `name` whole, or only `repository`'s links in it (not NULL) */
static void retire(const char *name, const char *repository)
{
    char from[PATH_MAX];
    int n = repository == NULL ? snprintf(from, sizeof(from), "%s/%.23s", dir_path, name)
                               : snprintf(from, sizeof(from), "%s/%s/%s/~", dir_path, name, repository);
    if (n > 0 && (size_t)n < sizeof(from)) /* else a path keep never makes */
        retire_path(from, repository == NULL ? "." : ".~", repository != NULL);
}

/* The buckets the janitor has seen and since when (monotonic): a wall clock set back must not make a bucket's
 * links findable again long after they were made (janitor only, under buckets_lock held for writing) */
#define SEEN_MAX 64
#define BUCKET_AGE_MS 2500 /* the oldest a bucket gets normally: made 0.5 s before its half second, kept 0.5 s after */
static struct {
    int64_t bucket;
    struct timespec since;
} seen[SEEN_MAX];
static int seen_n;

/* whether bucket `b` (in the listing now) has been seen for longer than BUCKET_AGE_MS; records it if new */
static int seen_too_long(int64_t b)
{
    for (int i = 0; i < seen_n; i++) {
        if (seen[i].bucket == b) {
            struct timespec until = seen[i].since;
            mono_add(&until, BUCKET_AGE_MS);
            return mono_passed(&until);
        }
    }
    if (seen_n < SEEN_MAX) {
        seen[seen_n].bucket = b;
        clock_gettime(CLOCK_MONOTONIC, &seen[seen_n++].since);
    }
    return 0;
}

static void seen_forget(int64_t b)
{
    for (int i = 0; i < seen_n; i++)
        if (seen[i].bucket == b)
            seen[i--] = seen[--seen_n];
}

static void retire_one(int64_t b, const char *repository)
{
    char name[BUCKET_NAME];
    bucket_name(b, name);
    retire(name, repository);
    if (repository == NULL)
        seen_forget(b);
}

/* the top directory, open from start to stop: a forget lists it with no new descriptor (none may be left) */
static DIR *top_dir;

/*
 * Under buckets_lock held for writing: every bucket (`all`) or those nginx no longer looks in — any but the last,
 * now's and the next (an older one, a newer one after the clock was set back, one seen for longer than a bucket
 * lives; the last stays for an nginx whose cached clock has not yet moved on: it lags, it never leads) — each
 * whole, or only `repository`'s links in each (not NULL). The buckets nginx may look in around now go first by
 * name, with no listing; then every other the listing shows.
 */
static void retire_buckets(int all, const char *repository)
{
    int64_t now = bucket_now();
    if (all)
        for (int64_t b = now - 2; b <= now + 2; b++)
            retire_one(b, repository);
    if (top_dir == NULL) {
        berth_log_warn("edge: cannot list %s: only the buckets around now were retired", dir_path);
        return;
    }
    int64_t found[64];
    int more = 1;
    while (more) { /* in batches: renames while reading may show an entry twice (ENOENT then) or not at all */
        int n = 0;
        rewinddir(top_dir);
        more = 0;
        for (struct dirent *e; (e = readdir(top_dir)) != NULL;) {
            int64_t b = bucket_parse(e->d_name);
            if (b < 0 || (all && b >= now - 2 && b <= now + 2))
                continue;
            if (!all && b >= now - 1 && b <= now + 1 && !seen_too_long(b))
                continue;
            if (n == (int)(sizeof(found) / sizeof(found[0]))) {
                more = repository == NULL; /* whole buckets leave the listing: list again for the rest */
                break;
            }
            found[n++] = b;
        }
        for (int i = 0; i < n; i++)
            retire_one(found[i], repository);
    }
}

/* Remove the renamed-away buckets, stopping when `until` passes; what is left goes in the next pass */
static void empty_trash(const struct timespec *until)
{
    DIR *d = opendir(dir_path);
    if (d == NULL)
        return;
    char names[64][32];
    int n = 0;
    for (struct dirent *e; n < 64 && (e = readdir(d)) != NULL;)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            snprintf(names[n++], sizeof(names[0]), "%.31s", e->d_name);
    closedir(d);
    for (int i = 0; i < n && !mono_passed(until); i++) {
        char p[sizeof(dir_path) + 40];
        snprintf(p, sizeof(p), "%s/%.31s", dir_path, names[i]);
        if (empty_tree(p, until, names[i][1] == '~') != 0) /* ".~<n>": a repository's, ".<n>": a bucket */
            break;
    }
}

/* The next bucket boundary (and 5 ms, for nginx's cached clock), on the monotonic clock the janitor waits on */
static void next_boundary(struct timespec *next)
{
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    long into = (real.tv_nsec / 1000000L) % BUCKET_MS;
    clock_gettime(CLOCK_MONOTONIC, next);
    mono_add(next, BUCKET_MS - into + 5);
}

static void *janitor_main(void *arg)
{
    (void)arg;
    struct timespec next;
    next_boundary(&next);
    pthread_mutex_lock(&janitor_mu);
    while (!janitor_stop) {
        pthread_cond_timedwait(&janitor_cv, &janitor_mu, &next);
        if (janitor_stop)
            break;
        pthread_mutex_unlock(&janitor_mu);
        if (mono_passed(&next)) {
            /* nginx no longer looks in them: their removal frees the inodes, the links had ended already */
            pthread_rwlock_wrlock(&buckets_lock);
            retire_buckets(0, NULL);
            pthread_rwlock_unlock(&buckets_lock);
            next_boundary(&next);
        }
        empty_trash(&next);
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
    pthread_rwlock_wrlock(&buckets_lock); /* a keep that saw the directory ready has made its link */
    if (top_dir != NULL)
        closedir(top_dir);
    top_dir = NULL;
    seen_n = 0;
    remove_tree(dir_path);
    pthread_rwlock_unlock(&buckets_lock);
    char p[sizeof(dir_path) + 8];
    snprintf(p, sizeof(p), "%s.pid", dir_path);
    unlink(p);
}

static int repo_ok(const char *r);

/* every link (`repository` NULL) or one repository's, each bucket's in one rename */
static void forget_in(const char *repository)
{
    if (berth_edge_decisions_path() == NULL)
        return;
    pthread_rwlock_wrlock(&buckets_lock);
    __atomic_add_fetch(&epoch, 1, __ATOMIC_ACQ_REL); /* a keep of a decision read before this makes no link */
    if (berth_edge_decisions_path() != NULL)         /* not removed (at stop) meanwhile */
        retire_buckets(1, repository);
    pthread_rwlock_unlock(&buckets_lock);
    pthread_mutex_lock(&janitor_mu);
    pthread_cond_signal(&janitor_cv); /* their removal need not wait for the next period */
    pthread_mutex_unlock(&janitor_mu);
}

void berth_edge_decisions_forget(void)
{
    forget_in(NULL);
}

void berth_edge_decisions_forget_repo(const char *repository)
{
    forget_in(repository != NULL && repo_ok(repository) ? repository : NULL);
}

static int start_janitor(void)
{
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&buckets_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the periods of mono_add */
    pthread_cond_init(&janitor_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&janitor_mu);
    janitor_stop = 0;
    janitor_on = pthread_create(&janitor, NULL, janitor_main, NULL) == 0;
    pthread_mutex_unlock(&janitor_mu);
    return janitor_on ? 0 : -1;
}

int berth_edge_decisions_dir(const char *run_dir, const char *blob_root, long max_inodes)
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
    max_live = max_inodes > 0 ? max_inodes : BERTH_EDGE_DECISIONS_MAX;
    remove_tree(dir_path); /* a predecessor's links (and the credentials in their names) go */
    remove_orphans();
    char blobs[sizeof(dir_path) + 8];
    snprintf(blobs, sizeof(blobs), "%s/" BLOBS, dir_path);
    if (mkdir(dir_path, 0700) != 0 || write_owner() != 0 || symlink(blob_root, blobs) != 0) {
        berth_log_warn("edge: cannot create %s (%s): blob GETs by digest are decided by berthd one by one", dir_path,
                       strerror(errno));
        remove_tree(dir_path);
        return -1;
    }
    if ((top_dir = opendir(dir_path)) == NULL || start_janitor() != 0) {
        if (top_dir != NULL)
            closedir(top_dir);
        top_dir = NULL;
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
/* the names berthd keeps links for, as the edge's locations take them (repo_ok, ref_ok) */
#define REPO_RE "[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*"
#define TAG_RE "[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"

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

/* every directory of `path` from `from` on (the name's last part is the link's); counts those it made but the first,
 * the bucket's own (the janitor removes buckets; they are not counted) */
static int make_parents(char *path, size_t from, long *made)
{
    int bucket = 1;
    for (char *p = path + from; (p = strchr(p, '/')) != NULL; p++, bucket = 0) {
        *p = '\0';
        int rc = mkdir(path, 0700);
        *p = '/';
        if (rc == 0)
            *made += !bucket;
        else if (errno != EEXIST)
            return -1;
    }
    return 0;
}

static int parts(const char *s)
{
    int n = 1;
    for (; *s != '\0'; s++)
        n += *s == '/';
    return n;
}

void berth_edge_decisions_keep(const char *authorization, const char *repository, const char *digest, uint64_t decided)
{
    const char *dir = berth_edge_decisions_path();
    if (dir == NULL || digest == NULL || strncmp(digest, "sha256:", 7) != 0 || !hex_ok(digest + 7) || !repo_ok(repository))
        return;
    const char *hex = digest + 7;
    char cred[BEARER_MAX + BEARER_PIECES + 8], path[PATH_MAX], target[PATH_MAX];
    if (berth_edge_cred_path(authorization, cred, sizeof(cred)) != 0)
        return;
    int cred_parts = parts(cred), repo_parts = parts(repository);
    if (cred_parts > (cred[0] == 'b' ? KEEP_BASIC_PARTS : KEEP_TOKEN_PARTS) || repo_parts > KEEP_REPO_PARTS)
        return;
    /* the inodes these links may need are taken from the bound first, the unused ones given back after */
    long need = KEEP_BUCKETS * (cred_parts + 1 + repo_parts + 1), made = 0;
    if (__atomic_add_fetch(&live, need, __ATOMIC_RELAXED) > max_live) {
        __atomic_sub_fetch(&live, need, __ATOMIC_RELAXED);
        return;
    }
    int m = snprintf(target, sizeof(target), "%s/" BLOBS "/sha256/%.2s/%s", dir, hex, hex);
    pthread_rwlock_rdlock(&buckets_lock);
    int64_t now = bucket_now();
    /* else forgotten since it was decided */
    for (int k = 0; k < KEEP_BUCKETS && __atomic_load_n(&epoch, __ATOMIC_ACQUIRE) == decided; k++) {
        char bucket[BUCKET_NAME];
        bucket_name(now + k, bucket);
        int n = snprintf(path, sizeof(path), "%s/%s/%s/~/%s/%s", dir, bucket, repository, cred, hex);
        if (n <= 0 || (size_t)n >= sizeof(path) || m <= 0 || (size_t)m >= sizeof(target))
            break;
        int rc = symlink(target, path);
        /* ENOENT: the credential's first link in this bucket. EEXIST: kept already, it goes when that one does */
        if (rc != 0 && errno == ENOENT && make_parents(path, strlen(dir) + 1, &made) == 0)
            rc = symlink(target, path);
        made += rc == 0;
    }
    pthread_rwlock_unlock(&buckets_lock);
    __atomic_sub_fetch(&live, need - made, __ATOMIC_RELAXED);
}

/* the manifest media types the edge may answer with, as the extension of a kept manifest's link (nginx's `types`);
 * an index is not among them: whether a client gets one depends on its Accept header, which berthd decides */
static const struct {
    const char *media_type, *ext;
} manifest_types[] = {
    {"application/vnd.oci.image.manifest.v1+json", "oim"},
    {"application/vnd.docker.distribution.manifest.v2+json", "dmt"},
};

static const char *manifest_ext(const char *media_type)
{
    for (size_t i = 0; media_type != NULL && i < sizeof(manifest_types) / sizeof(manifest_types[0]); i++)
        if (strcmp(media_type, manifest_types[i].media_type) == 0)
            return manifest_types[i].ext;
    return NULL;
}

/* a tag (core/ref.h) or a sha256 digest: never "." or "..", never a '/' */
static int ref_ok(const char *r)
{
    return strncmp(r, "sha256:", 7) == 0 ? hex_ok(r + 7) : berth_ref_tag_valid(r, strlen(r));
}

static unsigned long tmp_seq; /* __atomic: names of the temporary files and directories keep_manifest makes */

/* `content` at `path` (<bucket>/<repository>/~/~c/<hex>), once per bucket; 0 when it is there, made now or before */
static int keep_content(const char *path, const char *content, size_t len, long *made)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return S_ISREG(st.st_mode) && (size_t)st.st_size == len ? 0 : -1;
    char tmp[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int n = snprintf(tmp, sizeof(tmp), "%.*s/.%lu", (int)(slash - path), path, __atomic_add_fetch(&tmp_seq, 1, __ATOMIC_RELAXED));
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    int ok = write(fd, content, len) == (ssize_t)len;
    close(fd);
    /* link, not rename: another keep may have made it meanwhile, and its inode is counted once */
    int rc = ok && link(tmp, path) == 0 ? 0 : -1;
    if (rc == 0)
        ++*made;
    else if (ok && errno == EEXIST)
        rc = 0;
    unlink(tmp);
    return rc;
}

/* the reference's directory appears whole, its one link to `target` in it (nginx lists it: random_index); 0 when made */
static int keep_ref_dir(const char *path, const char *name, const char *target)
{
    char tmp[PATH_MAX], link_path[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int t = snprintf(tmp, sizeof(tmp), "%.*s/.%lu", (int)(slash - path), path, __atomic_add_fetch(&tmp_seq, 1, __ATOMIC_RELAXED));
    if (t < 0 || (size_t)t >= sizeof(tmp))
        return -1;
    int l = snprintf(link_path, sizeof(link_path), "%s/%s", tmp, name);
    if (l < 0 || (size_t)l >= sizeof(link_path) || mkdir(tmp, 0700) != 0)
        return -1;
    if (symlink(target, link_path) == 0 && rename(tmp, path) == 0)
        return 0;
    unlink(link_path);
    rmdir(tmp);
    return -1;
}

void berth_edge_decisions_keep_manifest(const char *authorization, const char *repository, const char *ref, const char *digest,
                                        const char *media_type, const char *who, const char *content, size_t len, uint64_t decided)
{
    const char *dir = berth_edge_decisions_path(), *ext = manifest_ext(media_type);
    if (dir == NULL || ext == NULL || content == NULL || len == 0 || len > BERTH_EDGE_MANIFEST_MAX || digest == NULL ||
        strncmp(digest, "sha256:", 7) != 0 || !hex_ok(digest + 7) || repository == NULL || !repo_ok(repository) || ref == NULL ||
        !ref_ok(ref) || who == NULL || strlen(who) > WHO_MAX)
        return;
    const char *hex = digest + 7;
    char cred[BEARER_MAX + BEARER_PIECES + 8], path[PATH_MAX], content_path[PATH_MAX], name[NAME_MAX + 1];
    if (berth_edge_cred_path(authorization, cred, sizeof(cred)) != 0)
        return;
    int cred_parts = parts(cred), repo_parts = parts(repository);
    if (cred_parts > (cred[0] == 'b' ? KEEP_BASIC_PARTS : KEEP_TOKEN_PARTS) || repo_parts > KEEP_REPO_PARTS)
        return;
    /* the link's name says what nginx cannot read from a file: the digest, who pulled (for the audit log) and, as
     * its extension, the media type */
    int w = snprintf(name, sizeof(name), "%s-", hex);
    for (const char *p = who; *p != '\0'; p++)
        w += snprintf(name + w, sizeof(name) - (size_t)w, "%02x", (unsigned char)*p);
    snprintf(name + w, sizeof(name) - (size_t)w, ".%s", ext);
    /* inodes, in each bucket: the repository's and the credential's directories, "~", "~c", the content, "~m",
     * the reference's directory and its link */
    long need = KEEP_BUCKETS * (cred_parts + repo_parts + 6), made = 0, kept_bytes = 0;
    if (__atomic_add_fetch(&live, need, __ATOMIC_RELAXED) > max_live) {
        __atomic_sub_fetch(&live, need, __ATOMIC_RELAXED);
        return;
    }
    if (__atomic_add_fetch(&live_bytes, KEEP_BUCKETS * (long)len, __ATOMIC_RELAXED) > BERTH_EDGE_MANIFEST_BYTES) {
        __atomic_sub_fetch(&live_bytes, KEEP_BUCKETS * (long)len, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&live, need, __ATOMIC_RELAXED);
        return;
    }
    /* relative, up from <cred>/~m/<ref> to "~": short enough to stay in the inode (< 128 bytes) */
    char target[(KEEP_TOKEN_PARTS + 2) * 3 + 72];
    size_t at = 0;
    for (int up = 0; up < cred_parts + 2; up++)
        at += (size_t)snprintf(target + at, sizeof(target) - at, "../");
    snprintf(target + at, sizeof(target) - at, "~c/%s", hex);
    pthread_rwlock_rdlock(&buckets_lock);
    int64_t now = bucket_now();
    /* else forgotten since it was decided */
    for (int k = 0; k < KEEP_BUCKETS && __atomic_load_n(&epoch, __ATOMIC_ACQUIRE) == decided; k++) {
        char bucket[BUCKET_NAME];
        bucket_name(now + k, bucket);
        int n = snprintf(content_path, sizeof(content_path), "%s/%s/%s/~/~c/%s", dir, bucket, repository, hex);
        int m = snprintf(path, sizeof(path), "%s/%s/%s/~/%s/~m/%s", dir, bucket, repository, cred, ref);
        struct stat st;
        if (n <= 0 || (size_t)n >= sizeof(content_path) || m <= 0 || (size_t)m >= sizeof(path))
            break;
        if (lstat(path, &st) == 0 || errno != ENOENT || make_parents(content_path, strlen(dir) + 1, &made) != 0)
            continue; /* kept in this bucket already */
        long before = made;
        if (keep_content(content_path, content, len, &made) != 0)
            continue;
        kept_bytes += made > before ? (long)len : 0;
        if (make_parents(path, strlen(dir) + 1, &made) == 0 && keep_ref_dir(path, name, target) == 0)
            made += 2;
    }
    pthread_rwlock_unlock(&buckets_lock);
    __atomic_sub_fetch(&live, need - made, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&live_bytes, KEEP_BUCKETS * (long)len - kept_bytes, __ATOMIC_RELAXED);
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
    /* the bucket of nginx's now (bucket_name): its cached clock lags the real one, never leads it, so a link is
     * looked for at most a loop iteration late, never early */
    fprintf(f, "  map $msec $berth_bucket { \"~^([0-9]+)\\.[0-4]\" \"$1a\"; \"~^([0-9]+)\\.\" \"$1b\"; }\n");
    /* a manifest GET the edge answered from a kept decision: a line for berthd's audit log (edge_pulls.h) */
    fprintf(f, "  map \"$request_method:$status\" $berth_pull_logged { \"GET:200\" 1; default 0; }\n"
               "  map \"$http_if_match$http_if_none_match$http_if_modified_since$http_if_unmodified_since\" $berth_conditional {"
               " \"\" 0; default 1; }\n"
               "  log_format berth_pull '$remote_addr $berth_who $berth_mhex $request_uri';\n");
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

/* Manifest GET/HEAD by tag or digest through a kept decision: the reference's directory holds one link, which nginx
 * finds by listing it (random_index, an internal redirect to the link): its name gives the digest, the caller for
 * the audit log and, as its extension, the media type. A miss, or any failure on the way, is berthd's to answer,
 * with the client's own URI (after the redirect nginx would send the link's path). Errors are not logged here:
 * the paths hold credentials. */
static void manifest_locations(FILE *f, const char *dir, const char *pulls_log)
{
    fprintf(f,
            "    location ~ \"^/v2/(?<berth_mrepo>" REPO_RE ")/manifests/(?<berth_ref>" TAG_RE "|sha256:[0-9a-f]{64})$\" {\n"
            "      if ($request_method !~ ^(GET|HEAD)$) { return 418; }\n"
            "      if ($request_uri !~ \"^/v2/" REPO_RE "/manifests/(?:" TAG_RE "|sha256:[0-9a-f]{64})$\") { return 418; }\n"
            /* berthd ignores conditional headers; nginx's static module would answer them (412, 304) */
            "      if ($berth_conditional) { return 418; }\n"
            "      error_page 403 404 418 500 = @berth_manifest;\n"
            /* a location's error_page replaces the server's: a body over client_max_body_size is refused here */
            "      error_page 413 = @too_big;\n"
            /* berthd's answer may be an error nginx maps too (502, 504, 413: the server's JSON answers) */
            "      recursive_error_pages on;\n"
            "      error_log stderr emerg;\n"
            "      log_not_found off;\n"
            "      root %s;\n"
            "      open_file_cache off;\n"
            "      random_index on;\n"
            /* "//": try_files looks for a directory and leaves the URI ending in '/', which random_index takes */
            "      try_files /$berth_bucket/$berth_mrepo/~/$berth_cred/~m/$berth_ref// @berth_manifest;\n"
            "    }\n",
            dir);
    fprintf(f,
            "    location ~ \"^/[0-9]+[ab]/.+/(?<berth_mhex>[0-9a-f]{64})-(?<berth_who>[0-9a-f]*)\\.[a-z]+$\" {\n"
            "      internal;\n"
            "      error_page 403 404 500 = @berth_manifest;\n"
            "      recursive_error_pages on;\n"
            "      error_log stderr emerg;\n"
            "      log_not_found off;\n"
            "      root %s;\n"
            "      open_file_cache off;\n"
            "      etag off; max_ranges 0; if_modified_since off;\n"
            "      types {",
            dir);
    for (size_t i = 0; i < sizeof(manifest_types) / sizeof(manifest_types[0]); i++)
        fprintf(f, " %s %s;", manifest_types[i].media_type, manifest_types[i].ext);
    fprintf(f,
            " }\n"
            "      default_type application/octet-stream;\n"
            "      add_header docker-content-digest sha256:$berth_mhex always;\n"
            "      add_header etag \"\\\"sha256:$berth_mhex\\\"\" always;\n"
            "      add_header docker-distribution-api-version registry/2.0 always;\n"
            "      add_header last-modified \"\" always;\n"
            "      access_log %s berth_pull buffer=32k flush=1s if=$berth_pull_logged;\n"
            "    }\n"
            "    location @berth_manifest { proxy_pass http://berth_api$request_uri; proxy_read_timeout 300s; " BERTH_EDGE_API_RETRY
            " }\n",
            pulls_log);
}

void berth_edge_decisions_locations(FILE *f, const char *dir, const char *pulls_log)
{
    fprintf(f,
            /* the names berthd keeps links for (repo_ok): any other path is berthd's */
            "    location ~ \"^/v2/(?<berth_repo>" REPO_RE ")/blobs/"
            "(?<berth_digest>sha256:(?<berth_hex>[0-9a-f]{64}))$\" {\n"
            /* DELETE and the rest: as before (only `return` is safe inside `if`) */
            "      if ($request_method !~ ^(GET|HEAD)$) { return 418; }\n"
            /* the location matched nginx's normalised URI; a request spelled otherwise (./, //, .., %-escapes, a
             * query) goes to berthd as sent, so a link never answers what berthd would refuse */
            "      if ($request_uri !~ \"^/v2/" REPO_RE "/blobs/sha256:[0-9a-f]{64}$\") "
            "{ return 418; }\n"
            /* no link, or one gone between the look and the open: berthd answers, refusals included */
            "      error_page 403 404 418 500 = @berth_api;\n"
            "      error_page 416 = @blob_range;\n"
            "      error_page 413 = @too_big;\n"
            /* so @berth_api's own errors get the server's JSON answers: the flag counts where the first one fired */
            "      recursive_error_pages on;\n"
            "      root %s;\n"
            /* a removed link must be missed at once, not found again through a kept descriptor */
            "      open_file_cache off;\n"
            /* a link renamed away between try_files and open is a 404 for @berth_api to answer: never logged, the
             * path holds the credential */
            "      log_not_found off;\n"
            "      try_files /$berth_bucket/$berth_repo/~/$berth_cred/$berth_hex @berth_api;\n",
            dir);
    berth_edge_blob_headers(f, "$berth_digest");
    fprintf(f, "    }\n"
               "    location @berth_api { proxy_pass http://berth_api; proxy_read_timeout 300s; " BERTH_EDGE_API_RETRY " }\n");
    manifest_locations(f, dir, pulls_log);
}
