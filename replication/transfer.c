#include "replication/transfer.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/digest.h"
#include "core/log.h"
#include "core/ref.h"
#include "replication/client.h"
#include "replication/queue.h"
#include "replication/replication.h"

#define ACCEPT_ALL                                                                                                                 \
    "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "                                \
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"

static char self_url[512], self_user[128], self_password[128];
static long chunk_bytes;

void berth_repl_transfer_init(const char *url, const char *user, const char *password, long chunk)
{
    snprintf(self_url, sizeof(self_url), "%s", url);
    snprintf(self_user, sizeof(self_user), "%s", user);
    snprintf(self_password, sizeof(self_password), "%s", password);
    chunk_bytes = chunk;
}

/* ---- endpoints ---------------------------------------------------------------------------------------------- */

/* A client for a registry (NULL: this Berth, as the internal replication user) */
static berth_client_t *client_for(const berth_repl_endpoint_t *reg, long speed_kib)
{
    berth_client_conf_t cc = {.url = self_url,
                              .user = self_user,
                              .password = self_password,
                              .timeout_s = 60,
                              .max_send_bytes_per_s = speed_kib > 0 ? speed_kib * 1024 : 0};
    char *secret = NULL;
    if (reg != NULL) {
        cc.url = reg->url;
        cc.user = reg->access_key;
        secret = berth_repl_open(reg->secret);
        cc.password = secret != NULL ? secret : "";
        cc.insecure = reg->insecure;
        cc.ca_file = reg->ca_file;
    }
    berth_client_t *c = berth_client_new(&cc);
    if (secret != NULL) {
        memset(secret, 0, strlen(secret));
        free(secret);
    }
    return c;
}

int berth_repl_ping(const char *type, const char *url, const char *user, const char *password, int insecure, const char *ca_file,
                    berth_err_t *err)
{
    berth_client_conf_t cc = {
        .url = url, .user = user, .password = password, .insecure = insecure, .ca_file = ca_file, .timeout_s = 10};
    berth_client_t *c = berth_client_new(&cc);
    berth_http_t r;
    int rc = berth_client_do(c, "GET", "/v2/", NULL, NULL, 0, &r);
    long st = r.status;
    berth_http_dispose(&r);
    berth_client_free(c);
    if (rc != 0)
        return berth_err_set(err, BERTH_OCI_UNAVAILABLE, "%s unreachable", url);
    if (st == 401)
        return berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "%s refused the credentials", url);
    if (st != 200)
        return berth_err_set(err, BERTH_OCI_BAD_REQUEST, "%s answered %ld to /v2/", url, st);
    (void)type;
    return 0;
}

/* ---- copying ------------------------------------------------------------------------------------------------ */

typedef struct {
    const berth_repl_task_t *task;
    berth_repl_transfer_result_t *res;
    berth_client_t *src, *dst;
    int zstd;         /* the destination is a Berth: chunks travel zstd-compressed when that is smaller */
    int name_unknown; /* the destination refused a push for lack of its project (Berth, Harbor) */
} job_t;

