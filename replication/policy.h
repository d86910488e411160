/*
 * A replication policy's rules as pure functions: which artifacts its filters take, the name an artifact gets at
 * the destination, when a scheduled policy fires and whether a run may start beside an active one. No database,
 * no network, no threads: tests/unit/test_replication.c covers all of it.
 */
#ifndef BERTH_REPLICATION_POLICY_H
#define BERTH_REPLICATION_POLICY_H

#include <stddef.h>

#include <jansson.h>

struct tm;

typedef enum { BERTH_REPL_FILTER_NAME, BERTH_REPL_FILTER_TAG } berth_repl_filter_kind_t;

/** One Harbor filter: {type: name|tag, value: glob, decoration: matches|excludes}. */
typedef struct st_berth_repl_filter_t {
    berth_repl_filter_kind_t kind;
    int excludes; /* decoration "excludes": an artifact matching the glob is left out */
    char *pattern;
} berth_repl_filter_t;

typedef struct st_berth_repl_filters_t {
    size_t n;
    berth_repl_filter_t *v;
} berth_repl_filters_t;

/**
 * The filters of a policy's JSON array (NULL or not an array: none). Filters without a type or an empty value are
 * dropped, and so are label and resource filters: every artifact here is one without labels, so they pass all.
 * Release with berth_repl_filters_dispose.
 */
void berth_repl_filters_init(berth_repl_filters_t *f, const json_t *array);
void berth_repl_filters_dispose(berth_repl_filters_t *f);
/** 1 when `repo:tag` passes every filter. */
int berth_repl_filters_pass(const berth_repl_filters_t *f, const char *repo, const char *tag);

/**
 * The repository name at the destination. With a `dest_namespace`, it replaces the first `replace_count`
 * components of `repo` (Harbor's default is 1; -1 keeps only the last component; 0 prefixes the whole name);
 * without one the name stays as it is.
 */
void berth_repl_dest_name(const char *dest_namespace, int replace_count, const char *repo, char *out, size_t outsz);
/**
 * The project a policy writes into, in this Berth's project names: the first component of `dest_namespace`,
 * else `project_scope` (a delegated policy's repositories all start with it). "" when neither is set.
 */
void berth_repl_dest_project(const char *dest_namespace, const char *project_scope, char out[256]);

/** 1 if a cron expression ("m h dom mon dow", or Harbor's six fields with seconds first) fires at `tm`'s minute. */
int berth_repl_cron_matches(const char *expr, const struct tm *tm);
/** 1 if `expr` is a cron expression berth_repl_cron_matches understands; an invalid one never fires. */
int berth_repl_cron_valid(const char *expr);
/** 1 if `url` is http:// or https:// with something after the scheme and no spaces or control bytes: the only
 * URLs Berth sends requests to (replication endpoints, webhook targets); file://, gopher:// ... are refused. */
int berth_repl_http_url(const char *url);

/**
 * Whether a run started by `trigger` is skipped while the policy's previous run is still active (Harbor: manual
 * and scheduled runs are; each event gets its own run, or pushes during a long run would be lost).
 */
int berth_repl_skips_while_active(const char *trigger);
/** Whether a push or delete ("push"/"delete") of `repo:tag` starts a run of an event-based policy. */
int berth_repl_event_applies(const berth_repl_filters_t *f, int replicate_deletion, const char *operation, const char *repo,
                             const char *tag);

/** Attempts a task gets before it fails for good; the retries wait 2, 4, 8, 16, then 30 s. */
#define BERTH_REPL_MAX_ATTEMPTS 8
/**
 * A task's status after an attempt that returned `rc` (0, BERTH_ERETRY when a retry may help, another BERTH_E*
 * code when it will not): "Succeed", "Stopped" (its execution was stopped meanwhile), "Pending" (retried after
 * *delay_s seconds) or "Failed". `attempts` counts the one just made.
 */
const char *berth_repl_task_outcome(int rc, int stopped, int attempts, int *delay_s);

#endif
