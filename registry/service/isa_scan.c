#include "registry/service/isa_scan.h"
#include "registry/service/blob_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bgloop.h"
#include "core/digest.h"
#include "core/log.h"
#include "core/manifest.h"
#include "registry/isa/scan.h"
#include "registry/service/artifact_push.h"
#include "sql/isa.h"
#include "sql/registry.h"

#define MAX_FILES 20000            /* entries tracked per image */
#define MAX_FILE_BYTES (256 << 20) /* larger files are not read */
#define MAX_SCAN_BYTES (2048L << 20)
#define MAX_INSN_PER_FILE 20000000UL
#define SCANNER_VERSION "berth-isa-scan 1"
#define MAX_QUEUED 10000

/* ---- the final file set of an image (whiteouts applied) --------------------------------------------------- */

typedef struct {
    char *path;
    int layer; /* the layer that provides the final version; -1 when deleted */
} entry_t;

typedef struct {
    entry_t *e;
    size_t n, cap;
} fileset_t;

static char *clean_path(const char *p)
{
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    while (*p == '/')
        p++;
    return strdup(p);
}

static entry_t *find(fileset_t *fs, const char *path)
{
    for (size_t i = fs->n; i-- > 0;) /* recent entries first: layers mostly touch what they just added */
        if (strcmp(fs->e[i].path, path) == 0)
            return &fs->e[i];
    return NULL;
}

static void set_entry(fileset_t *fs, const char *path, int layer)
{
    entry_t *e = find(fs, path);
    if (e != NULL) {
        e->layer = layer;
        return;
    }
    if (fs->n == MAX_FILES)
        return;
    if (fs->n == fs->cap) {
        fs->cap = fs->cap ? fs->cap * 2 : 256;
        fs->e = realloc(fs->e, fs->cap * sizeof(entry_t));
    }
    fs->e[fs->n].path = strdup(path);
    fs->e[fs->n].layer = layer;
    fs->n++;
}

static struct archive *open_layer(berth_registry_t *reg, const char *digest)
{
    berth_digest_t d;
    if (berth_digest_parse(&d, digest, strlen(digest), NULL) != 0)
        return NULL;
    return berth_blob_archive_open(reg->store, &d);
}

/* Call cb for every entry of every layer, in order; cb returns nonzero to stop */
typedef int (*entry_fn)(struct archive *a, struct archive_entry *ae, int layer, void *ctx);
static void each_entry(berth_registry_t *reg, json_t *layers, entry_fn cb, void *ctx)
{
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        struct archive *a = open_layer(reg, json_string_value(json_object_get(l, "digest")));
        if (a == NULL)
            continue;
        struct archive_entry *ae;
        int stop = 0;
        while (!stop && archive_read_next_header(a, &ae) == ARCHIVE_OK)
            stop = cb(a, ae, (int)i, ctx);
        archive_read_free(a);
        if (stop)
            return;
    }
}

/* Pass 1: which layer provides each path at the end (OCI whiteouts: ".wh.<name>" deletes, ".wh..wh..opq" empties) */
static int note_entry(struct archive *a, struct archive_entry *ae, int layer, void *ctx)
{
    fileset_t *fs = ctx;
    char *p = clean_path(archive_entry_pathname(ae));
    char *base = strrchr(p, '/');
    base = base != NULL ? base + 1 : p;
    if (strcmp(base, ".wh..wh..opq") == 0) {
        size_t dl = (size_t)(base - p);
        for (size_t k = 0; k < fs->n; k++)
            if (strncmp(fs->e[k].path, p, dl) == 0 && fs->e[k].layer < layer)
                fs->e[k].layer = -1;
    } else if (strncmp(base, ".wh.", 4) == 0) {
        char target[4096];
        snprintf(target, sizeof(target), "%.*s%s", (int)(base - p), p, base + 4);
        size_t tl = strlen(target);
        for (size_t k = 0; k < fs->n; k++)
            if (strcmp(fs->e[k].path, target) == 0 || (strncmp(fs->e[k].path, target, tl) == 0 && fs->e[k].path[tl] == '/'))
                fs->e[k].layer = -1;
    } else if (archive_entry_filetype(ae) == AE_IFREG) {
        set_entry(fs, p, layer);
    }
    free(p);
    return 0;
}