static void logf_(job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(job_t *j, const char *fmt, ...)
{
    char *log = j->res->log;
    size_t n = strlen(log), cap = sizeof(j->res->log);
    if (n + 2 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log + n, cap - n, fmt, ap);
    va_end(ap);
    n = strlen(log);
    if (n + 1 < cap) {
        log[n] = ';';
        log[n + 1] = '\0';
    }
}

static int still_running(job_t *j)
{
    if (berth_repl_queue_exec_running(j->task->execution_id))
        return 1;
    j->res->stopped = 1;
    return 0;
}

/* an upload Location made absolute against the client's base */
static void absolute(const char *base, const char *loc, char *out, size_t outsz)
{
    if (strncmp(loc, "http://", 7) == 0 || strncmp(loc, "https://", 8) == 0)
        snprintf(out, outsz, "%s", loc);
    else
        snprintf(out, outsz, "%s%s", base, loc);
}

/* Blobs recently copied, by destination base and digest: a later copy into another repository there mounts it */
#define MOUNTS 4096
static struct {
    char key[200], repo[256];
} mounts[MOUNTS];
static pthread_mutex_t mounts_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned mount_slot(const char *base, const char *digest, char key[200])
{
    snprintf(key, 200, "%.60s|%.135s", base, digest);
    unsigned h = 2166136261u;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % MOUNTS;
}

static void mount_note(const char *base, const char *digest, const char *repo)
{
    char key[200];
    unsigned i = mount_slot(base, digest, key);
    pthread_mutex_lock(&mounts_mu);
    snprintf(mounts[i].key, sizeof(mounts[i].key), "%s", key);
    snprintf(mounts[i].repo, sizeof(mounts[i].repo), "%s", repo);
    pthread_mutex_unlock(&mounts_mu);
}

static int mount_from(const char *base, const char *digest, char repo[256])
{
    char key[200];
    unsigned i = mount_slot(base, digest, key);
    pthread_mutex_lock(&mounts_mu);
    int hit = strcmp(mounts[i].key, key) == 0;
    if (hit)
        snprintf(repo, 256, "%s", mounts[i].repo);
    pthread_mutex_unlock(&mounts_mu);
    return hit;
}

/* The end of an upload's Range header ("0-1234"): 1 with *last, 0 when it is not one */
static int range_end(const char *range, long long *last)
{
    char *end;
    errno = 0;
    long long first = strtoll(range, &end, 10);
    if (end == range || *end != '-' || first < 0)
        return 0;
    const char *second = end + 1;
    *last = strtoll(second, &end, 10);
    return end != second && errno == 0 && *last >= first;
}

/* Copy one blob, resuming a session this task left at the destination */
static int copy_blob(job_t *j, const char *dst_base, const char *srepo, const char *drepo, const char *digest, long long size)
{
    char path[1024], loc[2300] = "", hdr_range[96], hdr_crange[96];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/blobs/%s", drepo, digest);
    if (berth_client_do(j->dst, "HEAD", path, NULL, NULL, 0, &r) != 0)
        return BERTH_ERETRY;
    long have = r.status;
    berth_http_dispose(&r);
    j->res->total += size;
    if (have == 200)
        return 0; /* the destination has it */
    char from[256];
    if (mount_from(dst_base, digest, from) && strcmp(from, drepo) != 0) { /* the destination has it elsewhere */
        snprintf(path, sizeof(path), "/v2/%s/blobs/uploads/?mount=%s&from=%s", drepo, digest, from);
        if (berth_client_do(j->dst, "POST", path, NULL, NULL, 0, &r) == 0 && r.status == 201) {
            berth_http_dispose(&r);
            logf_(j, "mounted %s from %s", digest, from);
            return 0;
        }
        berth_http_dispose(&r); /* a 202 session from a refused mount is simply left to expire */
    }
    long long off = 0;
    if (berth_repl_queue_upload_get(j->task->id, digest, loc, sizeof(loc)) == 0) {
        /* resume: the destination says how many bytes it holds */
        if (berth_client_do(j->dst, "GET", loc, NULL, NULL, 0, &r) != 0)
            return BERTH_ERETRY;
        long long last;
        if ((r.status == 204 || r.status == 200) && range_end(r.range, &last)) {
            off = last + 1;
            if (r.location[0])
                absolute(dst_base, r.location, loc, sizeof(loc));
            logf_(j, "resumed %s at %lld", digest, off);
        } else if (r.status == 204 || r.status == 200) {
            off = 0;
        } else {
            loc[0] = '\0'; /* the session is gone: start over */
        }
        berth_http_dispose(&r);
    }
    if (loc[0] == '\0') {
        snprintf(path, sizeof(path), "/v2/%s/blobs/uploads/", drepo);
        if (berth_client_do(j->dst, "POST", path, NULL, NULL, 0, &r) != 0)
            return BERTH_ERETRY;
        if (r.status != 202) {
            j->name_unknown |= r.status == 404 && r.body != NULL && strstr(r.body, "NAME_UNKNOWN") != NULL;
            logf_(j, "upload start %s: HTTP %ld", drepo, r.status);
            berth_http_dispose(&r);
            return BERTH_ERROR;
        }
        absolute(dst_base, r.location, loc, sizeof(loc));
        berth_http_dispose(&r);
    }
    berth_repl_queue_upload_put(j->task->id, digest, loc);
    long chunk = chunk_bytes > 0 ? chunk_bytes : (8L << 20);
    while (off < size) {
        if (!still_running(j))
            return BERTH_ECONFLICT;
        long long n = size - off < chunk ? size - off : chunk;
        snprintf(hdr_range, sizeof(hdr_range), "Range: bytes=%lld-%lld", off, off + n - 1);
        snprintf(path, sizeof(path), "/v2/%s/blobs/%s", srepo, digest);
        berth_http_t g;
        if (berth_client_do(j->src, "GET", path, (const char *const[]){hdr_range, NULL}, NULL, 0, &g) != 0)
            return BERTH_ERETRY;
        const char *data = g.body;
        if (g.status == 200 && (long long)g.len == size) /* the source ignored Range */
            data = g.body + off;
        else if (g.status != 206 || (long long)g.len != n) {
            logf_(j, "source blob %s: HTTP %ld", digest, g.status);
            berth_http_dispose(&g);
            return g.status >= 500 ? BERTH_ERETRY : BERTH_ERROR;
        }
        snprintf(hdr_crange, sizeof(hdr_crange), "Content-Range: %lld-%lld", off, off + n - 1);
        /* between Berth sites a chunk travels compressed when that saves bytes; the destination decodes it and
         * checks ranges and the digest on the original bytes */
        char *z = NULL;
        size_t zlen = 0;
        if (j->zstd) {
            z = malloc(ZSTD_compressBound((size_t)n));
            zlen = ZSTD_compress(z, ZSTD_compressBound((size_t)n), data, (size_t)n, 3);
            if (ZSTD_isError(zlen) || zlen >= (size_t)n * 95 / 100) {
                free(z);
                z = NULL;
            }
        }
        int rc = berth_client_do(
            j->dst, "PATCH", loc,
            z != NULL ? (const char *const[]){hdr_crange, "Content-Type: application/octet-stream", "Content-Encoding: zstd", NULL}
                      : (const char *const[]){hdr_crange, "Content-Type: application/octet-stream", NULL},
            z != NULL ? z : data, z != NULL ? zlen : (size_t)n, &r);
        free(z);
        berth_http_dispose(&g);
        berth_repl_queue_task_progress(j->task->id, r.sent);
        if (rc != 0)
            return BERTH_ERETRY;
        if (r.status != 202) {
            /* 416 (the session is still held by the request a cut link left behind, or the offset moved) and
             * 404 (the session expired) are settled by the retry, which asks the destination again */
            long st = r.status;
            logf_(j, "upload %s at %lld: HTTP %ld", digest, off, st);
            berth_http_dispose(&r);
            return st == 401 || st == 403 ? BERTH_ERROR : BERTH_ERETRY;
        }
        absolute(dst_base, r.location, loc, sizeof(loc));
        berth_http_dispose(&r);
        berth_repl_queue_upload_put(j->task->id, digest, loc);
        off += n;
    }
    char fin[2500];
    snprintf(fin, sizeof(fin), "%s%cdigest=%s", loc, strchr(loc, '?') != NULL ? '&' : '?', digest);
    if (berth_client_do(j->dst, "PUT", fin, (const char *const[]){"Content-Type: application/octet-stream", NULL}, NULL, 0, &r) !=
        0)
        return BERTH_ERETRY;
    long st = r.status;
    berth_http_dispose(&r);
    berth_repl_queue_upload_del(j->task->id, digest);
    if (st != 201) {
        logf_(j, "upload finish %s: HTTP %ld", digest, st);
        return BERTH_ERROR;
    }
    mount_note(dst_base, digest, drepo);
    return 0;
}

/* Copy a manifest and what it needs (blobs, children first), then the referrers of it */
static int copy_manifest(job_t *j, const char *dst_base, const char *srepo, const char *ref, const char *drepo, const char *dref,
                         int depth)
{
    char path[1024], ctype[300];
    berth_http_t m;
    if (depth > 4)
        return BERTH_ERROR;
    if (depth == 0 && strchr(dref, ':') == NULL && !j->task->override) {
        /* override off: a tag the destination already has stays as it is */
        snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, dref);
        if (berth_client_do(j->dst, "HEAD", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &m) != 0)
            return BERTH_ERETRY;
        long have = m.status;
        berth_http_dispose(&m);
        if (have == 200) {
            logf_(j, "%s:%s exists at the destination (override off): kept", drepo, dref);
            return 0;
        }
    }
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", srepo, ref);
    if (berth_client_do(j->src, "GET", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &m) != 0)
        return BERTH_ERETRY;
    if (m.status != 200) {
        logf_(j, "source manifest %s:%s: HTTP %ld", srepo, ref, m.status);
        long st = m.status;
        berth_http_dispose(&m);
        return st >= 500 ? BERTH_ERETRY : BERTH_ERROR;
    }
    json_t *man = json_loadb(m.body, m.len, 0, NULL), *d;
    size_t i;
    int rc = 0;
    json_array_foreach(json_object_get(man, "manifests"), i, d)
    {
        const char *cd = json_string_value(json_object_get(d, "digest"));
        if (cd != NULL && (rc = copy_manifest(j, dst_base, srepo, cd, drepo, cd, depth + 1)) != 0)
            break;
    }
    if (rc == 0 && json_is_object(json_object_get(man, "config"))) {
        json_t *cfg = json_object_get(man, "config");
        rc = copy_blob(j, dst_base, srepo, drepo, json_string_value(json_object_get(cfg, "digest")) ?: "",
                       (long long)json_integer_value(json_object_get(cfg, "size")));
        json_array_foreach(json_object_get(man, "layers"), i, d)
        {
            if (rc != 0)
                break;
            rc = copy_blob(j, dst_base, srepo, drepo, json_string_value(json_object_get(d, "digest")) ?: "",
                           (long long)json_integer_value(json_object_get(d, "size")));
        }
    }
    char digest[160];
    berth_digest_t dg;
    berth_digest_of(&dg, BERTH_DIGEST_SHA256, m.body, m.len);
    snprintf(digest, sizeof(digest), "%s", dg.str);
    if (rc == 0) {
        snprintf(ctype, sizeof(ctype), "Content-Type: %s",
                 m.content_type[0] ? m.content_type : "application/vnd.oci.image.manifest.v1+json");
        snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, dref);
        berth_http_t p;
        if (berth_client_do(j->dst, "PUT", path, (const char *const[]){ctype, NULL}, m.body, m.len, &p) != 0)
            rc = BERTH_ERETRY;
        else if (p.status != 201) {
            j->name_unknown |= p.status == 404 && p.body != NULL && strstr(p.body, "NAME_UNKNOWN") != NULL;
            logf_(j, "manifest %s:%s: HTTP %ld %.120s", drepo, dref, p.status, p.body != NULL ? p.body : "");
            rc = p.status >= 500 ? BERTH_ERETRY : BERTH_ERROR;
        }
        berth_http_dispose(&p);
    }
    json_decref(man);
    berth_http_dispose(&m);
    if (rc != 0 || depth > 0)
        return rc;
    /* referrers (signatures, SBOMs, ISA scan results) travel with their subject; sources without the API skip */
    snprintf(path, sizeof(path), "/v2/%s/referrers/%s", srepo, digest);
    berth_http_t rf;
    if (berth_client_do(j->src, "GET", path, NULL, NULL, 0, &rf) == 0 && rf.status == 200) {
        json_t *idx = json_loads(rf.body, 0, NULL);
        json_array_foreach(json_object_get(idx, "manifests"), i, d)
        {
            const char *rd = json_string_value(json_object_get(d, "digest"));
            if (rd != NULL && (rc = copy_manifest(j, dst_base, srepo, rd, drepo, rd, depth + 1)) != 0)
                break;
        }
        json_decref(idx);
    }
    berth_http_dispose(&rf);
    return rc;
}

