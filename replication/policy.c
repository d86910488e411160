#include "replication/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/err.h"
#include "core/glob.h"

/* ---- filters (doublestar patterns: core/glob.c)
 * -------------------------------------------------------------------------------------- */

void berth_repl_filters_init(berth_repl_filters_t *f, const json_t *array)
{
    f->n = 0;
    f->v = calloc(json_array_size(array) + 1, sizeof(*f->v));
    size_t i;
    const json_t *e;
    json_array_foreach(array, i, e)
    {
        const char *type = json_string_value(json_object_get(e, "type")), *v = json_string_value(json_object_get(e, "value"));
        const char *dec = json_string_value(json_object_get(e, "decoration"));
        if (type == NULL || v == NULL || v[0] == '\0')
            continue;
        if (strcmp(type, "name") != 0 && strcmp(type, "tag") != 0)
            continue; /* label and resource filters: everything here is an artifact without labels */
        f->v[f->n++] = (berth_repl_filter_t){.kind = strcmp(type, "name") == 0 ? BERTH_REPL_FILTER_NAME : BERTH_REPL_FILTER_TAG,
                                             .excludes = dec != NULL && strcmp(dec, "excludes") == 0,
                                             .pattern = strdup(v)};
    }
}

void berth_repl_filters_dispose(berth_repl_filters_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].pattern);
    free(f->v);
    f->v = NULL;
    f->n = 0;
}

int berth_repl_filters_pass(const berth_repl_filters_t *f, const char *repo, const char *tag)
{
    for (size_t i = 0; i < f->n; i++) {
        int m = berth_glob_match(f->v[i].pattern, f->v[i].kind == BERTH_REPL_FILTER_NAME ? repo : tag) == 1;
        if (f->v[i].excludes ? m : !m)
            return 0;
    }
    return 1;
}

/* ---- names -------------------------------------------------------------------------------------------------- */

void berth_repl_dest_name(const char *ns, int count, const char *repo, char *out, size_t outsz)
{
    if (ns == NULL || ns[0] == '\0') {
        snprintf(out, outsz, "%s", repo);
        return;
    }
    const char *rest = repo;
    if (count < 0) {
        const char *last = strrchr(repo, '/');
        rest = last != NULL ? last + 1 : repo;
    } else {
        for (int i = 0; i < count; i++) {
            const char *slash = strchr(rest, '/');
            if (slash == NULL)
                break;
            rest = slash + 1;
        }
    }
    snprintf(out, outsz, "%s/%s", ns, rest);
}

void berth_repl_dest_project(const char *ns, const char *scope, char out[256])
{
    const char *from = ns != NULL && ns[0] != '\0' ? ns : scope != NULL ? scope : "";
    snprintf(out, 256, "%.*s", (int)strcspn(from, "/"), from);
}

/* ---- cron --------------------------------------------------------------------------------------------------- */

/*
 * "m h dom mon dow", or Harbor's six fields with seconds first (dropped: the check runs once a minute). Each field
 * is a list of "*", "?", N or N-M, each with an optional "/step". Anything else makes the whole expression invalid,
 * and an invalid expression never fires: reading "MON" or "x" as 0 would run the policy at a time nobody asked for.
 */
static const struct {
    int lo, hi;
} cron_bounds[6] = {{0, 59}, {0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}; /* s m h dom mon dow */

/* a decimal number at *p, advancing past it; -1 when there is none */
static int cron_num(const char **p)
{
    int v = 0, digits = 0;
    for (; **p >= '0' && **p <= '9' && digits < 4; (*p)++, digits++)
        v = v * 10 + (**p - '0');
    return digits > 0 ? v : -1;
}

/* 1 if field `f` holds `v`, 0 if not, -1 if the field is invalid for bounds `b` (v < 0: only validate) */
static int cron_field(const char *f, int b, int v)
{
    int hit = 0;
    const char *p = f;
    do {
        int lo, hi, step = 1;
        if (*p == '*' || *p == '?') {
            /* a step on "*" counts from 0 in every field, as it always has here: every fifth day of the month
             * is 5, 10, ..., where Harbor's cron counts from 1 */
            lo = 0;
            hi = cron_bounds[b].hi;
            p++;
        } else {
            if ((lo = cron_num(&p)) < 0)
                return -1;
            hi = lo;
            if (*p == '-') {
                p++;
                if ((hi = cron_num(&p)) < 0)
                    return -1;
            }
            if (lo < cron_bounds[b].lo || hi > cron_bounds[b].hi || lo > hi)
                return -1;
        }
        if (*p == '/') {
            p++;
            if ((step = cron_num(&p)) <= 0)
                return -1;
        }
        if (*p != ',' && *p != '\0')
            return -1;
        hit |= v >= lo && v <= hi && (v - lo) % step == 0;
    } while (*p++ == ',');
    return hit;
}

/* the expression's five fields (minute first) into f; 0, or -1 when invalid */
static int cron_split(const char *expr, char f[6][64], int *first)
{
    char extra[2];
    int n = sscanf(expr, "%63s %63s %63s %63s %63s %63s %1s", f[0], f[1], f[2], f[3], f[4], f[5], extra);
    if (n != 5 && n != 6)
        return -1;
    *first = n == 6 ? 1 : 0;
    for (int i = 0; i < n; i++)
        if (strlen(f[i]) >= 63 || cron_field(f[i], i + (n == 6 ? 0 : 1), -1) < 0)
            return -1;
    return 0;
}

int berth_repl_http_url(const char *url)
{
    if (!((strncasecmp(url, "http://", 7) == 0 && url[7] != '\0') || (strncasecmp(url, "https://", 8) == 0 && url[8] != '\0')))
        return 0;
    for (const unsigned char *p = (const unsigned char *)url; *p != '\0'; p++)
        if (*p <= ' ' || *p == 0x7f) /* no spaces or control bytes: they would split a header or a request line */
            return 0;
    return 1;
}

int berth_repl_cron_valid(const char *expr)
{
    char f[6][64];
    int o;
    return cron_split(expr, f, &o) == 0;
}

int berth_repl_cron_matches(const char *expr, const struct tm *tm)
{
    char f[6][64];
    int o;
    if (cron_split(expr, f, &o) != 0)
        return 0;
    return cron_field(f[o], 1, tm->tm_min) == 1 && cron_field(f[o + 1], 2, tm->tm_hour) == 1 &&
           cron_field(f[o + 2], 3, tm->tm_mday) == 1 && cron_field(f[o + 3], 4, tm->tm_mon + 1) == 1 &&
           cron_field(f[o + 4], 5, tm->tm_wday) == 1;
}

/* ---- runs --------------------------------------------------------------------------------------------------- */

int berth_repl_skips_while_active(const char *trigger)
{
    return trigger == NULL || strcmp(trigger, "event_based") != 0;
}

int berth_repl_event_applies(const berth_repl_filters_t *f, int replicate_deletion, const char *operation, const char *repo,
                             const char *tag)
{
    if (strcmp(operation, "delete") == 0 && !replicate_deletion)
        return 0;
    return berth_repl_filters_pass(f, repo, tag);
}

const char *berth_repl_task_outcome(int rc, int stopped, int attempts, int *delay_s)
{
    *delay_s = rc == BERTH_ERETRY ? (attempts >= 5 ? 30 : attempts > 0 ? 1 << attempts : 1) : 0;
    if (rc == 0)
        return "Succeed";
    if (stopped)
        return "Stopped";
    return rc == BERTH_ERETRY && attempts < BERTH_REPL_MAX_ATTEMPTS ? "Pending" : "Failed";
}
