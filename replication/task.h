/*
 * The engine's typed rows: a registry endpoint, a policy as a run needs it, a claimed task. The queries of
 * replication's SQL answer in JSON; these parsers are the one place that reads it, so the rest of the engine works
 * on fields the compiler checks. Pure (no database): tests/unit/test_replication.c parses real query shapes.
 */
#ifndef BERTH_REPLICATION_TASK_H
#define BERTH_REPLICATION_TASK_H

#include <jansson.h>

#include "replication/policy.h"

/** A registry row for the engine. Strings are malloc'd and never NULL ("" when unset). */
typedef struct st_berth_repl_endpoint_t {
    long long id;
    char *type; /* "berth", "harbor", "docker-registry", ... */
    char *url;  /* base, e.g. https://registry.example.com */
    char *access_key;
    char *secret; /* sealed (seal.c), hex; "" when the endpoint has none */
    char *ca_file;
    int insecure;
} berth_repl_endpoint_t;

/** A policy as a run needs it (the API's view of it lives in registry/api/replication.c). */
typedef struct st_berth_repl_policy_t {
    long long id;
    char *dest_namespace, *creator, *project_scope, *cron; /* never NULL */
    int replace_count;                                     /* dest_namespace_replace_count */
    int replicate_deletion;
    berth_repl_filters_t filters;
    long long src_registry_id;           /* 0: this Berth is the source */
    berth_repl_endpoint_t *src_registry; /* filled by berth_repl_queue_policy_get; NULL: this Berth */
} berth_repl_policy_t;

typedef enum { BERTH_REPL_OP_COPY, BERTH_REPL_OP_DELETION } berth_repl_op_t;

/** One artifact of one execution, as berth_repl_queue_claim hands it to a worker. */
typedef struct st_berth_repl_task_t {
    long long id, execution_id;
    char *src, *dst; /* "repo:tag" or "repo@digest" */
    berth_repl_op_t operation;
    int attempts;                                        /* counting the one about to run */
    int override;                                        /* a tag the destination already has is replaced */
    long speed_kib;                                      /* send-rate cap towards the destination, 0: none */
    berth_repl_endpoint_t *src_registry, *dest_registry; /* NULL: this Berth */
} berth_repl_task_t;

/** A registry object ({id, type, url, access_key, secret, insecure, ca_file}); NULL when `o` is not an object. */
berth_repl_endpoint_t *berth_repl_endpoint_new(const json_t *o);
void berth_repl_endpoint_free(berth_repl_endpoint_t *e);

/** Parse a policy object (a full policy, or the short rows of the event and schedule queries). 0 or BERTH_EINVAL. */
int berth_repl_policy_parse(berth_repl_policy_t *out, const json_t *o);
void berth_repl_policy_dispose(berth_repl_policy_t *p);

/** Parse a claimed task. 0, or BERTH_EINVAL when `json` is not a task object (*out is then empty). */
int berth_repl_task_parse(berth_repl_task_t *out, const char *json);
void berth_repl_task_dispose(berth_repl_task_t *t);

/** Split "repo:tag" / "repo@digest" (no separator: tag "latest"). */
void berth_repl_ref_split(const char *s, char *repo, size_t rsz, char *ref, size_t fsz);
/** The other way: "repo@ref" when ref is a digest, else "repo:ref". */
void berth_repl_ref_join(const char *repo, const char *ref, char *out, size_t outsz);

#endif
