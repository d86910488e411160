/*
 * Replication's policy rules without a network or a database (replication/policy.c): Harbor's
 * name/tag filters, the destination name with dest_namespace and its replace count, cron expressions for scheduled
 * policies, which runs wait for an active one, what an attempt's result makes of a task, and the typed rows the
 * queue hands out (parsed from the shapes sql/api.c answers with).
 */
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "replication/policy.h"
#include "replication/task.h"
#include "tests/unit/tap.h"

/* the filters of a policy as the API stores them */
static int pass(const char *filters_json, const char *repo, const char *tag)
{
    json_t *a = json_loads(filters_json, 0, NULL);
    berth_repl_filters_t f;
    berth_repl_filters_init(&f, a);
    int r = berth_repl_filters_pass(&f, repo, tag);
    berth_repl_filters_dispose(&f);
    json_decref(a);
    return r;
}

static void filters(void)
{
    ok(pass("[]", "any/thing", "v1") && pass("null", "any/thing", "v1"), "no filters: everything passes");
    ok(pass("[{\"type\":\"name\",\"value\":\"team/**\"}]", "team/a/b", "v1") &&
           !pass("[{\"type\":\"name\",\"value\":\"team/**\"}]", "ops/a", "v1"),
       "a name filter matches by default (no decoration)");
    ok(pass("[{\"type\":\"name\",\"value\":\"team/*\",\"decoration\":\"matches\"}]", "team/app", "x") &&
           !pass("[{\"type\":\"name\",\"value\":\"team/*\",\"decoration\":\"matches\"}]", "team/a/b", "x"),
       "decoration matches: a single * does not cross into deeper repositories");
    const char *ex = "[{\"type\":\"tag\",\"value\":\"*-rc*\",\"decoration\":\"excludes\"}]";
    ok(pass(ex, "team/app", "1.0") && !pass(ex, "team/app", "1.0-rc1"), "decoration excludes leaves matching tags out");
    const char *both = "[{\"type\":\"name\",\"value\":\"team/**\"},{\"type\":\"tag\",\"value\":\"v*\"}]";
    ok(pass(both, "team/app", "v2") && !pass(both, "team/app", "latest") && !pass(both, "ops/app", "v2"), "every filter must pass");
    const char *ign =
        "[{\"type\":\"label\",\"value\":\"prod\"},{\"type\":\"resource\",\"value\":\"image\"},{\"type\":\"name\",\"value\":\"\"},"
        "{\"value\":\"x\"},{\"type\":\"tag\"}]";
    ok(pass(ign, "any", "v1"), "label, resource, empty and incomplete filters match everything");
    ok(pass("[{\"type\":\"tag\",\"value\":\"{v1,v2}\"}]", "r", "v2") &&
           !pass("[{\"type\":\"tag\",\"value\":\"{v1,v2}\"}]", "r", "v3"),
       "tag alternatives");
}

static int dest_is(const char *ns, int count, const char *repo, const char *want)
{
    char out[300];
    berth_repl_dest_name(ns, count, repo, out, sizeof(out));
    if (strcmp(out, want) != 0)
        printf("# dest_name(%s, %d, %s) = %s, want %s\n", ns ? ns : "NULL", count, repo, out, want);
    return strcmp(out, want) == 0;
}

static void names(void)
{
    ok(dest_is(NULL, 1, "lib/app", "lib/app") && dest_is("", -1, "a/b/c", "a/b/c"), "no namespace: the name is kept");
    ok(dest_is("mirror", 1, "lib/app", "mirror/app") && dest_is("mirror", 1, "lib/team/app", "mirror/team/app"),
       "replace count 1 (Harbor's default) replaces the project");
    ok(dest_is("mirror", -1, "lib/team/app", "mirror/app") && dest_is("mirror", -1, "app", "mirror/app"),
       "-1 keeps only the last component");
    ok(dest_is("mirror", 0, "lib/app", "mirror/lib/app"), "0 puts the whole name under the namespace");
    ok(dest_is("mirror", 2, "a/b/c", "mirror/c") && dest_is("mirror", 5, "a/b/c", "mirror/c"),
       "a count past the name keeps the last component");
    ok(dest_is("mirror/sub", 1, "lib/app", "mirror/sub/app"), "a namespace with components");
    char p[256];
    berth_repl_dest_project("mirror/sub", "lib", p);
    ok(strcmp(p, "mirror") == 0, "the destination project is the namespace's first component");
    berth_repl_dest_project("", "lib", p);
    ok(strcmp(p, "lib") == 0, "without a namespace, the project scope");
    berth_repl_dest_project(NULL, NULL, p);
    ok(strcmp(p, "") == 0, "neither: empty");
}

