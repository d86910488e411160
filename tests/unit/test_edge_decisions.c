/*
 * The edge's kept blob decisions as berthd makes and ends them (registry/http/edge_blobs.c), on the real tmpfs:
 * a link is found where nginx looks (the bucket of the wall clock's half second), for 0.5-1 s, goes at once with a forget, is never
 * made for a decision read before a forget, never for names deeper than the bound, and never past the bound on inodes, whatever
 * many credentials and threads ask at once.
 */
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "registry/http/edge_blobs.h"
#include "tests/unit/tap.h"

#define BOUND 128

static char digest[80], hex[65];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the bucket nginx looks in now: "<seconds>a" in the first half of the second, "<seconds>b" in the second */
static const char *bucket(void)
{
    static char name[32];
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(name, sizeof(name), "%lld%c", (long long)t.tv_sec, t.tv_nsec >= 500000000L ? 'b' : 'a');
    return name;
}

/* the links nginx would find now for this credential path and repository */
static int found(const char *cred, const char *repo)
{
    char pattern[PATH_MAX];
    snprintf(pattern, sizeof(pattern), "%s/%s/%s/~/%s/%s", berth_edge_decisions_path(), bucket(), repo, cred, hex);
    glob_t g;
    int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    if (n > 0)
        globfree(&g);
    return n;
}

/* inodes below the buckets and the renamed-away ones, each once: a bucket renamed during the walk keeps its inode
 * numbers, and with nothing made meanwhile (the janitor only renames and removes) the walk's count is an upper
 * bound of what was there when it began */
static long inodes;
static ino_t seen[4096];

static int count_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)path;
    (void)flag;
    if (ftw->level < 2)
        return 0;
    for (long i = 0; i < inodes && i < 4096; i++)
        if (seen[i] == sb->st_ino)
            return 0;
    if (inodes < 4096)
        seen[inodes] = sb->st_ino;
    inodes++;
    return 0;
}

static long count(void)
{
    inodes = 0;
    nftw(berth_edge_decisions_path(), count_one, 16, FTW_PHYS);
    return inodes;
}

/* the time until the credential's link is gone, polled every 5 ms up to `limit` s */
static double gone_after(const char *cred, const char *repo, double t0, double limit)
{
    while (found(cred, repo) > 0 && now() - t0 < limit)
        usleep(5000);
    return now() - t0;
}

/* everything below the buckets goes within the links' lifetime, and the count with it: the whole bound is free */
static void drains(const char *what)
{
    double t0 = now();
    while (count() > 0 && now() - t0 < 3)
        usleep(10000);
    ok(count() == 0, "%s: the links and their directories go (%.2f s)", what, now() - t0);
    berth_edge_decisions_keep("Basic YWRtaW46cGFzcw==", "p/r", digest, berth_edge_decisions_epoch());
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 1, "%s: the count is exact, the whole bound is free again", what);
    berth_edge_decisions_forget();
}

static int stop_flood, pause_flood, paused;

static void *flood(void *arg)
{
    long id = (long)arg;
    for (int i = 0; !__atomic_load_n(&stop_flood, __ATOMIC_ACQUIRE); i++) {
        if (__atomic_load_n(&pause_flood, __ATOMIC_ACQUIRE)) {
            __atomic_add_fetch(&paused, 1, __ATOMIC_ACQ_REL);
            while (__atomic_load_n(&pause_flood, __ATOMIC_ACQUIRE))
                usleep(1000);
            __atomic_sub_fetch(&paused, 1, __ATOMIC_ACQ_REL);
        }
        char auth[64];
        snprintf(auth, sizeof(auth), "Basic t%ldn%d", id, i);
        berth_edge_decisions_keep(auth, "p/r", digest, berth_edge_decisions_epoch());
        if (id == 0 && i % 50 == 0)
            berth_edge_decisions_forget();
    }
    return NULL;
}