/* ---- verdict ------------------------------------------------------------------------------------------------ */

typedef struct {
    berth_isa_level_t declared;
    berth_isa_features_t allowed; /* implied by the declared level plus the declared features */
    int fails, warns, above_baseline, files;
    long bytes;
    json_t *files_json;
    berth_isa_level_t max_level;
} verdict_t;

/* glibc-hwcaps subdirectories hold code the loader only picks on CPUs that run it */
static int hwcaps_allowance(const char *path)
{
    const char *h = strstr(path, "glibc-hwcaps/x86-64-v");
    return h != NULL && h[21] >= '2' && h[21] <= '4' ? h[21] - '0' : 0;
}

static void judge(verdict_t *v, const char *path, const berth_elf_report_t *r)
{
    if (r->arch != v->declared.arch)
        return;
    v->files++;
    int allowed_level = v->declared.major;
    int hw = hwcaps_allowance(path);
    if (hw > allowed_level && v->declared.arch == BERTH_ISA_AMD64)
        allowed_level = hw;
    berth_isa_features_t extra;
    berth_isa_features_clear(&extra);
    berth_isa_features_subset(&r->features, &v->allowed, &extra);
    const char *status = "pass", *why = "";
    char whybuf[800] = "";
    int above = v->declared.arch == BERTH_ISA_AMD64 ? r->max_level.major > allowed_level : 0;
    if (v->declared.arch == BERTH_ISA_AMD64 && r->needed_level > allowed_level) {
        status = r->is_static ? "warn" : "fail";
        snprintf(whybuf, sizeof(whybuf), "its GNU property note needs x86-64-v%d%s", r->needed_level,
                 r->is_static ? " (static: not enforced by a loader)" : ": the loader will refuse it");
    } else if (above || extra.n > 0) {
        const char *fn = r->nevidence > 0 ? r->evidence[r->nevidence - 1].function : "";
        const char *mn = r->nevidence > 0 ? r->evidence[r->nevidence - 1].mnemonic : "";
        char feats[512];
        berth_isa_features_join(&extra, feats, sizeof(feats));
        status = "fail";
        if (above)
            snprintf(whybuf, sizeof(whybuf), "uses x86-64-v%d instructions (%s in %s)", r->max_level.major, mn, fn[0] ? fn : "?");
        else
            snprintf(whybuf, sizeof(whybuf), "uses %s (%s in %s)", feats, mn, fn[0] ? fn : "?");
    } else if (r->dispatched &&
               (r->soft_level > allowed_level || !berth_isa_features_subset(&r->soft_features, &v->allowed, NULL))) {
        status = "warn";
        snprintf(whybuf, sizeof(whybuf), "runtime-dispatched code above the declared level");
    }
    why = whybuf;
    if (strcmp(status, "fail") == 0)
        v->fails++;
    else if (strcmp(status, "warn") == 0)
        v->warns++;
    if ((v->declared.arch == BERTH_ISA_AMD64 && r->max_level.major > 1) ||
        (v->declared.arch != BERTH_ISA_AMD64 && r->features.n > 0))
        v->above_baseline = 1;
    if (r->max_level.major > v->max_level.major)
        v->max_level.major = r->max_level.major;
    if (strcmp(status, "pass") == 0 && r->nevidence == 0)
        return; /* only files with findings are listed */
    char lvl[24];
    berth_isa_level_name(&r->max_level, lvl, sizeof(lvl));
    json_t *ev = json_array();
    for (int k = 0; k < r->nevidence; k++)
        json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:I}", "function", r->evidence[k].function, "mnemonic",
                                            r->evidence[k].mnemonic, "isa_set", r->evidence[k].isa_set, "offset",
                                            (json_int_t)r->evidence[k].offset));
    json_t *f = json_array();
    for (int k = 0; k < r->features.n; k++)
        json_array_append_new(f, json_string(r->features.names[k]));
    if (json_array_size(v->files_json) < 200)
        json_array_append_new(v->files_json, json_pack("{s:s,s:s,s:s,s:o,s:b,s:b,s:s,s:o}", "path", path, "status", status,
                                                       "max_level", lvl, "features", f, "dispatched", r->dispatched, "static",
                                                       r->is_static, "reason", why, "evidence", ev));
    else {
        json_decref(ev);
        json_decref(f);
    }
}

