#include "registry/service/retention.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/audit.h"
#include "core/bgloop.h"
#include "core/log.h"
#include "core/ref.h"
#include "registry/service/events.h"
#include "registry/service/retention_plan.h"
#include "replication/policy.h"
#include "sql/immutable.h"
#include "sql/registry.h"
#include "sql/retention.h"

#define PRINCIPAL "berth-retention"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static berth_bgloop_t *loop;
static berth_registry_t *registry;
static char instance[300];
static long long last_minute;

/* A growing text: the task log */
typedef struct {
    char *s;
    size_t len, cap;
} text_t;

static void addf(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(text_t *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s != NULL ? t->s + t->len : NULL, t->s != NULL ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->s != NULL && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
    }
}

/* The runs of scheduled policies whose cron matches this minute, once per minute and berthd */
static void fire_schedules(berth_dbconn_t *c)
{
    time_t now = time(NULL);
    long long minute = (long long)(now - now % 60);
    if (minute == last_minute)
        return;
    last_minute = minute;
    struct tm tm;
    localtime_r(&now, &tm);
    long long *ids;
    char **crons;
    size_t n;
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_ret_scheduled(c, &ids, &crons, &n, &err) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (berth_repl_cron_matches(crons[i], &tm) && berth_db_ret_schedule_fire(c, ids[i], minute, &err) != 0)
            berth_log_warn("retention: policy %lld: the scheduled run cannot start: %s", ids[i], err.msg);
        free(crons[i]);
    }
    free(ids);
    free(crons);
}

typedef struct {
    berth_dbconn_t *c;
    const berth_db_ret_exec_t *e;
    const berth_ret_policy_t *policy;
    json_t *deleted_all; /* [{repository, digest, tags}] of the whole execution */
    int total, retained;
} run_t;

/* The tags of a candidate, split in place: a malloc'd array (every tag: the immutability check needs them all) */
static const char **split_tags(char *tags, size_t *n)
{
    size_t cap = 1;
    for (const char *p = tags; *p; p++)
        cap += *p == ' ';
    const char **out = calloc(cap + 1, sizeof(*out));
    *n = 0;
    for (char *save = NULL, *t = strtok_r(tags, " ", &save); t != NULL && *n < cap; t = strtok_r(NULL, " ", &save))
        out[(*n)++] = t;
    return out;
}

/* One repository: its n candidates. 0; BERTH_ERROR when a deletion failed for another reason than an immutable
 * tag (the task says which); 1 when a stop was asked for, 2 when the claim was lost, midway. */