static void cron(void)
{
    struct tm tm = {.tm_min = 30, .tm_hour = 2, .tm_mday = 15, .tm_mon = 5, .tm_wday = 3}; /* Wed 15 June, 02:30 */
    ok(berth_repl_cron_matches("30 2 * * *", &tm) && berth_repl_cron_matches("0 30 2 * * *", &tm), "five and six fields");
    ok(!berth_repl_cron_matches("31 2 * * *", &tm) && !berth_repl_cron_matches("0 31 2 * * *", &tm),
       "another minute does not fire");
    ok(berth_repl_cron_matches("* 30 2 * * *", &tm) && berth_repl_cron_matches("59 30 2 * * *", &tm),
       "Harbor's seconds field is dropped (the check runs once a minute)");
    ok(berth_repl_cron_matches("*/15 * * * *", &tm) && !berth_repl_cron_matches("*/20 * * * *", &tm), "steps");
    ok(berth_repl_cron_matches("10-40/10 * * * *", &tm) && !berth_repl_cron_matches("10-40/7 * * * *", &tm),
       "steps over a range start at its low end");
    ok(berth_repl_cron_matches("0-45 1-3 * 6 3", &tm) && !berth_repl_cron_matches("0-45 1-3 * 7 3", &tm), "ranges and months");
    ok(berth_repl_cron_matches("30 2 15 6 *", &tm) && !berth_repl_cron_matches("30 2 16 6 *", &tm), "day of month");
    ok(berth_repl_cron_matches("30 2 * * 1-5", &tm) && !berth_repl_cron_matches("30 2 * * 0,6", &tm), "day of week (0 is Sunday)");
    ok(berth_repl_cron_matches("29,30 * * * *", &tm) && !berth_repl_cron_matches("28,29 * * * *", &tm), "lists");
    ok(berth_repl_cron_matches("? ? ? ? ?", &tm), "? matches any value");
    ok(!berth_repl_cron_matches("bogus", &tm) && !berth_repl_cron_matches("", &tm) && !berth_repl_cron_matches("* * * *", &tm),
       "too few fields never fire");
    ok(!berth_repl_cron_matches("*/0 * * * *", &tm), "a zero step never fires");
    /* invalid expressions never fire, not even at the minute a lax parser would read into them (atoi("x") is 0) */
    struct tm zero = {.tm_min = 0, .tm_hour = 0, .tm_mday = 1, .tm_mon = 0, .tm_wday = 0};
    static const char *const junk[] = {"x * * * *",  "0 0 1 1 MON",   "0-x * * * *", "5- * * * *", "*/x * * * *",
                                       "*/ * * * *", "1-2-3 * * * *", "60 * * * *",  "0 24 * * *", "0 0 0 * *",
                                       "0 0 * 13 *", "0 0 * * 7",     "0 0 * 0 *",   ",0 * * * *", "0,,1 * * * *",
                                       "-1 * * * *", "0 0 0 0 1 1 0", "60 0 0 1 1 0"};
    int none = 1;
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        if (berth_repl_cron_matches(junk[i], &zero) || berth_repl_cron_matches(junk[i], &tm)) {
            printf("# \"%s\" fired\n", junk[i]);
            none = 0;
        }
    ok(none, "invalid fields, out-of-range values and more than six fields never fire");
    ok(berth_repl_cron_valid("0 * * * * *") && berth_repl_cron_valid("*/5 1-3,7 ? * 1-5") && !berth_repl_cron_valid("x * * * *") &&
           !berth_repl_cron_valid("* * * *"),
       "berth_repl_cron_valid tells the two apart");
    struct tm midnight = {.tm_min = 0, .tm_hour = 0, .tm_mday = 1, .tm_mon = 0, .tm_wday = 0};
    ok(berth_repl_cron_matches("0 0 1 1 0", &midnight) && berth_repl_cron_matches("0 0 0 1 1 0", &midnight), "lower bounds");
}