/* Pass 2: read the final version of each regular file and judge its ELF contents */
typedef struct {
    fileset_t *fs;
    verdict_t *v;
} pass2_t;

static int judge_entry(struct archive *a, struct archive_entry *ae, int layer, void *ctx)
{
    pass2_t *x = ctx;
    if (x->v->bytes >= MAX_SCAN_BYTES)
        return 1;
    la_int64_t size = archive_entry_size(ae);
    if (archive_entry_filetype(ae) != AE_IFREG || size < 64 || size > MAX_FILE_BYTES)
        return 0;
    char *p = clean_path(archive_entry_pathname(ae));
    entry_t *e = find(x->fs, p);
    if (e != NULL && e->layer == layer) {
        unsigned char *buf = malloc((size_t)size);
        la_ssize_t got = archive_read_data(a, buf, (size_t)size);
        if (got == size && memcmp(buf,
                                  "\x7f"
                                  "ELF",
                                  4) == 0) {
            berth_elf_report_t r;
            x->v->bytes += size;
            if (berth_elf_scan(buf, (size_t)size, MAX_INSN_PER_FILE, &r) == 0)
                judge(x->v, p, &r);
        }
        free(buf);
    }
    free(p);
    return 0;
}

/* ---- results ------------------------------------------------------------------------------------------------ */

/* The verdict as a referrer of the variant: an OCI artifact whose one layer is the JSON report */
static int push_referrer(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *subject, size_t subject_size,
                         const char *subject_mt, const char *report, const char *status, const char *level, const char *features)
{
    berth_digest_t rd, md;
    berth_err_t err;
    if (berth_artifact_blob_bytes(reg, c, repo, report, strlen(report), &rd) != 0)
        return -1;
    json_t *layers = json_pack("[{s:s,s:s,s:I}]", "mediaType", BERTH_ISA_SCAN_ARTIFACT_TYPE, "digest", rd.str, "size",
                               (json_int_t)strlen(report));
    /* one verdict per declaration: a manifest declared two ways has two reports */
    json_t *ann = json_pack("{s:s,s:s,s:s,s:s}", "io.berth.isa.scan.status", status, "io.berth.isa.scan.scanner", SCANNER_VERSION,
                            "io.berth.isa.scan.declared-level", level, "io.berth.isa.scan.declared-features", features);
    int rc = berth_artifact_push_referrer(reg, c, repo, BERTH_ISA_SCAN_ARTIFACT_TYPE, layers, ann, subject, subject_size,
                                          subject_mt, &md, &err);
    json_decref(layers);
    json_decref(ann);
    return rc;
}

