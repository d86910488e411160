#include "registry/service/retention_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static const char *const template_names[] = {
    [BERTH_RET_LATEST_PUSHED] = "latestPushedK",
    [BERTH_RET_LATEST_PULLED] = "latestPulledN",
    [BERTH_RET_DAYS_PUSH] = "nDaysSinceLastPush",
    [BERTH_RET_DAYS_PULL] = "nDaysSinceLastPull",
    [BERTH_RET_ALWAYS] = "always",
};
#define NTEMPLATES (sizeof(template_names) / sizeof(template_names[0]))

const char *berth_ret_template_name(berth_ret_template_t t)
{
    return (unsigned)t < NTEMPLATES ? template_names[t] : "?";
}

static int rule_parse(berth_ret_rule_t *r, const json_t *o, size_t i, char *why, size_t whysz)
{
    char sel_why[200];
    if (!json_is_object(o))
        return snprintf(why, whysz, "rule %zu is not an object", i + 1), BERTH_EINVAL;
    const char *action = json_string_value(json_object_get(o, "action"));
    const char *tmpl = json_string_value(json_object_get(o, "template"));
    const json_t *dis = json_object_get(o, "disabled");
    if (action != NULL && strcmp(action, "retain") != 0)
        return snprintf(why, whysz, "rule %zu: action must be retain", i + 1), BERTH_EINVAL;
    if (dis != NULL && !json_is_null(dis) && !json_is_boolean(dis))
        return snprintf(why, whysz, "rule %zu: disabled must be true or false", i + 1), BERTH_EINVAL;
    r->disabled = json_is_true(dis);
    size_t t = 0;
    while (t < NTEMPLATES && (tmpl == NULL || strcmp(tmpl, template_names[t]) != 0))
        t++;
    if (t == NTEMPLATES)
        return snprintf(why, whysz,
                        "rule %zu: template must be latestPushedK, latestPulledN, nDaysSinceLastPush, "
                        "nDaysSinceLastPull or always",
                        i + 1),
               BERTH_EINVAL;
    r->tmpl = (berth_ret_template_t)t;
    if (r->tmpl != BERTH_RET_ALWAYS) {
        const json_t *n = json_object_get(json_object_get(o, "params"), template_names[t]);
        if (!json_is_integer(n) || json_integer_value(n) < 0 || json_integer_value(n) > 1000000)
            return snprintf(why, whysz, "rule %zu: params.%s must be an integer from 0 to 1000000", i + 1, template_names[t]),
                   BERTH_EINVAL;
        r->n = json_integer_value(n);
    }
    if (berth_rule_sel_parse(&r->sel, json_object_get(o, "scope_selectors"), json_object_get(o, "tag_selectors"), sel_why,
                             sizeof(sel_why)) != 0)
        return snprintf(why, whysz, "rule %zu: %s", i + 1, sel_why), BERTH_EINVAL;
    return 0;
}

int berth_ret_policy_parse(berth_ret_policy_t *out, const json_t *rules, char *why, size_t whysz)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_array(rules))
        return snprintf(why, whysz, "rules must be an array"), BERTH_EINVAL;
    if (json_array_size(rules) > BERTH_RET_MAX_RULES)
        return snprintf(why, whysz, "a policy has at most %d rules", BERTH_RET_MAX_RULES), BERTH_EINVAL;
    for (size_t i = 0; i < json_array_size(rules); i++) {
        int rc = rule_parse(&out->v[i], json_array_get(rules, i), i, why, whysz);
        out->n = i + 1; /* so dispose releases what this rule parsed */
        if (rc != 0)
            return rc;
    }
    return 0;
}

void berth_ret_policy_dispose(berth_ret_policy_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        berth_rule_sel_dispose(&p->v[i].sel);
    p->n = 0;
}

int berth_ret_repo_in_scope(const berth_ret_policy_t *p, const char *repo)
{
    for (size_t i = 0; i < p->n; i++)
        if (!p->v[i].disabled && berth_rule_sel_repo(&p->v[i].sel, repo))
            return 1;
    return 0;
}

/* Sort key of the "latest N" templates: a stable insertion sort keeps the caller's order among equals */
static void sort_desc(size_t *idx, size_t k, const berth_ret_artifact_t *a, int by_pull)
{
    for (size_t i = 1; i < k; i++) {
        size_t v = idx[i], j = i;
        double key = by_pull ? a[v].pulled : a[v].pushed;
        while (j > 0 && (by_pull ? a[idx[j - 1]].pulled : a[idx[j - 1]].pushed) < key) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

size_t berth_ret_plan(const berth_ret_policy_t *p, const char *repo, berth_ret_artifact_t *a, size_t n, double now)
{
    for (size_t i = 0; i < n; i++)
        a[i].retained_by = -1;
    size_t *idx = calloc(n + 1, sizeof(*idx));
    for (size_t r = 0; r < p->n; r++) {
        const berth_ret_rule_t *rule = &p->v[r];
        if (rule->disabled || !berth_rule_sel_repo(&rule->sel, repo))
            continue;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (berth_rule_sel_artifact(&rule->sel, a[i].tags, a[i].ntags))
                idx[k++] = i;
        double since = now - (double)rule->n * 86400.0;
        if (rule->tmpl == BERTH_RET_LATEST_PUSHED || rule->tmpl == BERTH_RET_LATEST_PULLED)
            sort_desc(idx, k, a, rule->tmpl == BERTH_RET_LATEST_PULLED);
        for (size_t j = 0; j < k; j++) {
            const berth_ret_artifact_t *x = &a[idx[j]];
            int keep =
                rule->tmpl == BERTH_RET_ALWAYS ||
                ((rule->tmpl == BERTH_RET_LATEST_PUSHED || rule->tmpl == BERTH_RET_LATEST_PULLED) && (long long)j < rule->n) ||
                (rule->tmpl == BERTH_RET_DAYS_PUSH && x->pushed >= since) ||
                (rule->tmpl == BERTH_RET_DAYS_PULL && x->pulled >= 0 && x->pulled >= since);
            if (keep && a[idx[j]].retained_by < 0)
                a[idx[j]].retained_by = (int)r;
        }
    }
    free(idx);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += a[i].retained_by >= 0;
    return kept;
}