static int run_repository(run_t *r, const char *repo, berth_db_ret_candidate_t *v, size_t n, double now)
{
    const char *short_name = repo + berth_ref_project_len(repo, strlen(repo));
    short_name += *short_name == '/';
    double start = (double)time(NULL);
    berth_ret_artifact_t *a = calloc(n + 1, sizeof(*a));
    const char ***tags = calloc(n + 1, sizeof(*tags));
    for (size_t i = 0; i < n; i++) {
        size_t nt;
        tags[i] = split_tags(v[i].tags, &nt);
        a[i] = (berth_ret_artifact_t){
            .digest = v[i].digest, .pushed = v[i].pushed, .pulled = v[i].pulled, .tags = tags[i], .ntags = nt};
    }
    berth_ret_plan(r->policy, short_name, a, n, now);
    text_t log = {0};
    json_t *deleted = json_array();
    int retained = 0, failures = 0, halted = 0;
    addf(&log, "%s: %zu artifact(s)%s\n", repo, n, r->e->dry_run ? " (dry run: nothing is deleted)" : "");
    for (size_t i = 0; i < n; i++) {
        /* a long repository keeps the lease alive; a lost claim or a stop ends this one here */
        int hb = i > 0 && i % 200 == 0 ? berth_db_ret_heartbeat(r->c, r->e->id, instance, NULL) : 0;
        if (hb != 0) {
            addf(&log, "%s after %zu artifact(s)\n", hb == 1 ? "stopped" : "claim lost", i);
            halted = hb == 1 ? 1 : 2;
            break;
        }
        char tagtext[1024] = "";
        for (size_t k = 0, off = 0; k < a[i].ntags && off < sizeof(tagtext); k++)
            off += (size_t)snprintf(tagtext + off, sizeof(tagtext) - off, "%s%s", k ? "," : "", a[i].tags[k]);
        if (a[i].retained_by >= 0) {
            const berth_ret_rule_t *rule = &r->policy->v[a[i].retained_by];
            addf(&log, "retain %s [%s]: rule %d (%s %lld)\n", a[i].digest, tagtext, a[i].retained_by + 1,
                 berth_ret_template_name(rule->tmpl), rule->n);
            retained++;
            continue;
        }
        berth_err_t err;
        berth_err_clear(&err);
        /* the same check the deletion repeats in its transaction: a dry run answers what a real run does */
        int rc = berth_db_immutable_check(r->c, repo, a[i].tags, a[i].ntags, &err);
        if (rc == 0 && !r->e->dry_run)
            rc = berth_db_manifest_delete(r->c, repo, a[i].digest, &err);
        if (rc != 0 && err.oci == BERTH_OCI_IMMUTABLE) {
            addf(&log, "retain %s [%s]: %s\n", a[i].digest, tagtext, err.msg);
            retained++;
            continue;
        }
        if (rc != 0 && rc != BERTH_ENOTFOUND) {
            addf(&log, "error %s [%s]: %s\n", a[i].digest, tagtext, err.msg);
            failures++;
            continue;
        }
        addf(&log, "%s %s [%s]\n", r->e->dry_run ? "would delete" : "delete", a[i].digest, tagtext);
        json_t *tl = json_array();
        for (size_t k = 0; k < a[i].ntags; k++)
            json_array_append_new(tl, json_string(a[i].tags[k]));
        json_t *d = json_pack("{s:s,s:s,s:o}", "repository", repo, "digest", a[i].digest, "tags", tl);
        json_array_append(deleted, d);
        json_array_append_new(r->deleted_all, d);
        if (!r->e->dry_run && rc == 0) {
            berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_MANIFEST_DELETE,
                                              .surface = BERTH_EVENT_INTERNAL,
                                              .repo = repo,
                                              .digest = a[i].digest,
                                              .size = -1,
                                              .principal = PRINCIPAL});
            char res[600];
            snprintf(res, sizeof(res), "%s@%s", repo, a[i].digest);
            berth_audit(PRINCIPAL, NULL, "delete", "artifact", res, r->e->project, 1, "retention");
        }
    }
    addf(&log, "%d retained, %zu %s\n", retained, json_array_size(deleted), r->e->dry_run ? "would be deleted" : "deleted");
    char *dj = json_dumps(deleted, JSON_COMPACT);
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_ret_task_add(r->c, r->e->id, repo, failures ? "Error" : "Success", (int)n, retained, dj, log.s, start, &err) != 0)
        berth_log_warn("retention: execution %lld: the task of %s cannot be recorded: %s", r->e->id, repo, err.msg);
    r->total += (int)n;
    r->retained += retained;
    free(dj);
    json_decref(deleted);
    free(log.s);
    for (size_t i = 0; i < n; i++)
        free(tags[i]);
    free(tags);
    free(a);
    return halted ? halted : failures ? BERTH_ERROR : 0;
}