static void runs(void)
{
    ok(berth_repl_skips_while_active("manual") && berth_repl_skips_while_active("scheduled"),
       "manual and scheduled runs wait for an active one");
    ok(!berth_repl_skips_while_active("event_based"), "each event gets its own run");
    json_t *a = json_loads("[{\"type\":\"name\",\"value\":\"team/**\"}]", 0, NULL);
    berth_repl_filters_t f;
    berth_repl_filters_init(&f, a);
    ok(berth_repl_event_applies(&f, 0, "push", "team/app", "v1") && !berth_repl_event_applies(&f, 0, "push", "ops/app", "v1"),
       "a push applies when the filters pass");
    ok(!berth_repl_event_applies(&f, 0, "delete", "team/app", "v1") &&
           berth_repl_event_applies(&f, 1, "delete", "team/app", "v1") &&
           !berth_repl_event_applies(&f, 1, "delete", "ops/app", "v1"),
       "a delete applies only with replicate_deletion, and only through the filters");
    berth_repl_filters_dispose(&f);
    json_decref(a);
}

static void outcomes(void)
{
    int d;
    ok(strcmp(berth_repl_task_outcome(0, 0, 1, &d), "Succeed") == 0 && d == 0, "done: Succeed");
    ok(strcmp(berth_repl_task_outcome(0, 1, 1, &d), "Succeed") == 0, "done before a stop landed: still Succeed");
    int delays[9], pending = 1;
    for (int a = 1; a <= 8; a++) {
        const char *st = berth_repl_task_outcome(BERTH_ERETRY, 0, a, &delays[a]);
        if (strcmp(st, a < BERTH_REPL_MAX_ATTEMPTS ? "Pending" : "Failed") != 0)
            pending = 0;
    }
    ok(pending, "a transient failure is retried until the eighth attempt, which fails for good");
    ok(delays[1] == 2 && delays[2] == 4 && delays[3] == 8 && delays[4] == 16 && delays[5] == 30 && delays[7] == 30,
       "retries wait 2, 4, 8, 16, then 30 s");
    ok(strcmp(berth_repl_task_outcome(BERTH_ERROR, 0, 1, &d), "Failed") == 0 && d == 0, "a refusal is not retried");
    ok(strcmp(berth_repl_task_outcome(BERTH_ECONFLICT, 1, 1, &d), "Stopped") == 0 &&
           strcmp(berth_repl_task_outcome(BERTH_ERETRY, 1, 1, &d), "Stopped") == 0,
       "a stopped execution's task is Stopped, not retried");
    ok(strcmp(berth_repl_task_outcome(BERTH_ENOTFOUND, 0, 1, &d), "Failed") == 0, "any other code fails");
}

