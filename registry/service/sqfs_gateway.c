#include "registry/service/sqfs_gateway.h"

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bgloop.h"
#include "core/glob.h"
#include "core/log.h"
#include "core/manifest.h"
#include "registry/service/sqfs_job.h"
#include "sql/api.h"
#include "sql/registry.h"

#define MAX_WORKERS 16
#define MAX_PENDING 10000

/* A change the dispatcher looks at: a push that may start conversions, or a deletion that ends them */
typedef struct pending {
    struct pending *next;
    berth_event_kind_t kind;
    char repo[256], digest[BERTH_DIGEST_MAX], tag[256], media_type[128];
    int has_tag;
} pending_t;

static struct {
    berth_registry_t *reg;
    berth_sqfs_gateway_conf_t conf;
    char *publish_dir, *compressor, *instance;
    berth_bgloop_t *dispatcher, *workers[MAX_WORKERS];
    int nworkers, running;
    pthread_mutex_t mu;
    pending_t *head, *tail;
    int npending, reset_done;
    char counts[256]; /* jobs by status (JSON), refreshed by the dispatcher */
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

int berth_sqfs_gateway_patterns_check(const char *pattern, const char **why)
{
    if (pattern[0] == '\0')
        return 0;
    return berth_glob_check(pattern, why);
}

static int q(berth_dbconn_t *c, berth_q_t id, const char *const *params, char **json, berth_err_t *err)
{
    berth_db_json_t r;
    int rc = berth_db_api(c, id, params, &r, err);
    if (json != NULL)
        *json = rc == 0 ? r.json : NULL;
    else if (rc == 0)
        free(r.json);
    return rc;
}

/* The project's setting for `repo`: 0 off, 'u' push, 'l' pull; *pattern receives hpc_squashfs_tags */
static int mode_of(berth_dbconn_t *c, const char *repo, char *pattern, size_t psz, berth_err_t *err)
{
    const char *p[] = {repo};
    char *js = NULL;
    int mode = 0;
    pattern[0] = '\0';
    if (q(c, BERTH_Q_SQFS_MODE, p, &js, err) != 0 || js == NULL)
        return 0;
    json_t *v = json_loads(js, 0, NULL);
    const char *m = json_string_value(json_object_get(v, "mode")), *t = json_string_value(json_object_get(v, "tags"));
    mode = m == NULL ? 0 : strcmp(m, "push") == 0 ? 'u' : strcmp(m, "pull") == 0 ? 'l' : 0;
    snprintf(pattern, psz, "%s", t != NULL ? t : "");
    json_decref(v);
    free(js);
    return mode;
}

int berth_sqfs_gateway_request(berth_dbconn_t *c, const char *repo, const char *digest, char **json, int *created, berth_err_t *err)
{
    const char *p[] = {repo, digest};
    char pattern[1024], *n = NULL;
    *created = 0;
    int rc = q(c, BERTH_Q_SQFS_GET, p, json, err);
    if (rc != 0 || *json != NULL)
        return rc;
    if (mode_of(c, repo, pattern, sizeof(pattern), err) == 0)
        return BERTH_ENOTFOUND;
    if ((rc = q(c, BERTH_Q_SQFS_ENSURE, p, &n, err)) != 0)
        return rc;
    *created = n != NULL && strcmp(n, "1") == 0;
    free(n);
    pthread_mutex_lock(&G.mu);
    for (int i = 0; G.running && i < G.nworkers; i++)
        berth_bgloop_wake(G.workers[i]);
    pthread_mutex_unlock(&G.mu);
    return q(c, BERTH_Q_SQFS_GET, p, json, err); /* queued, or running when a woken worker claimed it first */
}

/* ---- events: queued in memory here, handled on the dispatcher's thread ------------------------------------- */

void berth_sqfs_gateway_event(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    int push = ev->kind == BERTH_EVENT_MANIFEST_PUSH || ev->kind == BERTH_EVENT_TAG_PUSH;
    int gone = ev->kind == BERTH_EVENT_MANIFEST_DELETE || ev->kind == BERTH_EVENT_REPOSITORY_DELETE;
    /* Berth's own artifacts (ours, scan verdicts) are no images to flatten */
    if ((!push && !gone) || (push && ev->surface == BERTH_EVENT_INTERNAL) || ev->repo == NULL)
        return;
    if (ev->kind != BERTH_EVENT_REPOSITORY_DELETE && ev->digest == NULL && ev->kind != BERTH_EVENT_TAG_PUSH)
        return;
    pending_t *pe = calloc(1, sizeof(*pe));
    pe->kind = ev->kind;
    snprintf(pe->repo, sizeof(pe->repo), "%s", ev->repo);
    snprintf(pe->digest, sizeof(pe->digest), "%s", ev->digest != NULL ? ev->digest : "");
    snprintf(pe->media_type, sizeof(pe->media_type), "%s", ev->media_type != NULL ? ev->media_type : "");
    if (ev->tag != NULL) {
        snprintf(pe->tag, sizeof(pe->tag), "%s", ev->tag);
        pe->has_tag = 1;
    }
    pthread_mutex_lock(&G.mu);
    if (!G.running || G.npending >= MAX_PENDING) {
        pthread_mutex_unlock(&G.mu);
        free(pe);
        return;
    }
    if (G.tail != NULL)
        G.tail->next = pe;
    else
        G.head = pe;
    G.tail = pe;
    G.npending++;
    berth_bgloop_wake(G.dispatcher);
    pthread_mutex_unlock(&G.mu);
}

static int ensure(berth_dbconn_t *c, const char *repo, const char *digest)
{
    const char *p[] = {repo, digest};
    char *n = NULL;
    berth_err_t err;
    int created = q(c, BERTH_Q_SQFS_ENSURE, p, &n, &err) == 0 && n != NULL && strcmp(n, "1") == 0;
    free(n);
    if (created)
        berth_log_info("squashfs %s@%s: queued", repo, digest);
    return created;
}

/* A push in a project converting on push: the manifest, or each image manifest of an index (each ISA variant) */
static int on_push(berth_dbconn_t *c, const pending_t *pe)
{
    char pattern[1024];
    berth_err_t err;
    berth_err_clear(&err);
    if (mode_of(c, pe->repo, pattern, sizeof(pattern), &err) != 'u')
        return 0;
    if (pattern[0] != '\0' && (!pe->has_tag || berth_glob_match(pattern, pe->tag) != 1))
        return 0;
    berth_db_manifest_t m = {0};
    const char *ref = pe->digest[0] ? pe->digest : pe->tag;
    if (berth_db_manifest_get(c, pe->repo, ref, pe->digest[0] != '\0', &m, &err) != 0)
        return 0;
    int n = 0;
    json_t *man = json_loadb(m.content, m.len, 0, NULL), *e;
    size_t i;
    if (strcmp(m.media_type, BERTH_MT_OCI_INDEX) == 0 || strcmp(m.media_type, BERTH_MT_DOCKER_LIST) == 0) {
        json_array_foreach(json_object_get(man, "manifests"), i, e)
        {
            const char *mt = json_string_value(json_object_get(e, "mediaType")),
                       *d = json_string_value(json_object_get(e, "digest"));
            const char *os = json_string_value(json_object_get(json_object_get(e, "platform"), "os"));
            if (d == NULL || mt == NULL || (os != NULL && strcmp(os, "unknown") == 0) || /* attestations */
                (strcmp(mt, BERTH_MT_OCI_MANIFEST) != 0 && strcmp(mt, BERTH_MT_DOCKER_MANIFEST) != 0))
                continue;
            n += ensure(c, pe->repo, d);
        }
    } else if (json_object_get(man, "subject") == NULL) { /* a referrer is no image of its own */
        const char *cfg = json_string_value(json_object_get(json_object_get(man, "config"), "mediaType"));
        if (cfg != NULL && (strcmp(cfg, "application/vnd.oci.image.config.v1+json") == 0 ||
                            strcmp(cfg, "application/vnd.docker.container.image.v1+json") == 0))
            n += ensure(c, pe->repo, m.digest);
    }
    json_decref(man);
    berth_db_manifest_dispose(&m);
    return n;
}

static void unpublish(const char *path)
{
    if (path != NULL && path[0] != '\0' && unlink(path) == 0)
        berth_log_info("squashfs: unpublished %s", path);
}

/* A deleted manifest (the source or its squashfs artifact) ends its job and removes the published file */
static void on_delete(berth_dbconn_t *c, const pending_t *pe)
{
    berth_err_t err;
    char path[4200];
    if (pe->kind == BERTH_EVENT_REPOSITORY_DELETE) { /* the rows went with the repository (ON DELETE CASCADE) */
        if (G.publish_dir == NULL || snprintf(path, sizeof(path), "%s/%s", G.publish_dir, pe->repo) >= (int)sizeof(path))
            return;
        DIR *d = opendir(path);
        struct dirent *de;
        while (d != NULL && (de = readdir(d)) != NULL) {
            size_t l = strlen(de->d_name);
            if (l > 5 && strcmp(de->d_name + l - 5, ".sqsh") == 0 && de->d_name[0] != '.') {
                char f[4500];
                snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
                unpublish(f);
            }
        }
        if (d != NULL)
            closedir(d);
        rmdir(path);
        return;
    }
    const char *p[] = {pe->repo, pe->digest};
    char *js = NULL;
    if (q(c, BERTH_Q_SQFS_FORGET, p, &js, &err) != 0 || js == NULL)
        return;
    json_t *arr = json_loads(js, 0, NULL), *e;
    size_t i;
    json_array_foreach(arr, i, e)
    {
        const char *src = json_string_value(json_object_get(e, "digest"));
        /* the path is recomputed, never taken from the row: only files under publish_dir are removed */
        if (G.publish_dir != NULL && src != NULL &&
            berth_sqfs_job_publish_path(G.publish_dir, pe->repo, src, path, sizeof(path)) == 0)
            unpublish(path);
    }
    json_decref(arr);
    free(js);
}

/*
 * Push events reach the dispatcher through memory (after the push's commit), so a berthd that dies in between
 * loses them: at start, tags set within the last CATCH_UP_HOURS in projects converting on push whose manifest has
 * no job are handled as if just pushed (on_push applies the tag pattern; ENSURE is idempotent).
 */
#define CATCH_UP_HOURS "24"
static void catch_up(berth_dbconn_t *c)
{
    const char *p[] = {CATCH_UP_HOURS};
    char *js = NULL;
    berth_err_t err;
    if (q(c, BERTH_Q_SQFS_MISSED, p, &js, &err) != 0 || js == NULL)
        return;
    json_t *rows = json_loads(js, 0, NULL), *row;
    size_t i;
    int n = 0;
    json_array_foreach(rows, i, row)
    {
        const char *repo = json_string_value(json_array_get(row, 0)), *tag = json_string_value(json_array_get(row, 1)),
                   *digest = json_string_value(json_array_get(row, 2));
        if (repo == NULL || tag == NULL || digest == NULL)
            continue;
        pending_t pe = {.kind = BERTH_EVENT_TAG_PUSH, .has_tag = 1};
        snprintf(pe.repo, sizeof(pe.repo), "%s", repo);
        snprintf(pe.tag, sizeof(pe.tag), "%s", tag);
        snprintf(pe.digest, sizeof(pe.digest), "%s", digest);
        n += on_push(c, &pe);
    }
    if (n > 0)
        berth_log_info("squashfs: %d conversion(s) of pushes not queued before the last stop", n);
    json_decref(rows);
    free(js);
}

static void dispatcher_tick(void *data, int stopping)
{
    (void)data;
    if (stopping)
        return;
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_db_acquire(G.reg->db, &err);
    if (c == NULL)
        return; /* the next tick (or wake) tries again; pending changes wait */
    if (!G.reset_done) {
        const char *p[] = {G.instance};
        G.reset_done = q(c, BERTH_Q_SQFS_RESET, p, NULL, &err) == 0;
        if (G.reset_done)
            catch_up(c);
    }
    int wake = 1; /* at least once per tick: jobs of others whose lease ran out, retries now due */
    for (;;) {
        pthread_mutex_lock(&G.mu);
        pending_t *pe = G.head;
        if (pe != NULL) {
            G.head = pe->next;
            if (G.head == NULL)
                G.tail = NULL;
            G.npending--;
        }
        pthread_mutex_unlock(&G.mu);
        if (pe == NULL)
            break;
        if (pe->kind == BERTH_EVENT_MANIFEST_PUSH || pe->kind == BERTH_EVENT_TAG_PUSH)
            wake += on_push(c, pe);
        else
            on_delete(c, pe);
        free(pe);
    }
    char *counts = NULL;
    if (q(c, BERTH_Q_SQFS_COUNTS, NULL, &counts, &err) == 0 && counts != NULL) {
        pthread_mutex_lock(&G.mu);
        snprintf(G.counts, sizeof(G.counts), "%s", counts);
        pthread_mutex_unlock(&G.mu);
    }
    free(counts);
    berth_db_release(G.reg->db, c);
    for (int i = 0; wake && i < G.nworkers; i++)
        berth_bgloop_wake(G.workers[i]);
}

/* ---- workers: claim and convert until nothing is runnable --------------------------------------------------- */

static int worker_stopping(void *data)
{
    return berth_bgloop_stopping(data);
}

static void worker_tick(void *data, int stopping)
{
    berth_bgloop_t **self = data;
    if (stopping)
        return;
    while (!berth_bgloop_stopping(*self)) {
        berth_err_t err;
        berth_err_clear(&err);
        berth_dbconn_t *c = berth_db_acquire(G.reg->db, &err);
        if (c == NULL)
            return;
        char lease[16], *js = NULL;
        snprintf(lease, sizeof(lease), "%d", G.conf.lease_seconds);
        const char *p[] = {G.instance, lease};
        int rc = q(c, BERTH_Q_SQFS_CLAIM, p, &js, &err);
        berth_db_release(G.reg->db, c);
        if (rc != 0 || js == NULL)
            return;
        json_t *v = json_loads(js, 0, NULL);
        free(js);
        berth_sqfs_job_t job = {.id = json_integer_value(json_object_get(v, "id")),
                                .attempts = (int)json_integer_value(json_object_get(v, "attempts"))};
        const char *repo = json_string_value(json_object_get(v, "repository")),
                   *d = json_string_value(json_object_get(v, "digest"));
        snprintf(job.repo, sizeof(job.repo), "%s", repo != NULL ? repo : "");
        snprintf(job.digest, sizeof(job.digest), "%s", d != NULL ? d : "");
        json_decref(v);
        berth_log_info("squashfs %s@%s: converting (attempt %d)", job.repo, job.digest, job.attempts);
        berth_sqfs_job_run(G.reg, &G.conf, &job, worker_stopping, *self);
    }
}

int berth_sqfs_gateway_start(berth_registry_t *reg, const berth_sqfs_gateway_conf_t *conf)
{
    pthread_mutex_lock(&G.mu);
    G.reg = reg;
    G.conf = *conf;
    G.publish_dir = conf->publish_dir != NULL && conf->publish_dir[0] ? strdup(conf->publish_dir) : NULL;
    G.compressor = strdup(conf->compressor != NULL ? conf->compressor : "zstd");
    G.instance = strdup(conf->instance);
    G.conf.publish_dir = G.publish_dir;
    G.conf.compressor = G.compressor;
    G.conf.instance = G.instance;
    if (G.conf.lease_seconds < 5)
        G.conf.lease_seconds = 5;
    G.nworkers = conf->workers < 1 ? 1 : conf->workers > MAX_WORKERS ? MAX_WORKERS : conf->workers;
    G.reset_done = 0;
    snprintf(G.counts, sizeof(G.counts), "{}");
    int rc = 0;
    /* workers also look for claimable jobs every half lease: those another berthd left behind */
    for (int i = 0; i < G.nworkers && rc == 0; i++)
        rc = berth_bgloop_start(&G.workers[i], "berth-sqfs", (long)G.conf.lease_seconds * 500, worker_tick, &G.workers[i]);
    if (rc == 0)
        rc = berth_bgloop_start(&G.dispatcher, "berth-sqfs-disp", 5000, dispatcher_tick, NULL);
    G.running = rc == 0;
    pthread_mutex_unlock(&G.mu);
    if (rc != 0) {
        berth_sqfs_gateway_stop();
        return BERTH_ERROR;
    }
    berth_bgloop_wake(G.dispatcher);
    return 0;
}

void berth_sqfs_gateway_stop(void)
{
    pthread_mutex_lock(&G.mu);
    G.running = 0; /* no event is queued from now on */
    pthread_mutex_unlock(&G.mu);
    berth_bgloop_stop(G.dispatcher);
    G.dispatcher = NULL;
    for (int i = 0; i < MAX_WORKERS; i++) { /* a conversion in progress gives its job back (queued) */
        berth_bgloop_stop(G.workers[i]);
        G.workers[i] = NULL;
    }
    while (G.head != NULL) {
        pending_t *pe = G.head;
        G.head = pe->next;
        free(pe);
    }
    G.tail = NULL;
    G.npending = 0;
    free(G.publish_dir);
    free(G.compressor);
    free(G.instance);
    G.publish_dir = G.compressor = G.instance = NULL;
}

void berth_sqfs_gateway_metrics(FILE *f)
{
    berth_sqfs_job_totals_t t;
    berth_sqfs_job_totals(&t);
    char counts[256];
    pthread_mutex_lock(&G.mu);
    snprintf(counts, sizeof(counts), "%s", G.counts[0] ? G.counts : "{}");
    pthread_mutex_unlock(&G.mu);
    fprintf(f, "# HELP berth_sqfs_jobs Squashfs conversion jobs in the database, by status (all instances).\n"
               "# TYPE berth_sqfs_jobs gauge\n");
    json_t *v = json_loads(counts, 0, NULL);
    static const char *const statuses[] = {"queued", "running", "done", "failed"};
    for (size_t i = 0; i < 4; i++)
        fprintf(f, "berth_sqfs_jobs{status=\"%s\"} %lld\n", statuses[i],
                (long long)json_integer_value(json_object_get(v, statuses[i])));
    json_decref(v);
    fprintf(f,
            "# HELP berth_sqfs_conversions_total Conversions this berthd ended, by result.\n"
            "# TYPE berth_sqfs_conversions_total counter\n"
            "berth_sqfs_conversions_total{result=\"done\"} %llu\nberth_sqfs_conversions_total{result=\"failed\"} %llu\n"
            "berth_sqfs_conversions_total{result=\"retry\"} %llu\n"
            "# TYPE berth_sqfs_converting gauge\nberth_sqfs_converting %llu\n"
            "# HELP berth_sqfs_content_bytes_total File contents flattened into squashfs images.\n"
            "# TYPE berth_sqfs_content_bytes_total counter\nberth_sqfs_content_bytes_total %llu\n"
            "# TYPE berth_sqfs_image_bytes_total counter\nberth_sqfs_image_bytes_total %llu\n"
            "# TYPE berth_sqfs_seconds_total counter\nberth_sqfs_seconds_total %.3f\n",
            (unsigned long long)t.done, (unsigned long long)t.failed, (unsigned long long)t.retried, (unsigned long long)t.running,
            (unsigned long long)t.bytes_in, (unsigned long long)t.bytes_out, t.seconds);
}
