#include "replication/replication.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "auth/authz.h"
#include "core/digest.h"
#include "core/log.h"
#include "core/ref.h"
#include "replication/client.h"
#include "replication/policy.h"
#include "replication/seal.h"
#include "sql/api.h"

#define MAX_ATTEMPTS 8
#define MAX_WORKERS 8
#define ACCEPT_ALL                                                                                                                 \
    "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "                                \
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"

static berth_repl_conf_t conf;
static char self_url[512], self_user[128], self_password[128], instance[800];
static pthread_t workers[MAX_WORKERS], eventer;
static int nworkers, running, stopping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* ---- small helpers ------------------------------------------------------------------------------------------ */

/* Run a query of sql/api.c on a pooled connection; the JSON result (caller frees) or NULL */
static char *q(berth_q_t id, const char *const *p, long *affected)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_db_acquire(conf.db, &err);
    if (c == NULL)
        return NULL;
    berth_db_json_t r;
    int rc = berth_db_api(c, id, p, &r, &err);
    berth_db_release(conf.db, c);
    if (rc != 0) {
        berth_log_warn("replication: query %d failed: %s", (int)id, err.msg);
        return NULL;
    }
    if (affected != NULL)
        *affected = r.affected;
    return r.json;
}

static json_t *qj(berth_q_t id, const char *const *p)
{
    char *s = q(id, p, NULL);
    json_t *v = s != NULL ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
    free(s);
    return v;
}