/* the shape of BERTH_Q_TASK_CLAIM's answer */
static void tasks(void)
{
    berth_repl_task_t t;
    const char *claim =
        "{\"id\": 41, \"execution_id\": 7, \"src\": \"team/app:v1\", \"dst\": \"mirror/app:v1\", \"operation\": \"copy\", "
        "\"attempts\": 3, \"override\": false, \"speed\": 512, \"src_registry\": null, \"dest_registry\": {\"id\": 2, "
        "\"type\": \"harbor\", \"url\": \"https://h.example\", \"insecure\": true, \"ca_file\": \"\", "
        "\"access_key\": \"robot$x\", \"secret\": \"00ff\"}}";
    ok(berth_repl_task_parse(&t, claim) == 0, "a claimed task parses");
    ok(t.id == 41 && t.execution_id == 7 && strcmp(t.src, "team/app:v1") == 0 && strcmp(t.dst, "mirror/app:v1") == 0 &&
           t.operation == BERTH_REPL_OP_COPY && t.attempts == 3 && !t.override && t.speed_kib == 512,
       "its fields");
    ok(t.src_registry == NULL && t.dest_registry != NULL && t.dest_registry->id == 2 &&
           strcmp(t.dest_registry->type, "harbor") == 0 && strcmp(t.dest_registry->url, "https://h.example") == 0 &&
           t.dest_registry->insecure && strcmp(t.dest_registry->access_key, "robot$x") == 0 &&
           strcmp(t.dest_registry->secret, "00ff") == 0,
       "a null registry is this Berth; the other endpoint with its sealed secret");
    berth_repl_task_dispose(&t);
    ok(berth_repl_task_parse(
           &t, "{\"id\": 1, \"operation\": \"deletion\", \"override\": true, \"dest_registry\": {\"url\": \"http://b\", "
               "\"secret\": null}}") == 0 &&
           t.operation == BERTH_REPL_OP_DELETION && t.override && strcmp(t.src, "") == 0 && t.dest_registry != NULL &&
           strcmp(t.dest_registry->secret, "") == 0 && strcmp(t.dest_registry->type, "") == 0,
       "a deletion; missing strings are empty, never NULL");
    berth_repl_task_dispose(&t);
    ok(berth_repl_task_parse(&t, "[1]") == BERTH_EINVAL && berth_repl_task_parse(&t, "nonsense") == BERTH_EINVAL &&
           berth_repl_task_parse(&t, NULL) == BERTH_EINVAL && t.src == NULL,
       "anything else is BERTH_EINVAL and leaves nothing to free");

    /* BERTH_Q_POL_GET's policy, and the short rows of the event and schedule queries */
    json_t *o =
        json_loads("{\"id\": 5, \"dest_namespace\": \"mirror\", \"dest_namespace_replace_count\": -1, \"creator\": \"ann\", "
                   "\"project_scope\": \"team\", \"replicate_deletion\": true, \"src_registry\": {\"id\": 9, \"name\": \"a\"}, "
                   "\"filters\": [{\"type\": \"tag\", \"value\": \"v*\"}], \"trigger\": {\"type\": \"scheduled\", "
                   "\"trigger_settings\": {\"cron\": \"0 0 * * * *\"}}}",
                   0, NULL);
    berth_repl_policy_t p;
    ok(berth_repl_policy_parse(&p, o) == 0 && p.id == 5 && strcmp(p.dest_namespace, "mirror") == 0 && p.replace_count == -1 &&
           strcmp(p.creator, "ann") == 0 && strcmp(p.project_scope, "team") == 0 && p.replicate_deletion &&
           p.src_registry_id == 9 && p.src_registry == NULL && strcmp(p.cron, "0 0 * * * *") == 0,
       "a policy parses, its cron taken from the trigger");
    ok(berth_repl_filters_pass(&p.filters, "x", "v2") && !berth_repl_filters_pass(&p.filters, "x", "latest"), "with its filters");
    berth_repl_policy_dispose(&p);
    json_decref(o);
    o = json_loads("{\"id\": 6, \"cron\": \"*/5 * * * *\"}", 0, NULL);
    ok(berth_repl_policy_parse(&p, o) == 0 && p.id == 6 && strcmp(p.cron, "*/5 * * * *") == 0 &&
           strcmp(p.dest_namespace, "") == 0 && p.src_registry_id == 0 && p.filters.n == 0,
       "a schedule row: id and cron, the rest empty");
    berth_repl_policy_dispose(&p);
    json_decref(o);
    ok(berth_repl_policy_parse(&p, NULL) == BERTH_EINVAL, "no object: BERTH_EINVAL");

    char repo[300], ref[200], joined[600];
    berth_repl_ref_split("team/app:v1", repo, sizeof(repo), ref, sizeof(ref));
    ok(strcmp(repo, "team/app") == 0 && strcmp(ref, "v1") == 0, "split repo:tag");
    berth_repl_ref_split("team/app@sha256:abc", repo, sizeof(repo), ref, sizeof(ref));
    ok(strcmp(repo, "team/app") == 0 && strcmp(ref, "sha256:abc") == 0, "split repo@digest (the digest's colon is not the tag's)");
    berth_repl_ref_split("team/app", repo, sizeof(repo), ref, sizeof(ref));
    ok(strcmp(repo, "team/app") == 0 && strcmp(ref, "latest") == 0, "no reference: latest");
    berth_repl_ref_join("team/app", "sha256:abc", joined, sizeof(joined));
    ok(strcmp(joined, "team/app@sha256:abc") == 0, "join a digest with @");
    berth_repl_ref_join("team/app", "v1", joined, sizeof(joined));
    ok(strcmp(joined, "team/app:v1") == 0, "join a tag with :");
}

int main(void)
{
    filters();
    names();
    cron();
    runs();
    outcomes();
    tasks();
    return tap_done();
}