/* Does repo:tag exist at c (with digest `digest`, unless NULL)? Unanswered counts as yes. */
static int names_digest(berth_client_t *c, const char *repo, const char *tag, const char *digest)
{
    char path[1024];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", repo, tag);
    if (berth_client_do(c, "HEAD", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &r) != 0)
        return 1;
    int yes = r.status >= 500 || r.status == 429 || (r.status == 200 && (digest == NULL || strcmp(r.digest, digest) == 0));
    berth_http_dispose(&r);
    return yes;
}

/* Does another tag than `tag` name `digest` at the destination and still exist at the source (a tag gone from the
 * source is one this replication could not delete alone, so it does not hold the manifest)? Reads one page of the
 * destination's tag list and HEADs at most BERTH_REPL_TAG_CHECK tags; a registry that cannot answer counts as
 * "yes" (keep). */
enum { BERTH_REPL_TAG_CHECK = 200 };
static int other_tag_names(job_t *j, const char *srepo, const char *drepo, const char *tag, const char *digest)
{
    char path[1024];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/tags/list?n=%d", drepo, BERTH_REPL_TAG_CHECK);
    if (berth_client_do(j->dst, "GET", path, NULL, NULL, 0, &r) != 0)
        return 1;
    if (r.status != 200) {
        berth_http_dispose(&r);
        return 1;
    }
    json_t *o = json_loads(r.body != NULL ? r.body : "", 0, NULL);
    berth_http_dispose(&r);
    json_t *tags = json_object_get(o, "tags");
    int found = !json_is_array(tags) || json_array_size(tags) >= BERTH_REPL_TAG_CHECK;
    for (size_t i = 0; !found && i < json_array_size(tags); i++) {
        const char *t = json_string_value(json_array_get(tags, i));
        if (t == NULL || strcmp(t, tag) == 0)
            continue;
        found = names_digest(j->dst, drepo, t, digest) && names_digest(j->src, srepo, t, NULL);
    }
    json_decref(o);
    return found;
}