int berth_isa_scan_variant(berth_registry_t *reg, const char *repo, const char *digest, const char *declared_level,
                           const char *declared_features, char status_out[12])
{
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL)
        return -1;
    berth_db_manifest_t m = {0};
    int rc = berth_db_manifest_get(c, repo, digest, 1, &m, &err);
    json_t *man = rc == 0 ? json_loadb(m.content, m.len, 0, NULL) : NULL;
    verdict_t v = {0};
    const char *arch_name = strncmp(declared_level, "x86-64", 6) == 0 ? "amd64"
                            : strncmp(declared_level, "armv", 4) == 0 ? "arm64"
                                                                      : "ppc64le";
    if (man == NULL || berth_isa_level_parse(berth_isa_arch_parse(arch_name), declared_level, &v.declared) != 0) {
        json_decref(man);
        berth_db_manifest_dispose(&m);
        berth_db_release(reg->db, c);
        return -1;
    }
    berth_isa_level_features(&v.declared, &v.allowed);
    berth_isa_features_add_list(&v.allowed, declared_features != NULL ? declared_features : "");
    v.max_level = v.declared;
    v.max_level.major = v.declared.arch == BERTH_ISA_AMD64 ? 1 : v.declared.major;
    v.files_json = json_array();
    fileset_t fs = {0};
    json_t *layers = json_object_get(man, "layers");
    each_entry(reg, layers, note_entry, &fs);
    pass2_t p2 = {.fs = &fs, .v = &v};
    each_entry(reg, layers, judge_entry, &p2);
    int under =
        (!berth_isa_level_is_baseline(&v.declared) || (declared_features != NULL && declared_features[0])) && !v.above_baseline;
    const char *status = v.fails ? "fail" : (v.warns || under) ? "warn" : "pass";
    char maxl[24];
    if (v.declared.arch != BERTH_ISA_AMD64)
        v.max_level = v.declared;
    berth_isa_level_name(&v.max_level, maxl, sizeof(maxl));
    if (declared_features == NULL)
        declared_features = "";
    json_t *report =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:i,s:I,s:o,s:s}", "subject", digest, "declared_level", declared_level,
                  "declared_features", declared_features, "max_level", maxl, "status", status, "under_built", under, "elf_files",
                  v.files, "bytes_scanned", (json_int_t)v.bytes, "files", v.files_json, "scanner", SCANNER_VERSION);
    char *text = json_dumps(report, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(report);
    /* the referrer first: once the verdict row is visible, its report is too */
    if (push_referrer(reg, c, repo, digest, m.len, m.media_type, text, status, declared_level, declared_features) != 0)
        berth_log_warn("isa scan of %s@%s: the referrer artifact could not be written", repo, digest);
    rc = berth_db_isa_scan_put(c, repo, digest, declared_level, declared_features, status, maxl, text, &err);
    berth_log_info("isa scan %s@%s declared %s%s%s: %s (%d ELF files)", repo, digest, declared_level,
                   declared_features[0] ? "+" : "", declared_features, status, v.files);
    snprintf(status_out, 12, "%s", status);
    free(text);
    for (size_t i = 0; i < fs.n; i++)
        free(fs.e[i].path);
    free(fs.e);
    json_decref(man);
    berth_db_manifest_dispose(&m);
    berth_db_release(reg->db, c);
    return rc;
}

/* ---- the job queue ------------------------------------------------------------------------------------------ */

typedef struct job {
    struct job *next;
    char repo[256], digest[160], level[24], features[512];
} job_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static job_t *head, *tail;
static int running, queued, requeued;
static berth_bgloop_t *loop;
static berth_registry_t *the_reg;

static void enqueue_one(const char *repo, const char *digest, const char *level, const char *features);

/* Entries without a verdict for their declaration: queued at start, so none stays unscanned across a restart */
static void requeue_unscanned(void)
{
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(the_reg->db, &err);
    char *rows = NULL;
    if (c == NULL)
        return;
    if (berth_db_isa_unscanned(c, MAX_QUEUED, &rows, &err) == 0) {
        json_t *arr = json_loads(rows, 0, NULL), *r;
        size_t i;
        json_array_foreach(arr, i, r)
            enqueue_one(json_string_value(json_object_get(r, "repository")), json_string_value(json_object_get(r, "digest")),
                        json_string_value(json_object_get(r, "level")), json_string_value(json_object_get(r, "features")));
        if (json_array_size(arr) > 0)
            berth_log_info("isa scan: %zu variant declarations without a verdict queued", json_array_size(arr));
        json_decref(arr);
    }
    free(rows);
    berth_db_release(the_reg->db, c);
}

/* One round of the scanner (core/bgloop, woken by each job): the first one queues what a restart left unscanned,
 * every one scans until the queue is empty or the loop stops; the last round (stopping) does nothing. */