static void run_execution(berth_dbconn_t *c, const berth_db_ret_exec_t *e)
{
    berth_ret_policy_t policy;
    char why[256] = "";
    json_t *doc = json_loads(e->policy, 0, NULL);
    int bad = berth_ret_policy_parse(&policy, json_object_get(doc, "rules"), why, sizeof(why)) != 0;
    json_decref(doc);
    berth_db_ret_candidates_t cands;
    berth_err_t err;
    berth_err_clear(&err);
    const char *status = "Success";
    run_t r = {.c = c, .e = e, .policy = &policy, .deleted_all = json_array()};
    if (bad || berth_db_ret_candidates(c, e->project, &cands, &err) != 0) {
        berth_log_warn("retention: execution %lld: %s", e->id, bad ? why : err.msg);
        status = "Error";
        memset(&cands, 0, sizeof(cands));
    }
    for (size_t i = 0; !bad && i < cands.n;) {
        size_t j = i;
        while (j < cands.n && strcmp(cands.v[j].repo, cands.v[i].repo) == 0)
            j++;
        const char *repo = cands.v[i].repo, *short_name = repo + berth_ref_project_len(repo, strlen(repo));
        short_name += *short_name == '/';
        if (berth_ret_repo_in_scope(&policy, short_name)) {
            int hb = berth_db_ret_heartbeat(c, e->id, instance, &err);
            if (hb != 0 || (loop != NULL && berth_bgloop_stopping(loop))) {
                status = hb == 1 ? "Stopped" : NULL; /* lost lease or shutting down: another round takes it up */
                break;
            }
            int rc = run_repository(&r, repo, cands.v + i, j - i, cands.now);
            if (rc == 1 || rc == 2) {
                status = rc == 1 ? "Stopped" : NULL;
                break;
            }
            if (rc != 0)
                status = "Error";
        }
        i = j;
    }
    berth_db_ret_candidates_dispose(&cands);
    berth_ret_policy_dispose(&policy);
    json_t *detail = status == NULL ? NULL
                                    : json_pack("{s:I,s:I,s:b,s:s,s:i,s:i,s:O}", "execution_id", (json_int_t)e->id, "policy_id",
                                                (json_int_t)e->policy_id, "dry_run", e->dry_run, "status", status, "total", r.total,
                                                "retained", r.retained, "deleted", r.deleted_all);
    char *dj = detail != NULL ? json_dumps(detail, JSON_COMPACT) : NULL;
    if (status != NULL && berth_db_ret_finish(c, e->id, instance, status, e->project, dj, &err) == 0) {
        berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_TAG_RETENTION,
                                          .surface = BERTH_EVENT_INTERNAL,
                                          .project = e->project,
                                          .size = -1,
                                          .principal = PRINCIPAL,
                                          .detail = dj});
        berth_log_info("retention: execution %lld of %s: %s, %d artifact(s), %d retained, %zu %s", e->id, e->project, status,
                       r.total, r.retained, json_array_size(r.deleted_all), e->dry_run ? "would go" : "deleted");
    }
    free(dj);
    json_decref(detail);
    json_decref(r.deleted_all);
}

static void tick(void *data, int stopping)
{
    (void)data;
    if (stopping)
        return;
    berth_err_t err;
    berth_err_clear(&err);
    berth_dbconn_t *c = berth_db_acquire(registry->db, &err);
    if (c == NULL)
        return;
    fire_schedules(c);
    for (int i = 0; i < 100 && !berth_bgloop_stopping(loop); i++) {
        berth_db_ret_exec_t e;
        if (berth_db_ret_claim(c, instance, &e, &err) != 0)
            break;
        run_execution(c, &e);
        berth_db_ret_exec_dispose(&e);
    }
    berth_db_release(registry->db, c);
}

int berth_retention_start(berth_registry_t *reg)
{
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(instance, sizeof(instance), "%s|%ld|%lx", host, (long)getpid(), (unsigned long)time(NULL));
    registry = reg;
    pthread_mutex_lock(&mu);
    int rc = berth_bgloop_start(&loop, "berth-retention", 5000, tick, NULL);
    pthread_mutex_unlock(&mu);
    return rc;
}

void berth_retention_stop(void)
{
    pthread_mutex_lock(&mu);
    berth_bgloop_t *l = loop;
    pthread_mutex_unlock(&mu);
    berth_bgloop_stop(l);
    pthread_mutex_lock(&mu);
    loop = NULL;
    pthread_mutex_unlock(&mu);
}

void berth_retention_wake(void)
{
    pthread_mutex_lock(&mu);
    if (loop != NULL)
        berth_bgloop_wake(loop);
    pthread_mutex_unlock(&mu);
}
