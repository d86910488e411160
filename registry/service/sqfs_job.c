#include "registry/service/sqfs_job.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/manifest.h"
#include "registry/gateway/sqfs_convert.h"
#include "registry/service/artifact_push.h"
#include "sql/api.h"
#include "sql/registry.h"

#define MAX_ATTEMPTS 5
#define MAX_LAYERS 256

static pthread_mutex_t totals_mu = PTHREAD_MUTEX_INITIALIZER;
static berth_sqfs_job_totals_t totals;

void berth_sqfs_job_totals(berth_sqfs_job_totals_t *out)
{
    pthread_mutex_lock(&totals_mu);
    *out = totals;
    pthread_mutex_unlock(&totals_mu);
}

int berth_sqfs_job_publish_path(const char *publish_dir, const char *repo, const char *digest, char *out, size_t outsz)
{
    int n = snprintf(out, outsz, "%s/%s/%s.sqsh", publish_dir, repo, digest);
    return n < 0 || (size_t)n >= outsz ? BERTH_ETOOBIG : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One statement of sql/gateway.c on a pooled connection; *json (may be NULL) receives its JSON text */
static int q(berth_registry_t *reg, berth_q_t id, const char *const *params, char **json)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL)
        return BERTH_EUNAVAIL;
    berth_db_json_t r;
    int rc = berth_db_api(c, id, params, &r, &err);
    berth_db_release(reg->db, c);
    if (json != NULL)
        *json = rc == 0 ? r.json : NULL;
    else if (rc == 0)
        free(r.json);
    return rc;
}

typedef struct {
    berth_registry_t *reg;
    const berth_sqfs_gateway_conf_t *conf;
    const berth_sqfs_job_t *job;
    int (*stopping)(void *);
    void *stop_data;
    double last;
    int lost;
} ctx_t;

/* Progress renews the lease; a claim taken over by another instance (or a stop) ends the conversion */
static int on_progress(uint64_t done, uint64_t total, void *data)
{
    ctx_t *x = data;
    if (x->stopping(x->stop_data))
        return 1;
    double t = now_s();
    if (t - x->last < 1.0 && done < total)
        return 0;
    x->last = t;
    char id[24], frac[32], lease[16];
    snprintf(id, sizeof(id), "%lld", x->job->id);
    snprintf(frac, sizeof(frac), "%.4f", total > 0 ? (double)done / (double)total : 1.0);
    snprintf(lease, sizeof(lease), "%d", x->conf->lease_seconds);
    const char *p[] = {id, x->conf->instance, frac, lease};
    char *ok = NULL;
    if (q(x->reg, BERTH_Q_SQFS_PROGRESS, p, &ok) == 0 && ok == NULL) {
        x->lost = 1;
        return 1;
    }
    free(ok);
    return 0;
}

static void finish(ctx_t *x, const char *reason, int retry)
{
    char id[24], attempts[8];
    snprintf(id, sizeof(id), "%lld", x->job->id);
    snprintf(attempts, sizeof(attempts), "%d", MAX_ATTEMPTS);
    const char *p[] = {id, x->conf->instance, reason, retry ? "true" : "false", attempts};
    char *status = NULL;
    q(x->reg, BERTH_Q_SQFS_FAIL, p, &status);
    int failed = status != NULL && strstr(status, "failed") != NULL;
    berth_log_warn("squashfs %s@%s: %s (%s)", x->job->repo, x->job->digest, reason, failed ? "failed" : "will retry");
    free(status);
    pthread_mutex_lock(&totals_mu);
    if (failed)
        totals.failed++;
    else
        totals.retried++;
    pthread_mutex_unlock(&totals_mu);
}

/* Layer bytes through the store's driver (filesystem or s3 ranges) */
typedef struct {
    berth_store_t *store;
    berth_digest_t *layers;
} layers_t;

typedef struct {
    char *buf;
    size_t n;
} fill_t;