static void wake(void)
{
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* ---- delegation --------------------------------------------------------------------------------------------- */

/*
 * A project admin's policy must not become a way to write where that admin cannot (another project, through
 * dest_namespace, with the endpoint's or the internal replication user's rights). Push and pull policies alike
 * are judged on this Berth's projects: for a push policy the names on the remote are this site's names.
 */
int berth_repl_delegation_check(berth_dbconn_t *c, const char *owner, const char *scope, const char *ns, char *why, size_t whysz)
{
    if (scope == NULL || scope[0] == '\0')
        return 0; /* a system admin's policy */
    char project[256];
    berth_repl_dest_project(ns, scope, project);
    berth_err_t err;
    int may = owner != NULL && owner[0] != '\0' ? berth_authz_account_may_push(c, owner, project, &err) : 0;
    if (may < 0)
        return may;
    if (may)
        return 0;
    snprintf(why, whysz, "the policy's owner %s may not push to project %s", owner != NULL && owner[0] ? owner : "(none)", project);
    return 1;
}

/* The same check at every run: 0 to go on, or the execution is marked Failed with the reason */
static int run_refused(json_t *pol, const char *exec)
{
    berth_err_t err;
    berth_dbconn_t *c = berth_db_acquire(conf.db, &err);
    char why[400] = "the database is unavailable";
    int rc = c != NULL ? berth_repl_delegation_check(c, json_string_value(json_object_get(pol, "creator")),
                                                     json_string_value(json_object_get(pol, "project_scope")),
                                                     json_string_value(json_object_get(pol, "dest_namespace")), why, sizeof(why))
                       : -1;
    if (c != NULL)
        berth_db_release(conf.db, c);
    if (rc == 0)
        return 0;
    berth_log_warn("replication: execution %s refused: %s", exec, why);
    const char *p[] = {exec, why};
    free(q(BERTH_Q_EXEC_FAIL, p, NULL));
    return 1;
}

/* ---- endpoints ---------------------------------------------------------------------------------------------- */

/* A client for a registry row (NULL: this Berth, as the internal replication user) */
static berth_client_t *client_for(json_t *reg, long speed_kib)
{
    berth_client_conf_t cc = {.url = self_url,
                              .user = self_user,
                              .password = self_password,
                              .timeout_s = 60,
                              .max_send_bytes_per_s = speed_kib > 0 ? speed_kib * 1024 : 0};
    char *secret = NULL;
    if (json_is_object(reg)) {
        cc.url = json_string_value(json_object_get(reg, "url"));
        cc.user = json_string_value(json_object_get(reg, "access_key"));
        secret = berth_repl_open(json_string_value(json_object_get(reg, "secret")));
        cc.password = secret != NULL ? secret : "";
        cc.insecure = json_is_true(json_object_get(reg, "insecure"));
        cc.ca_file = json_string_value(json_object_get(reg, "ca_file"));
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

/* ---- triggering --------------------------------------------------------------------------------------------- */

static int add_task(const char *exec, json_t *pol, const char *repo, const char *ref, const char *op)
{
    char dst[512], src[512], drepo[300];
    berth_repl_dest_name(json_string_value(json_object_get(pol, "dest_namespace")),
                         (int)json_integer_value(json_object_get(pol, "dest_namespace_replace_count")), repo, drepo, sizeof(drepo));
    int digest = strchr(ref, ':') != NULL;
    snprintf(src, sizeof(src), "%s%s%s", repo, digest ? "@" : ":", ref);
    snprintf(dst, sizeof(dst), "%s%s%s", drepo, digest ? "@" : ":", ref);
    const char *p[] = {exec, src, dst, op};
    long n = 0;
    free(q(BERTH_Q_TASK_ADD, p, &n));
    return n == 1 ? 0 : -1;
}

static void finish_if_done(const char *exec, const char *text)
{
    const char *p[] = {exec, text};
    free(q(BERTH_Q_EXEC_FINISH, p, NULL));
}

/* Every artifact of the source that passes the filters becomes a task */
static int enumerate(json_t *pol, const char *exec, berth_err_t *err)
{
    berth_client_t *c = client_for(json_object_get(pol, "src_registry_engine"), 0);
    berth_http_t r;
    int n = 0;
    /* the whole catalog, page by page (Distribution caps n at 1000) */
    json_t *cat = json_array(), *repo;
    char next[1024] = "/v2/_catalog?n=1000";
    while (next[0] != '\0') {
        if (berth_client_do(c, "GET", next, (const char *const[]){"Accept: application/json", NULL}, NULL, 0, &r) != 0 ||
            r.status != 200) {
            berth_err_set(err, BERTH_OCI_UNAVAILABLE, "source catalog unavailable (HTTP %ld)", r.status);
            berth_http_dispose(&r);
            berth_client_free(c);
            json_decref(cat);
            return -1;
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
    berth_repl_filters_t filters;
    berth_repl_filters_init(&filters, json_object_get(pol, "filters"));
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
            if (tag != NULL && berth_repl_filters_pass(&filters, name, tag) && add_task(exec, pol, name, tag, "copy") == 0)
                n++;
        }
        json_decref(tags);
    }
    berth_repl_filters_dispose(&filters);
    json_decref(cat);
    berth_client_free(c);
    return n;
}

/* The policy with its endpoints as the engine needs them (secrets sealed) */
static json_t *load_policy(long long id)
{
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", id);
    const char *p[] = {ids};
    json_t *pol = qj(BERTH_Q_POL_GET, p);
    if (pol == NULL)
        return NULL;
    /* registry rows with sealed secrets (the API view hides them) */
    static const char *const sides[] = {"src_registry", "dest_registry"};
    for (int s = 0; s < 2; s++) {
        json_t *pub = json_object_get(pol, sides[s]);
        char rid[24], key_name[40];
        snprintf(key_name, sizeof(key_name), "%s_engine", sides[s]);
        if (!json_is_object(pub)) {
            json_object_set_new(pol, key_name, json_null());
            continue;
        }
        snprintf(rid, sizeof(rid), "%lld", (long long)json_integer_value(json_object_get(pub, "id")));
        const char *rp[] = {rid};
        json_t *full = qj(BERTH_Q_REG_ENGINE, rp);
        json_object_set_new(pol, key_name, full != NULL ? full : json_null());
    }
    return pol;
}

int berth_repl_trigger(long long policy_id, const char *trigger, long long *execution_id, berth_err_t *err)
{
    *execution_id = 0;
    json_t *pol = load_policy(policy_id);
    if (pol == NULL)
        return berth_err_set(err, BERTH_OCI_NOT_FOUND, "policy %lld not found", policy_id);
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", policy_id);
    const char *p[] = {ids, trigger, berth_repl_skips_while_active(trigger) ? "false" : "true"};
    json_t *made = qj(BERTH_Q_EXEC_CREATE, p);
    if (made == NULL) { /* the previous run is still active: skipped, as Harbor does */
        json_decref(pol);
        return 0;
    }
    long long eid = (long long)json_integer_value(json_object_get(made, "id"));
    json_decref(made);
    char es[24];
    snprintf(es, sizeof(es), "%lld", eid);
    *execution_id = eid;
    if (run_refused(pol, es)) {
        json_decref(pol);
        return 0;
    }
    berth_err_t e2;
    int n = enumerate(pol, es, &e2);
    json_decref(pol);
    if (n < 0) {
        const char *fp[] = {es};
        free(q(BERTH_Q_EXEC_STOP, fp, NULL));
        return berth_err_set(err, e2.oci, "%s", e2.msg);
    }
    if (n == 0)
        finish_if_done(es, "nothing to replicate");
    wake();
    return 0;
}

/* ---- events ------------------------------------------------------------------------------------------------- */

typedef struct ev {
    struct ev *next;
    char op[16], repo[256], tag[160];
} ev_t;
static ev_t *ev_head, *ev_tail;

void berth_repl_event(const char *operation, const char *repo, const char *tag)
{
    if (!running || tag == NULL || strchr(tag, ':') != NULL)
        return; /* tags only: digests are not what event policies name */
    ev_t *e = calloc(1, sizeof(*e));
    snprintf(e->op, sizeof(e->op), "%s", operation);
    snprintf(e->repo, sizeof(e->repo), "%s", repo);
    snprintf(e->tag, sizeof(e->tag), "%s", tag);
    pthread_mutex_lock(&mu);
    if (ev_tail != NULL)
        ev_tail->next = e;
    else
        ev_head = e;
    ev_tail = e;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void handle_event(ev_t *e)
{
    json_t *pols = qj(BERTH_Q_POL_EVENT, NULL), *p;
    size_t i;
    json_array_foreach(pols, i, p)
    {
        int deletion = strcmp(e->op, "delete") == 0;
        berth_repl_filters_t filters;
        berth_repl_filters_init(&filters, json_object_get(p, "filters"));
        int applies =
            berth_repl_event_applies(&filters, json_is_true(json_object_get(p, "replicate_deletion")), e->op, e->repo, e->tag);
        berth_repl_filters_dispose(&filters);
        if (!applies)
            continue;
        long long pid = (long long)json_integer_value(json_object_get(p, "id"));
        json_t *pol = load_policy(pid);
        char ids[24];
        snprintf(ids, sizeof(ids), "%lld", pid);
        const char *cp[] = {ids, "event_based", berth_repl_skips_while_active("event_based") ? "false" : "true"};
        json_t *made = qj(BERTH_Q_EXEC_CREATE, cp);
        if (made != NULL && pol != NULL) {
            char es[24];
            snprintf(es, sizeof(es), "%lld", (long long)json_integer_value(json_object_get(made, "id")));
            if (!run_refused(pol, es))
                add_task(es, pol, e->repo, e->tag, deletion ? "deletion" : "copy");
        }
        json_decref(made);
        json_decref(pol);
    }
    json_decref(pols);
    wake();
}

static void *eventer_main(void *arg)
{
    time_t last_minute = 0;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (ev_head == NULL) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 5;
            pthread_cond_timedwait(&cv, &mu, &ts);
        }
        ev_t *e = ev_head;
        if (e != NULL) {
            ev_head = e->next;
            if (ev_head == NULL)
                ev_tail = NULL;
        }
        pthread_mutex_unlock(&mu);
        if (e != NULL) {
            handle_event(e);
            free(e);
        }
        time_t now = time(NULL), minute = now / 60;
        if (minute != last_minute) { /* scheduled policies, once per minute */
            last_minute = minute;
            struct tm tm;
            localtime_r(&now, &tm);
            json_t *pols = qj(BERTH_Q_POL_SCHEDULED, NULL), *p;
            size_t i;
            json_array_foreach(pols, i, p)
            {
                const char *cron = json_string_value(json_object_get(p, "cron"));
                long long eid;
                berth_err_t err;
                if (cron != NULL && berth_repl_cron_matches(cron, &tm))
                    berth_repl_trigger((long long)json_integer_value(json_object_get(p, "id")), "scheduled", &eid, &err);
            }
            json_decref(pols);
        }
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* ---- copying ------------------------------------------------------------------------------------------------ */

typedef struct {
    json_t *task;
    char id[24], exec[24];
    berth_client_t *src, *dst;
    int zstd; /* the destination is a Berth: chunks travel zstd-compressed when that is smaller */
    long long total;
    char log[2048];
    int stopped;
    int name_unknown; /* the destination refused a push for lack of its project (Berth, Harbor) */
} job_t;

static void logf_(job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(job_t *j, const char *fmt, ...)
{
    size_t n = strlen(j->log);
    if (n + 2 >= sizeof(j->log))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->log + n, sizeof(j->log) - n, fmt, ap);
    va_end(ap);
    n = strlen(j->log);
    if (n + 1 < sizeof(j->log)) {
        j->log[n] = ';';
        j->log[n + 1] = '\0';
    }
}

static void progress(job_t *j, long long sent)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", sent);
    const char *p[] = {j->id, s};
    free(q(BERTH_Q_TASK_PROGRESS, p, NULL));
}

static int still_running(job_t *j)
{
    const char *p[] = {j->exec};
    char *s = q(BERTH_Q_EXEC_RUNNING, p, NULL);
    int yes = s != NULL && strcmp(s, "true") == 0;
    free(s);
    if (!yes)
        j->stopped = 1;
    return yes;
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

/* Copy one blob, resuming a session this task left at the destination */
static int copy_blob(job_t *j, const char *dst_base, const char *srepo, const char *drepo, const char *digest, long long size)
{
    char path[1024], loc[2300] = "", hdr_range[96], hdr_crange[96];
    berth_http_t r;
    snprintf(path, sizeof(path), "/v2/%s/blobs/%s", drepo, digest);
    if (berth_client_do(j->dst, "HEAD", path, NULL, NULL, 0, &r) != 0)
        return -1;
    long have = r.status;
    berth_http_dispose(&r);
    j->total += size;
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
    const char *up[] = {j->id, digest};
    char *saved = q(BERTH_Q_UPLOAD_GET, up, NULL);
    json_t *sv = saved != NULL ? json_loads(saved, JSON_DECODE_ANY, NULL) : NULL;
    free(saved);
    if (json_is_string(sv)) {
        /* resume: the destination says how many bytes it holds */
        snprintf(loc, sizeof(loc), "%s", json_string_value(sv));
        if (berth_client_do(j->dst, "GET", loc, NULL, NULL, 0, &r) != 0) {
            json_decref(sv);
            return -1;
        }
        long long a, b;
        if ((r.status == 204 || r.status == 200) && sscanf(r.range, "%lld-%lld", &a, &b) == 2) {
            off = b + 1;
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
    json_decref(sv);
    if (loc[0] == '\0') {
        snprintf(path, sizeof(path), "/v2/%s/blobs/uploads/", drepo);
        if (berth_client_do(j->dst, "POST", path, NULL, NULL, 0, &r) != 0)
            return -1;
        if (r.status != 202) {
            j->name_unknown |= r.status == 404 && r.body != NULL && strstr(r.body, "NAME_UNKNOWN") != NULL;
            logf_(j, "upload start %s: HTTP %ld", drepo, r.status);
            berth_http_dispose(&r);
            return -2;
        }
        absolute(dst_base, r.location, loc, sizeof(loc));
        berth_http_dispose(&r);
    }
    const char *sp[] = {j->id, digest, loc};
    free(q(BERTH_Q_UPLOAD_PUT, sp, NULL));
    long chunk = conf.chunk_bytes > 0 ? conf.chunk_bytes : (8L << 20);
    while (off < size) {
        if (!still_running(j))
            return -3;
        long long n = size - off < chunk ? size - off : chunk;
        snprintf(hdr_range, sizeof(hdr_range), "Range: bytes=%lld-%lld", off, off + n - 1);
        snprintf(path, sizeof(path), "/v2/%s/blobs/%s", srepo, digest);
        berth_http_t g;
        if (berth_client_do(j->src, "GET", path, (const char *const[]){hdr_range, NULL}, NULL, 0, &g) != 0)
            return -1;
        const char *data = g.body;
        if (g.status == 200 && (long long)g.len == size) /* the source ignored Range */
            data = g.body + off;
        else if (g.status != 206 || (long long)g.len != n) {
            logf_(j, "source blob %s: HTTP %ld", digest, g.status);
            berth_http_dispose(&g);
            return g.status >= 500 ? -1 : -2;
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
        progress(j, r.sent);
        if (rc != 0)
            return -1;
        if (r.status != 202) {
            /* 416 (the session is still held by the request a cut link left behind, or the offset moved) and
             * 404 (the session expired) are settled by the retry, which asks the destination again */
            long st = r.status;
            logf_(j, "upload %s at %lld: HTTP %ld", digest, off, st);
            berth_http_dispose(&r);
            return st == 401 || st == 403 ? -2 : -1;
        }
        absolute(dst_base, r.location, loc, sizeof(loc));
        berth_http_dispose(&r);
        const char *lp[] = {j->id, digest, loc};
        free(q(BERTH_Q_UPLOAD_PUT, lp, NULL));
        off += n;
    }
    char fin[2500];
    snprintf(fin, sizeof(fin), "%s%cdigest=%s", loc, strchr(loc, '?') != NULL ? '&' : '?', digest);
    if (berth_client_do(j->dst, "PUT", fin, (const char *const[]){"Content-Type: application/octet-stream", NULL}, NULL, 0, &r) !=
        0)
        return -1;
    long st = r.status;
    berth_http_dispose(&r);
    free(q(BERTH_Q_UPLOAD_DEL, up, NULL));
    if (st != 201) {
        logf_(j, "upload finish %s: HTTP %ld", digest, st);
        return -2;
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
        return -2;
    if (depth == 0 && strchr(dref, ':') == NULL && !json_is_true(json_object_get(j->task, "override"))) {
        /* override off: a tag the destination already has stays as it is */
        snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, dref);
        if (berth_client_do(j->dst, "HEAD", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &m) != 0)
            return -1;
        long have = m.status;
        berth_http_dispose(&m);
        if (have == 200) {
            logf_(j, "%s:%s exists at the destination (override off): kept", drepo, dref);
            return 0;
        }
    }
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", srepo, ref);
    if (berth_client_do(j->src, "GET", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &m) != 0)
        return -1;
    if (m.status != 200) {
        logf_(j, "source manifest %s:%s: HTTP %ld", srepo, ref, m.status);
        long st = m.status;
        berth_http_dispose(&m);
        return st >= 500 ? -1 : -2;
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
            rc = -1;
        else if (p.status != 201) {
            j->name_unknown |= p.status == 404 && p.body != NULL && strstr(p.body, "NAME_UNKNOWN") != NULL;
            logf_(j, "manifest %s:%s: HTTP %ld %.120s", drepo, dref, p.status, p.body != NULL ? p.body : "");
            rc = p.status >= 500 ? -1 : -2;
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

static int delete_remote(job_t *j, const char *drepo, const char *dref)
{
    char path[1024];
    berth_http_t r;
    /* Distribution deletes by digest only: resolve the tag first */
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, dref);
    if (berth_client_do(j->dst, "HEAD", path, (const char *const[]){ACCEPT_ALL, NULL}, NULL, 0, &r) != 0)
        return -1;
    if (r.status == 404) {
        berth_http_dispose(&r);
        return 0; /* already gone */
    }
    char digest[160];
    snprintf(digest, sizeof(digest), "%s", r.digest);
    berth_http_dispose(&r);
    snprintf(path, sizeof(path), "/v2/%s/manifests/%s", drepo, digest[0] ? digest : dref);
    if (berth_client_do(j->dst, "DELETE", path, NULL, NULL, 0, &r) != 0)
        return -1;
    long st = r.status;
    berth_http_dispose(&r);
    return st == 202 || st == 200 || st == 404 ? 0 : -2;
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

/* "repo:tag" / "repo@digest" */
static void split_ref(const char *s, char *repo, size_t rsz, char *ref, size_t fsz)
{
    const char *at = strchr(s, '@'), *colon = strrchr(s, ':');
    const char *sep = at != NULL ? at : colon;
    snprintf(repo, rsz, "%.*s", sep != NULL ? (int)(sep - s) : (int)strlen(s), s);
    snprintf(ref, fsz, "%s", sep != NULL ? sep + 1 : "latest");
}

static void run_task(json_t *task)
{
    job_t j = {.task = task};
    snprintf(j.id, sizeof(j.id), "%lld", (long long)json_integer_value(json_object_get(task, "id")));
    snprintf(j.exec, sizeof(j.exec), "%lld", (long long)json_integer_value(json_object_get(task, "execution_id")));
    long speed = (long)json_integer_value(json_object_get(task, "speed"));
    json_t *sreg = json_object_get(task, "src_registry"), *dreg = json_object_get(task, "dest_registry");
    j.src = client_for(sreg, 0);
    j.dst = client_for(dreg, speed);
    j.zstd = !json_is_object(dreg) || strcmp(json_string_value(json_object_get(dreg, "type")) ?: "", "berth") == 0;
    const char *dst_base = json_is_object(dreg) ? json_string_value(json_object_get(dreg, "url")) : self_url;
    char srepo[300], sref[200], drepo[300], dref[200];
    split_ref(json_string_value(json_object_get(task, "src")) ?: "", srepo, sizeof(srepo), sref, sizeof(sref));
    split_ref(json_string_value(json_object_get(task, "dst")) ?: "", drepo, sizeof(drepo), dref, sizeof(dref));
    int deletion = strcmp(json_string_value(json_object_get(task, "operation")) ?: "", "deletion") == 0;
    int rc = deletion ? delete_remote(&j, drepo, dref) : copy_manifest(&j, dst_base, srepo, sref, drepo, dref, 0);
    if (rc != 0 && j.name_unknown && j.zstd && !j.stopped) {
        j.log[0] = '\0';
        ensure_project(&j, drepo);
        rc = copy_manifest(&j, dst_base, srepo, sref, drepo, dref, 0);
    }
    int attempts = (int)json_integer_value(json_object_get(task, "attempts"));
    const char *status = rc == 0 ? "Succeed" : j.stopped ? "Stopped" : (rc == -1 && attempts < MAX_ATTEMPTS) ? "Pending" : "Failed";
    char delay[16], total[24], line[2200];
    snprintf(delay, sizeof(delay), "%d", rc == -1 ? (attempts >= 5 ? 30 : 1 << attempts) : 0); /* 2, 4, 8, 16, 30 s */
    snprintf(total, sizeof(total), "%lld", rc == 0 ? j.total : 0LL);
    snprintf(line, sizeof(line), "attempt %d: %s%s%s", attempts,
             rc == 0    ? "done"
             : rc == -1 ? "transfer failed, will retry"
                        : "failed",
             j.log[0] ? " " : "", j.log);
    const char *p[] = {j.id, status, line, total, delay};
    free(q(BERTH_Q_TASK_DONE, p, NULL));
    berth_log_info("replication task %s (%s → %s): %s", j.id, json_string_value(json_object_get(task, "src")),
                   json_string_value(json_object_get(task, "dst")), status);
    if (strcmp(status, "Pending") != 0)
        finish_if_done(j.exec, NULL);
    berth_client_free(j.src);
    berth_client_free(j.dst);
}

static void *worker_main(void *arg)
{
    while (1) {
        pthread_mutex_lock(&mu);
        int stop = stopping;
        pthread_mutex_unlock(&mu);
        if (stop)
            break;
        const char *cp[] = {instance};
        char *t = q(BERTH_Q_TASK_CLAIM, cp, NULL);
        json_t *task = t != NULL ? json_loads(t, 0, NULL) : NULL;
        free(t);
        if (task != NULL) {
            run_task(task);
            json_decref(task);
            continue;
        }
        pthread_mutex_lock(&mu);
        if (!stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1; /* retries come due by time, not by signal */
            pthread_cond_timedwait(&cv, &mu, &ts);
        }
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int berth_repl_start(const berth_repl_conf_t *c, berth_err_t *err)
{
    conf = *c;
    snprintf(self_url, sizeof(self_url), "%s", c->self_url);
    snprintf(self_user, sizeof(self_user), "%s", c->self_user);
    snprintf(self_password, sizeof(self_password), "%s", c->self_password);
    if (berth_repl_seal_load_key(c->key_file) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot read or create the replication key %s", c->key_file);
    /* this instance is its host and edge address: a restart takes back its own tasks at once */
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(instance, sizeof(instance), "%s|%s", host, self_url);
    const char *rp[] = {instance};
    free(q(BERTH_Q_TASKS_RESET, rp, NULL)); /* tasks a stopped berthd was running start again */
    running = 1;
    nworkers = c->workers > 0 && c->workers <= MAX_WORKERS ? c->workers : 2;
    for (int i = 0; i < nworkers; i++)
        pthread_create(&workers[i], NULL, worker_main, NULL);
    pthread_create(&eventer, NULL, eventer_main, NULL);
    return 0;
}

void berth_repl_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i], NULL);
    pthread_join(eventer, NULL);
    running = 0;
}