/* A deleted tag is deleted as a tag (OCI 1.1; Berth, Harbor and Zot delete just the tag): deleting the digest it
 * names would take every other tag of that manifest at the destination with it. A destination that deletes by
 * digest only (Distribution 2.x) gets the digest deleted when no other tag there names it; else it is kept. */
static int delete_remote(job_t *j, const char *srepo, const char *drepo, const char *dref)
{
    char path[1024];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, dref);
    int is_tag = strchr(dref, ':') == NULL;
    if (is_tag) {
        if (berth_client_do(j->dst, "DELETE", path, NULL, NULL, 0, &r) != 0)
            return BERTH_ERETRY;
        long st = r.status;
        berth_http_dispose(&r);
        if (st == 202 || st == 200 || st == 404)
            return 0;
        if (st >= 500 || st == 401 || st == 403)
            return st >= 500 ? BERTH_ERETRY : BERTH_ERROR;
    }
    if (berth_client_do(j->dst, "HEAD", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &r) != 0)
        return BERTH_ERETRY;
    if (r.status == 404) {
        berth_http_dispose(&r);
        return 0; /* already gone */
    }
    char digest[160];
    snprintf(digest, sizeof(digest), "%s", r.digest);
    berth_http_dispose(&r);
    if (is_tag && (digest[0] == '\0' || other_tag_names(j, srepo, drepo, dref, digest))) {
        logf_(j, "%s:%s: the destination deletes by digest only and another live tag names %s there: kept", drepo, dref,
              digest[0] ? digest : "it");
        return 0;
    }
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, digest[0] ? digest : dref);
    if (berth_client_do(j->dst, "DELETE", path, NULL, NULL, 0, &r) != 0)
        return BERTH_ERETRY;
    long st = r.status;
    berth_http_dispose(&r);
    return st == 202 || st == 200 || st == 404 ? 0 : BERTH_ERROR;
}