static void scanner_tick(void *data, int last)
{
    (void)data;
    if (last)
        return;
    if (!requeued) {
        requeued = 1;
        requeue_unscanned();
    }
    while (!berth_bgloop_stopping(loop)) {
        pthread_mutex_lock(&mu);
        job_t *j = head;
        if (j != NULL) {
            head = j->next;
            if (head == NULL)
                tail = NULL;
            queued--;
        }
        pthread_mutex_unlock(&mu);
        if (j == NULL)
            return;
        /* claimed through PostgreSQL: a declaration queued on two instances (both restarted) is not scanned by both
         * at once; the second finds the lock taken and leaves it to the first */
        char status[12];
        berth_err_t err;
        berth_dbconn_t *cc = berth_db_acquire(the_reg->db, &err);
        int claimed = cc != NULL ? berth_db_isa_claim(cc, j->digest, j->level, j->features, &err) : -1;
        if (claimed < 0)
            berth_log_warn("isa scan of %s@%s: cannot claim it now; it is queued again at the next start", j->repo, j->digest);
        else if (claimed == 0)
            berth_log_info("isa scan of %s@%s: being scanned by another instance", j->repo, j->digest);
        else if (berth_isa_scan_variant(the_reg, j->repo, j->digest, j->level, j->features, status) != 0)
            berth_log_warn("isa scan of %s@%s failed", j->repo, j->digest);
        if (claimed == 1)
            berth_db_isa_unclaim(cc, j->digest, j->level, j->features);
        if (cc != NULL)
            berth_db_release(the_reg->db, cc);
        free(j);
    }
}

int berth_isa_scan_start(berth_registry_t *reg)
{
    the_reg = reg;
    pthread_mutex_lock(&mu); /* a job queued meanwhile waits for `loop` to be set */
    requeued = 0;
    running = berth_bgloop_start(&loop, "berth-isa-scan", 0, scanner_tick, NULL) == 0;
    pthread_mutex_unlock(&mu);
    if (!running)
        return BERTH_ERROR;
    berth_bgloop_wake(loop); /* the first round queues what a restart left unscanned */
    return 0;
}

void berth_isa_scan_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    running = 0; /* no job is queued from now on */
    pthread_mutex_unlock(&mu);
    berth_bgloop_stop(loop);
    loop = NULL;
    while (head != NULL) { /* left for the next start: the variants stay unscanned ("pending" is not stored) */
        job_t *j = head;
        head = j->next;
        free(j);
    }
    queued = 0;
}

static void enqueue_one(const char *repo, const char *digest, const char *level, const char *features)
{
    if (repo == NULL || digest == NULL || level == NULL)
        return;
    job_t *j = calloc(1, sizeof(*j));
    snprintf(j->repo, sizeof(j->repo), "%s", repo);
    snprintf(j->digest, sizeof(j->digest), "%s", digest);
    snprintf(j->level, sizeof(j->level), "%s", level);
    snprintf(j->features, sizeof(j->features), "%s", features != NULL ? features : "");
    pthread_mutex_lock(&mu);
    if (!running || queued >= MAX_QUEUED) {
        pthread_mutex_unlock(&mu);
        free(j);
        return;
    }
    if (tail != NULL)
        tail->next = j;
    else
        head = j;
    tail = j;
    queued++;
    berth_bgloop_wake(loop);
    pthread_mutex_unlock(&mu);
}

void berth_isa_scan_enqueue(const char *repo, const char *rows)
{
    json_t *arr = json_loads(rows, 0, NULL), *r;
    size_t i;
    json_array_foreach(arr, i, r)
    {
        const char *d = json_string_value(json_object_get(r, "digest")), *l = json_string_value(json_object_get(r, "level")),
                   *f = json_string_value(json_object_get(r, "features"));
        int dup = 0; /* an index listing one manifest twice with one declaration: one scan */
        for (size_t k = 0; k < i && !dup; k++) {
            json_t *o = json_array_get(arr, k);
            dup = json_equal(json_object_get(o, "digest"), json_object_get(r, "digest")) &&
                  json_equal(json_object_get(o, "level"), json_object_get(r, "level")) &&
                  json_equal(json_object_get(o, "features"), json_object_get(r, "features"));
        }
        if (!dup)
            enqueue_one(repo, d, l, f);
    }
    json_decref(arr);
}
