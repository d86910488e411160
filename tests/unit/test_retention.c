/*
 * Retention's decision without a database (registry/service/retention_plan.c): each template, the union of the
 * rules, repository scope, tag selectors over an artifact's tags, untagged artifacts, and the rules a policy
 * may not hold.
 */
#include <jansson.h>
#include <string.h>

#include "core/err.h"
#include "registry/service/retention_plan.h"
#include "tests/unit/tap.h"

#define DAY 86400.0
#define NOW (1000.0 * DAY)

static int parse(berth_ret_policy_t *p, const char *json)
{
    json_t *rules = json_loads(json, 0, NULL);
    char why[256];
    int rc = berth_ret_policy_parse(p, rules, why, sizeof(why));
    json_decref(rules);
    return rc;
}

#define RULE(tmpl, params, repo, tagdec, tag)                                                                                      \
    "{\"template\":\"" tmpl "\",\"params\":" params ",\"scope_selectors\":{\"repository\":[{\"kind\":\"doublestar\","              \
    "\"decoration\":\"repoMatches\",\"pattern\":\"" repo                                                                           \
    "\"}]},\"tag_selectors\":[{\"kind\":\"doublestar\",\"decoration\":\"" tagdec "\",\"pattern\":\"" tag "\"}]}"

static const char *t_v1[] = {"v1"}, *t_v2[] = {"v2"}, *t_dev[] = {"dev"}, *t_rel[] = {"dev", "release-1"};

/* four artifacts, newest push first: v1 (1 day, pulled 5 days ago), v2 (2 days, never pulled), dev (3 days,
 * pulled 1 day ago), dev+release-1 (10 days, pulled 20 days ago) */
static void artifacts(berth_ret_artifact_t a[5])
{
    a[0] = (berth_ret_artifact_t){"d1", NOW - 1 * DAY, NOW - 5 * DAY, t_v1, 1, 0};
    a[1] = (berth_ret_artifact_t){"d2", NOW - 2 * DAY, -1, t_v2, 1, 0};
    a[2] = (berth_ret_artifact_t){"d3", NOW - 3 * DAY, NOW - 1 * DAY, t_dev, 1, 0};
    a[3] = (berth_ret_artifact_t){"d4", NOW - 10 * DAY, NOW - 20 * DAY, t_rel, 2, 0};
    a[4] = (berth_ret_artifact_t){"d5", NOW - 30 * DAY, -1, NULL, 0, 0}; /* untagged */
}

/* "1101…": which of the five are retained */
static const char *kept(const char *json, const char *repo)
{
    static char out[6];
    berth_ret_policy_t p;
    berth_ret_artifact_t a[5];
    artifacts(a);
    if (parse(&p, json) != 0)
        return "parse";
    berth_ret_plan(&p, repo, a, 5, NOW);
    for (int i = 0; i < 5; i++)
        out[i] = a[i].retained_by >= 0 ? '1' : '0';
    out[5] = '\0';
    berth_ret_policy_dispose(&p);
    return out;
}

int main(void)
{
    ok(strcmp(kept("[" RULE("latestPushedK", "{\"latestPushedK\":2}", "**", "matches", "**") "]", "app"), "11000") == 0,
       "latestPushedK 2: the two newest pushes");
    ok(strcmp(kept("[" RULE("latestPulledN", "{\"latestPulledN\":2}", "**", "matches", "**") "]", "app"), "10100") == 0,
       "latestPulledN 2: the two latest pulls, never-pulled last");
    ok(strcmp(kept("[" RULE("nDaysSinceLastPush", "{\"nDaysSinceLastPush\":3}", "**", "matches", "**") "]", "app"), "11100") == 0,
       "nDaysSinceLastPush 3");
    ok(strcmp(kept("[" RULE("nDaysSinceLastPull", "{\"nDaysSinceLastPull\":7}", "**", "matches", "**") "]", "app"), "10100") == 0,
       "nDaysSinceLastPull 7: never pulled is not retained");
    ok(strcmp(kept("[" RULE("always", "{}", "**", "matches", "release-*") "]", "app"), "00011") == 0,
       "always with a tag pattern: any of the artifact's tags may match; matches takes untagged ones by default (Harbor)");
    ok(strcmp(kept("[" RULE("always", "{}", "**", "excludes", "dev") "]", "app"), "11011") == 0,
       "excludes: taken when some tag does not match (and untagged ones, unless extras.untagged says so: Harbor)");
    ok(strcmp(kept("[" RULE("always", "{}", "other", "matches", "**") "]", "app"), "00000") == 0 &&
           strcmp(kept("[" RULE("always", "{}", "a{pp,x}", "matches", "**") "]", "app"), "11111") == 0,
       "repository scope");
    ok(strcmp(kept("[" RULE("latestPushedK", "{\"latestPushedK\":1}", "**", "matches",
                            "dev") "," RULE("nDaysSinceLastPull", "{\"nDaysSinceLastPull\":7}", "**", "matches", "v*") "]",
                   "app"),
              "10100") == 0,
       "the union of the rules");
    berth_ret_policy_t p;
    ok(parse(&p, "[" RULE("always", "{}", "**", "matches", "**") "]") == 0 && berth_ret_repo_in_scope(&p, "x") &&
           !berth_ret_repo_in_scope(&(berth_ret_policy_t){0}, "x"),
       "scope: a repository some rule takes");
    berth_ret_policy_dispose(&p);
    const char *bad[] = {"{}",
                         "[" RULE("latestPushedK", "{}", "**", "matches", "**") "]",
                         "[" RULE("latestPushedK", "{\"latestPushedK\":-1}", "**", "matches", "**") "]",
                         "[" RULE("latestPushedK", "{\"latestPushedK\":\"3\"}", "**", "matches", "**") "]",
                         "[" RULE("keep", "{}", "**", "matches", "**") "]",
                         "[" RULE("always", "{}", "**", "matches", "[") "]",
                         "[" RULE("always", "{}", "**", "repoMatches", "**") "]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ok(parse(&p, bad[i]) == BERTH_EINVAL, "refused: %.60s", bad[i]);
        berth_ret_policy_dispose(&p);
    }
    char many[8192];
    size_t off = (size_t)snprintf(many, sizeof(many), "[");
    for (int i = 0; i < 16; i++)
        off += (size_t)snprintf(many + off, sizeof(many) - off, "%s" RULE("always", "{}", "**", "matches", "**"), i ? "," : "");
    snprintf(many + off, sizeof(many) - off, "]");
    ok(parse(&p, many) == BERTH_EINVAL, "at most 15 rules");
    berth_ret_policy_dispose(&p);
    return tap_done();
}