/* A Berth destination (this one for pull policies) refuses a push into a missing project, as Harbor does: create
 * it through the destination's API, as Harbor's replication does, when the push said NAME_UNKNOWN (so a working
 * destination costs no extra request and a refused credential no extra failed login). Any refusal here is left
 * for the retried push to report. */
static void ensure_project(job_t *j, const char *drepo)
{
    char body[400];
    json_t *o = json_pack("{s:s%}", "project_name", drepo, berth_ref_project_len(drepo, strlen(drepo)));
    char *s = json_dumps(o, JSON_COMPACT);
    snprintf(body, sizeof(body), "%s", s != NULL ? s : "{}");
    free(s);
    json_decref(o);
    berth_http_t r;
    if (berth_client_do(j->dst, "POST", "/api/v2.0/projects", (const char *const[]){"Content-Type: application/json", NULL}, body,
                        strlen(body), &r) == 0 &&
        r.status != 201 && r.status != 409)
        logf_(j, "creating project for %s: HTTP %ld", drepo, r.status);
    berth_http_dispose(&r);
}

/* ---- one task ----------------------------------------------------------------------------------------------- */

int berth_repl_transfer_run(const berth_repl_task_t *task, berth_repl_transfer_result_t *res)
{
    memset(res, 0, sizeof(*res));
    job_t j = {.task = task, .res = res};
    j.src = client_for(task->src_registry, 0);
    j.dst = client_for(task->dest_registry, task->speed_kib);
    j.zstd = task->dest_registry == NULL || strcmp(task->dest_registry->type, "berth") == 0;
    const char *dst_base = task->dest_registry != NULL ? task->dest_registry->url : self_url;
    char srepo[300], sref[200], drepo[300], dref[200];
    berth_repl_ref_split(task->src, srepo, sizeof(srepo), sref, sizeof(sref));
    berth_repl_ref_split(task->dst, drepo, sizeof(drepo), dref, sizeof(dref));
    int rc = task->operation == BERTH_REPL_OP_DELETION ? delete_remote(&j, srepo, drepo, dref)
                                                       : copy_manifest(&j, dst_base, srepo, sref, drepo, dref, 0);
    if (rc != 0 && j.name_unknown && j.zstd && !res->stopped) {
        res->log[0] = '\0'; /* the second pass reports (and counts the bytes) afresh */
        res->total = 0;
        ensure_project(&j, drepo);
        rc = copy_manifest(&j, dst_base, srepo, sref, drepo, dref, 0);
    }
    berth_client_free(j.src);
    berth_client_free(j.dst);
    return rc;
}

