/*
 * Harbor's tag retention rules as a pure decision: which artifacts of a repository a policy retains. A repository
 * is processed only when some enabled rule's repository selector takes it; there, each rule retains a subset of
 * the artifacts its tag selector takes (its template: the N most recently pushed or pulled, those pushed or pulled
 * within N days, or all), the policy retains the union (Harbor's algorithm "or"), and everything else goes.
 * No database, no clock: tests/unit/test_retention.c.
 */
#ifndef BERTH_SERVICE_RETENTION_PLAN_H
#define BERTH_SERVICE_RETENTION_PLAN_H

#include <stddef.h>

#include <jansson.h>

#include "core/selector.h"

#define BERTH_RET_MAX_RULES 15

typedef enum {
    BERTH_RET_LATEST_PUSHED, /* latestPushedK */
    BERTH_RET_LATEST_PULLED, /* latestPulledN */
    BERTH_RET_DAYS_PUSH,     /* nDaysSinceLastPush */
    BERTH_RET_DAYS_PULL,     /* nDaysSinceLastPull */
    BERTH_RET_ALWAYS,        /* always */
} berth_ret_template_t;

typedef struct st_berth_ret_rule_t {
    int disabled;
    berth_ret_template_t tmpl;
    long long n; /* the template's parameter (count or days) */
    berth_rule_sel_t sel;
} berth_ret_rule_t;

typedef struct st_berth_ret_policy_t {
    size_t n;
    berth_ret_rule_t v[BERTH_RET_MAX_RULES];
} berth_ret_policy_t;

/**
 * Read and check Harbor's rules array (action retain, a known template with its integer parameter >= 0, the
 * selectors of core/selector.h, at most 15 rules). 0, or BERTH_EINVAL with why. Dispose also after a failure.
 */
int berth_ret_policy_parse(berth_ret_policy_t *out, const json_t *rules, char *why, size_t whysz);
void berth_ret_policy_dispose(berth_ret_policy_t *p);

/** The template names Harbor uses ("latestPushedK" …), for /retentions/metadatas and messages. */
const char *berth_ret_template_name(berth_ret_template_t t);

typedef struct st_berth_ret_artifact_t {
    const char *digest;
    double pushed, pulled; /* seconds since the epoch; pulled < 0: never pulled */
    const char *const *tags;
    size_t ntags;
    int retained_by; /* out: index of the first rule that retains it, -1 when none does */
} berth_ret_artifact_t;

/** 1 if some enabled rule takes repository `repo` (without its project). */
int berth_ret_repo_in_scope(const berth_ret_policy_t *p, const char *repo);
/**
 * Decide for the artifacts of repository `repo` (without its project), given in the order ties keep (newest push
 * first); sets each retained_by. `now` in seconds since the epoch. Returns how many are retained.
 */
size_t berth_ret_plan(const berth_ret_policy_t *p, const char *repo, berth_ret_artifact_t *a, size_t n, double now);

#endif