int main(void)
{
    memset(hex, 'a', 64);
    snprintf(digest, sizeof(digest), "sha256:%s", hex);
    char run[64];
    snprintf(run, sizeof(run), "/tmp/berth-unit-edge-%ld", (long)getpid());
    if (berth_edge_decisions_dir(run, "/blobs", BOUND) != 0) {
        ok(0, "/dev/shm is a tmpfs and the decisions directory is made there");
        return tap_done();
    }
    const char *admin = "Basic YWRtaW46cGFzcw==";

    double t0 = now(); /* before the keep: it may cross a half second */
    berth_edge_decisions_keep(admin, "p/r", digest, berth_edge_decisions_epoch());
    char pattern[PATH_MAX], target[PATH_MAX] = "";
    snprintf(pattern, sizeof(pattern), "%s/%s/p/r/~/b/YWRtaW46cGFzcw==/%s", berth_edge_decisions_path(), bucket(), hex);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0) {
        ssize_t n = readlink(g.gl_pathv[0], target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        globfree(&g);
    }
    char want[PATH_MAX], root[PATH_MAX] = "", blobs[PATH_MAX];
    snprintf(want, sizeof(want), "%s/b/sha256/aa/%s", berth_edge_decisions_path(), hex);
    snprintf(blobs, sizeof(blobs), "%s/b", berth_edge_decisions_path());
    ssize_t rn = readlink(blobs, root, sizeof(root) - 1);
    root[rn > 0 ? rn : 0] = '\0';
    ok(strcmp(target, want) == 0 && strcmp(root, "/blobs") == 0,
       "a kept decision is a link to the blob's file, through <dir>/b, where nginx looks: %s", target);
    ok(strlen(target) < 128, "its target fits in the inode (tmpfs gives a longer one a page): %zu bytes", strlen(target));
    usleep(450000);
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 1, "it is still there after 0.45 s");
    double life = gone_after("b/YWRtaW46cGFzcw==", "p/r", t0, 3);
    ok(life > 0.5 && life < 1.0 + 0.05, "it is gone after 0.5-1 s (%.3f s)", life);

    berth_edge_decisions_keep(admin, "p/r", digest, berth_edge_decisions_epoch());
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 1, "kept again");
    berth_edge_decisions_forget();
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 0, "a forget removes it before it returns");

    /* out of descriptors (a connection flood): a forget needs none, so revocation still takes the links at once */
    berth_edge_decisions_keep(admin, "p/r", digest, berth_edge_decisions_epoch());
    struct rlimit was;
    getrlimit(RLIMIT_NOFILE, &was);
    int fds[256], nfd = 0, probe = open("/dev/null", O_RDONLY);
    struct rlimit low = {(rlim_t)probe + 32, was.rlim_max};
    close(probe);
    setrlimit(RLIMIT_NOFILE, &low);
    while (nfd < 256 && (fds[nfd] = open("/dev/null", O_RDONLY)) >= 0)
        nfd++;
    int exhausted = nfd < 256 && open("/dev/null", O_RDONLY) < 0;
    berth_edge_decisions_forget();
    while (nfd > 0)
        close(fds[--nfd]);
    setrlimit(RLIMIT_NOFILE, &was);
    ok(exhausted && found("b/YWRtaW46cGFzcw==", "p/r") == 0, "a forget with no descriptor left removes it too");

    uint64_t before = berth_edge_decisions_epoch();
    berth_edge_decisions_forget();
    berth_edge_decisions_keep(admin, "p/r", digest, before);
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 0, "a decision read before a forget is not kept after it");
    berth_edge_decisions_keep(admin, "p/r", digest, berth_edge_decisions_epoch());
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 1, "one read after it is");
    berth_edge_decisions_forget();

    berth_edge_decisions_keep(admin, "p/r", digest, berth_edge_decisions_epoch());
    berth_edge_decisions_keep(admin, "p/r/s", digest, berth_edge_decisions_epoch());
    berth_edge_decisions_keep(admin, "p/q", digest, berth_edge_decisions_epoch());
    before = berth_edge_decisions_epoch();
    berth_edge_decisions_forget_repo("p/r");
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 0 && found("b/YWRtaW46cGFzcw==", "p/r/s") == 1 &&
           found("b/YWRtaW46cGFzcw==", "p/q") == 1,
       "a changed repository's links go before the forget returns, the others' stay (p/r/s included)");
    berth_edge_decisions_keep(admin, "p/q", digest, before);
    berth_edge_decisions_keep(admin, "p/r", digest, before);
    ok(found("b/YWRtaW46cGFzcw==", "p/r") == 0, "a decision read before a repository's forget is not kept after it");
    berth_edge_decisions_forget_repo(NULL);
    ok(found("b/YWRtaW46cGFzcw==", "p/r/s") == 0 && found("b/YWRtaW46cGFzcw==", "p/q") == 0, "NULL: every repository's");

    berth_edge_decisions_keep(admin, "p/a/b/c/d/e", digest, berth_edge_decisions_epoch());
    ok(found("b/YWRtaW46cGFzcw==", "p/a/b/c/d/e") == 1, "a repository of 6 components is kept");
    berth_edge_decisions_keep(admin, "p/a/b/c/d/e/f", digest, berth_edge_decisions_epoch());
    ok(found("b/YWRtaW46cGFzcw==", "p/a/b/c/d/e/f") == 0, "one of 7 is always asked of berthd");
    berth_edge_decisions_keep("Basic a/b/c/d/e", "p/r", digest, berth_edge_decisions_epoch());
    ok(found("b/a/b/c/d/e", "p/r") == 1, "a Basic value of 5 segments is kept");
    berth_edge_decisions_keep("Basic a/b/c/d/e/f", "p/r", digest, berth_edge_decisions_epoch());
    ok(found("b/a/b/c/d/e/f", "p/r") == 0, "one of 6 is always asked of berthd");
    berth_edge_decisions_forget();

    long peak = 0;
    for (int i = 0; i < 100; i++) {
        char auth[32];
        snprintf(auth, sizeof(auth), "Basic c%d", i);
        berth_edge_decisions_keep(auth, "p/r", digest, berth_edge_decisions_epoch());
        long c = count();
        peak = c > peak ? c : peak;
    }
    ok(peak <= BOUND && peak >= BOUND - 12, "100 credentials fill the bound and no more: %ld inodes of %d", peak, BOUND);
    drains("100 credentials");

    /* four threads keeping distinct credentials as fast as they can, one of them forgetting every 50 */
    pthread_t th[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, flood, (void *)i);
    peak = 0;
    for (t0 = now(); now() - t0 < 1.5;) {
        usleep(20000);
        __atomic_store_n(&pause_flood, 1, __ATOMIC_RELEASE); /* counted while nobody keeps */
        while (__atomic_load_n(&paused, __ATOMIC_ACQUIRE) < 4)
            usleep(100);
        long c = count();
        peak = c > peak ? c : peak;
        __atomic_store_n(&pause_flood, 0, __ATOMIC_RELEASE);
        while (__atomic_load_n(&paused, __ATOMIC_ACQUIRE) > 0)
            usleep(100);
    }
    __atomic_store_n(&stop_flood, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ok(peak > 0 && peak <= BOUND, "a flood from four threads stays within the bound: at most %ld inodes of %d", peak, BOUND);
    drains("the flood");

    /* a manifest: its reference's directory holds one link, named after the digest, the caller and the media type,
     * to the content kept once per repository and bucket */
    const char *man = "{\"schemaVersion\":2}", *oci = "application/vnd.oci.image.manifest.v1+json";
    berth_edge_decisions_keep_manifest(admin, "p/m", "v1", digest, oci, "admin", man, strlen(man), berth_edge_decisions_epoch());
    snprintf(pattern, sizeof(pattern), "%s/%s/p/m/~/b/YWRtaW46cGFzcw==/~m/v1/*", berth_edge_decisions_path(), bucket());
    char name[PATH_MAX] = "", body[64] = "";
    size_t entries = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        entries = g.gl_pathc;
        snprintf(name, sizeof(name), "%s", strrchr(g.gl_pathv[0], '/') + 1);
        FILE *f = fopen(g.gl_pathv[0], "r");
        if (f != NULL) {
            body[fread(body, 1, sizeof(body) - 1, f)] = '\0';
            fclose(f);
        }
        globfree(&g);
    }
    snprintf(want, sizeof(want), "%s-61646d696e.oim", hex);
    ok(entries == 1 && strcmp(name, want) == 0 && strcmp(body, man) == 0, "a manifest's directory holds one link, %s, to it", name);
    berth_edge_decisions_keep_manifest(admin, "p/m", digest, digest, oci, "", man, strlen(man), berth_edge_decisions_epoch());
    snprintf(pattern, sizeof(pattern), "%s/%s/p/m/~/b/YWRtaW46cGFzcw==/~m/%s/%s-.oim", berth_edge_decisions_path(), bucket(),
             digest, hex);
    ok(glob(pattern, 0, NULL, &g) == 0 && (globfree(&g), 1), "by digest too, for an anonymous caller");
    static const char *const refused[][3] = {
        {"v2", "application/vnd.oci.image.index.v1+json", "admin"}, /* an index: the client's Accept decides */
        {"../v3", "application/vnd.oci.image.manifest.v1+json", "admin"},
        {".v4", "application/vnd.oci.image.manifest.v1+json", "admin"},
        {"v5", "application/vnd.oci.image.manifest.v1+json",
         "a-name-longer-than-ninety-three-bytes-a-name-longer-than-ninety-three-bytes-a-name-longer-than-ninety-three"},
    };
    int none = 1;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        berth_edge_decisions_keep_manifest(admin, "p/n", refused[i][0], digest, refused[i][1], refused[i][2], man, strlen(man),
                                           berth_edge_decisions_epoch());
        snprintf(pattern, sizeof(pattern), "%s/[0-9]*[ab]/p/n", berth_edge_decisions_path());
        if (glob(pattern, 0, NULL, &g) == 0) {
            none = 0;
            globfree(&g);
        }
    }
    ok(none, "an index, a reference that is no tag, a name past NAME_MAX: never kept");
    before = berth_edge_decisions_epoch();
    berth_edge_decisions_forget_repo("p/m");
    berth_edge_decisions_keep_manifest(admin, "p/m", "v1", digest, oci, "admin", man, strlen(man), before);
    snprintf(pattern, sizeof(pattern), "%s/[0-9]*[ab]/p/m/~", berth_edge_decisions_path());
    ok(glob(pattern, 0, NULL, &g) != 0, "a repository's change takes its manifests, and one read before it is not kept");
    for (double t = now(); berth_edge_decisions_bytes() > 0 && now() - t < 2;) /* the forgotten ones removed */
        usleep(5000);
    for (int i = 0; i < 40; i++) { /* past the bound on inodes */
        char auth[32];
        snprintf(auth, sizeof(auth), "Basic m%d", i);
        berth_edge_decisions_keep_manifest(auth, "p/m", "v1", digest, oci, "admin", man, strlen(man), berth_edge_decisions_epoch());
    }
    ok(count() <= BOUND, "manifests stay within the bound on inodes too: %ld of %d", count(), BOUND);
    long kept = berth_edge_decisions_bytes(), one = (long)strlen(man);
    ok(kept >= 2 * one && kept <= 3 * one,
       "their content is kept once per repository and bucket, now's and the next (a boundary may fall between): %ld bytes", kept);
    drains("manifests");
    ok(berth_edge_decisions_bytes() == 0, "and its bytes are counted off when it goes: %ld", berth_edge_decisions_bytes());

    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", berth_edge_decisions_path());
    berth_edge_decisions_remove();
    ok(access(dir, F_OK) != 0, "the directory goes at stop");
    return tap_done();
}