/* ---- the source's artifacts ---------------------------------------------------------------------------------- */

int berth_repl_transfer_enumerate(const berth_repl_policy_t *pol, long long exec, berth_err_t *err)
{
    berth_client_t *c = client_for(pol->src_registry, 0);
    berth_http_t r;
    int n = 0;
    /* the whole catalog, page by page (Distribution caps n at 1000) */
    json_t *cat = json_array(), *repo;
    char next[1024] = "/v2/_catalog?n=1000";
    while (next[0] != '\0') {
        if (berth_client_do(c, "GET", next, (const char *const[]){"Accept: application/json", NULL}, NULL, 0, &r) != 0 ||
            r.status != 200) {
            int rc = berth_err_set(err, BERTH_OCI_UNAVAILABLE, "source catalog unavailable (HTTP %ld)", r.status);
            berth_http_dispose(&r);
            berth_client_free(c);
            json_decref(cat);
            return rc;
        }
        json_t *page = json_loads(r.body, 0, NULL);
        size_t before = json_array_size(cat);
        json_array_extend(cat, json_object_get(page, "repositories"));
        const char *last = json_string_value(json_array_get(cat, json_array_size(cat) - 1));
        next[0] = '\0';
        if (json_array_size(cat) - before == 1000 && last != NULL)
            snprintf(next, sizeof(next), "/v2/_catalog?n=1000&last=%s", last);
        json_decref(page);
        berth_http_dispose(&r);
    }
    size_t i;
    json_array_foreach(cat, i, repo)
    {
        const char *name = json_string_value(repo);
        char path[600];
        snprintf(path, sizeof(path), "/v2/%s/tags/list", name != NULL ? name : "");
        if (name == NULL || berth_client_do(c, "GET", path, NULL, NULL, 0, &r) != 0 || r.status != 200) {
            berth_http_dispose(&r);
            continue;
        }
        json_t *tags = json_loads(r.body, 0, NULL), *t;
        berth_http_dispose(&r);
        size_t k;
        json_array_foreach(json_object_get(tags, "tags"), k, t)
        {
            const char *tag = json_string_value(t);
            if (tag != NULL && berth_repl_filters_pass(&pol->filters, name, tag) &&
                berth_repl_queue_task_add(exec, pol, name, tag, BERTH_REPL_OP_COPY) == 0)
                n++;
        }
        json_decref(tags);
    }
    json_decref(cat);
    berth_client_free(c);
    return n;
}