static int fill(const char *data, size_t len, void *arg)
{
    fill_t *f = arg;
    memcpy(f->buf + f->n, data, len);
    f->n += len;
    return 0;
}

static int read_layer(void *ctx, size_t layer, uint64_t off, void *buf, size_t len, size_t *got)
{
    layers_t *l = ctx;
    int64_t size;
    berth_err_t err;
    *got = 0;
    if (berth_store_blob_stat(l->store, &l->layers[layer], &size, &err) != 0)
        return -1;
    if ((int64_t)off >= size)
        return 0;
    if ((int64_t)(off + len) > size)
        len = (size_t)(size - (int64_t)off);
    fill_t f = {.buf = buf};
    if (berth_store_blob_read(l->store, &l->layers[layer], (int64_t)off, (int64_t)len, fill, &f, &err) != 0 || f.n != len)
        return -1;
    *got = len;
    return 0;
}

/* Copy the finished image to the shared file system: a temporary name, fsync, rename, fsync the directory */
static int publish(int in, const char *dst, char *why, size_t whysz)
{
    char dir[4200], tmp[4300];
    snprintf(dir, sizeof(dir), "%s", dst);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                break;
            *p = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whysz, "publish: mkdir %.300s: %s", dir, strerror(errno));
        return -1;
    }
    /* a fixed temporary name: a retry after a crash overwrites the debris instead of adding to it */
    snprintf(tmp, sizeof(tmp), "%s/.%s.partial", dir, slash + 1);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = out >= 0 ? 0 : -1;
    char *buf = malloc(1 << 20);
    ssize_t n = 0;
    off_t off = 0;
    while (rc == 0 && (n = pread(in, buf, 1 << 20, off)) > 0) {
        for (ssize_t w = 0, k; rc == 0 && w < n; w += k)
            if ((k = write(out, buf + w, (size_t)(n - w))) < 0)
                rc = -1;
        off += n;
    }
    free(buf);
    if (rc == 0 && (n < 0 || fchmod(out, 0644) != 0 || fsync(out) != 0))
        rc = -1;
    int e = errno;
    if (out >= 0 && close(out) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(tmp, dst) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        snprintf(why, whysz, "publish %.300s: %s", dst, strerror(e));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* A filesystem layer: tar, possibly compressed (OCI and Docker media types); anything else is no root file system */
static int is_fs_layer(const char *mt)
{
    return mt != NULL && (strncmp(mt, "application/vnd.oci.image.layer.", 32) == 0 ||
                          strncmp(mt, "application/vnd.docker.image.rootfs.", 36) == 0);
}

static int is_image(json_t *man, const char *media_type)
{
    const char *cfg = json_string_value(json_object_get(json_object_get(man, "config"), "mediaType"));
    if (strcmp(media_type, BERTH_MT_OCI_MANIFEST) != 0 && strcmp(media_type, BERTH_MT_DOCKER_MANIFEST) != 0)
        return 0;
    return json_object_get(man, "subject") == NULL && cfg != NULL &&
           (strcmp(cfg, "application/vnd.oci.image.config.v1+json") == 0 ||
            strcmp(cfg, "application/vnd.docker.container.image.v1+json") == 0);
}

void berth_sqfs_job_run(berth_registry_t *reg, const berth_sqfs_gateway_conf_t *conf, const berth_sqfs_job_t *job,
                        int (*stopping)(void *), void *stop_data)
{
    ctx_t x = {.reg = reg, .conf = conf, .job = job, .stopping = stopping, .stop_data = stop_data, .last = now_s()};
    double t0 = now_s();
    berth_err_t err;
    berth_err_clear(&err);
    berth_db_manifest_t m = {0};
    berth_digest_t *digests = calloc(MAX_LAYERS, sizeof(berth_digest_t));
    size_t nlayers = 0;
    json_t *man = NULL;
    char why[512] = "";
    int fd = -1, retry = 1;
    pthread_mutex_lock(&totals_mu);
    totals.running++;
    pthread_mutex_unlock(&totals_mu);

    /* the manifest and its layer files; the connection goes back before the long part */
    berth_dbconn_t *c = berth_db_acquire(reg->db, &err);
    if (c == NULL) {
        snprintf(why, sizeof(why), "database unavailable");
        goto Fail;
    }
    int rc = berth_db_manifest_get(c, job->repo, job->digest, 1, &m, &err);
    berth_db_release(reg->db, c);
    if (rc != 0) {
        snprintf(why, sizeof(why), "the manifest cannot be read: %s", err.msg);
        retry = rc != BERTH_ENOTFOUND;
        goto Fail;
    }
    man = json_loadb(m.content, m.len, 0, NULL);
    retry = 0;
    if (man == NULL || !is_image(man, m.media_type)) {
        snprintf(why, sizeof(why), "not an image manifest (%s): nothing to flatten", m.media_type);
        goto Fail;
    }
    json_t *layers = json_object_get(man, "layers"), *l;
    size_t i;
    json_array_foreach(layers, i, l)
    {
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        const char *ld = json_string_value(json_object_get(l, "digest"));
        berth_digest_t d;
        if (!is_fs_layer(mt) || ld == NULL || berth_digest_parse(&d, ld, strlen(ld), NULL) != 0) {
            snprintf(why, sizeof(why), "layer %zu (%.120s) is not a filesystem layer", i + 1, mt != NULL ? mt : "?");
            goto Fail;
        }
        if (nlayers == MAX_LAYERS) {
            snprintf(why, sizeof(why), "more than %d layers", MAX_LAYERS);
            goto Fail;
        }
        digests[nlayers++] = d;
    }

    /* convert into an anonymous local file (squashfs is written with seeks), then into the store as a blob */
    const char *tmpdir = getenv("TMPDIR");
    char tmpl[600];
    snprintf(tmpl, sizeof(tmpl), "%s/berth-sqfs-XXXXXX", tmpdir != NULL && tmpdir[0] ? tmpdir : "/var/tmp");
    retry = 1;
    if ((fd = mkstemp(tmpl)) < 0) {
        snprintf(why, sizeof(why), "temporary file %.300s: %s", tmpl, strerror(errno));
        goto Fail;
    }
    unlink(tmpl); /* gone with the descriptor, also after a crash */
    berth_sqfs_opts_t opts = {.compressor = conf->compressor,
                              .threads = (unsigned)conf->threads,
                              .keep_devices = conf->keep_devices,
                              .progress = on_progress,
                              .progress_data = &x};
    berth_sqfs_stats_t st;
    layers_t src = {.store = reg->store, .layers = digests};
    rc = berth_sqfs_convert(nlayers, read_layer, &src, fd, &opts, &st, &err);
    if (rc != 0) {
        if (x.lost || stopping(stop_data)) { /* someone else has it, or we stop: no verdict */
            berth_log_info("squashfs %s@%s: given back (%s)", job->repo, job->digest, x.lost ? "claim lost" : "stopping");
            if (!x.lost) {
                snprintf(why, sizeof(why), "interrupted by a shutdown");
                goto Fail;
            }
            goto Exit;
        }
        snprintf(why, sizeof(why), "%s", err.msg);
        retry = rc != BERTH_EINVAL; /* a corrupt or hostile layer stays so: no retry */
        goto Fail;
    }

    /* the blob, then the referrer that makes it visible, then the published copy */
    berth_digest_t bd, ad;
    int64_t size;
    char level[64] = "", *lj = NULL;
    c = berth_db_acquire(reg->db, &err);
    if (c == NULL) {
        snprintf(why, sizeof(why), "database unavailable");
        goto Fail;
    }
    if (fsync(fd) != 0 || berth_artifact_blob_file(reg, c, job->repo, fd, &bd, &size, &err) != 0) {
        berth_db_release(reg->db, c);
        snprintf(why, sizeof(why), "storing the squashfs: %s", err.msg);
        goto Fail;
    }
    berth_db_release(reg->db, c);
    const char *lp[] = {job->repo, job->digest};
    if (q(reg, BERTH_Q_SQFS_LEVEL, lp, &lj) == 0 && lj != NULL) {
        json_t *lv = json_loads(lj, JSON_DECODE_ANY, NULL);
        snprintf(level, sizeof(level), "%s", json_string_value(lv) != NULL ? json_string_value(lv) : "");
        json_decref(lv);
    }
    free(lj);
    char usize[24];
    snprintf(usize, sizeof(usize), "%llu", (unsigned long long)st.content_bytes);
    json_t *alayers = json_pack("[{s:s,s:s,s:I,s:{s:s}}]", "mediaType", BERTH_SQFS_ARTIFACT_TYPE, "digest", bd.str, "size",
                                (json_int_t)size, "annotations", "org.opencontainers.image.title", "rootfs.sqsh");
    json_t *ann = json_pack("{s:s,s:s,s:s,s:s}", "io.berth.squashfs.source-digest", job->digest, "io.berth.squashfs.compression",
                            conf->compressor, "io.berth.squashfs.uncompressed-size", usize, "io.berth.squashfs.isa-level", level);
    c = berth_db_acquire(reg->db, &err);
    rc = c != NULL ? berth_artifact_push_referrer(reg, c, job->repo, BERTH_SQFS_ARTIFACT_TYPE, alayers, ann, job->digest, m.len,
                                                  m.media_type, &ad, &err)
                   : BERTH_EUNAVAIL;
    if (c != NULL)
        berth_db_release(reg->db, c);
    json_decref(alayers);
    json_decref(ann);
    if (rc != 0) {
        snprintf(why, sizeof(why), "storing the artifact: %s", err.msg);
        goto Fail;
    }
    char pub[4200] = "";
    if (conf->publish_dir != NULL && conf->publish_dir[0] != '\0') {
        if (berth_sqfs_job_publish_path(conf->publish_dir, job->repo, job->digest, pub, sizeof(pub)) != 0 ||
            publish(fd, pub, why, sizeof(why)) != 0)
            goto Fail;
    }
    double secs = now_s() - t0;
    json_t *res = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s,s:s,s:f}", "artifact_digest", ad.str, "digest", bd.str, "size",
                            (json_int_t)size, "uncompressed_size", (json_int_t)st.content_bytes, "compression", conf->compressor,
                            "isa_level", level, "published_path", pub, "seconds", secs);
    if (pub[0] == '\0')
        json_object_set_new(res, "published_path", json_null());
    char *rs = json_dumps(res, JSON_COMPACT), id[24], *ok = NULL;
    json_decref(res);
    snprintf(id, sizeof(id), "%lld", job->id);
    const char *dp[] = {id, conf->instance, rs};
    q(reg, BERTH_Q_SQFS_DONE, dp, &ok);
    free(rs);
    free(ok);
    berth_log_info("squashfs %s@%s: %llu files, %llu bytes -> %lld bytes (%s) in %.2f s, tree %zu bytes%s%s", job->repo,
                   job->digest, (unsigned long long)st.files, (unsigned long long)st.content_bytes, (long long)size,
                   conf->compressor, secs, st.tree_peak_bytes, pub[0] ? ", published " : "", pub);
    pthread_mutex_lock(&totals_mu);
    totals.done++;
    totals.bytes_in += st.content_bytes;
    totals.bytes_out += (uint64_t)size;
    totals.seconds += secs;
    pthread_mutex_unlock(&totals_mu);
    goto Exit;
Fail:
    finish(&x, why, retry);
Exit:
    if (fd >= 0)
        close(fd);
    free(digests);
    json_decref(man);
    berth_db_manifest_dispose(&m);
    pthread_mutex_lock(&totals_mu);
    totals.running--;
    pthread_mutex_unlock(&totals_mu);
}
