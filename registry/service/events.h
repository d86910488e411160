/*
 * The change-event hook: every committed change of what the registry holds (manifests, tags, blobs,
 * repositories), whether it came through /v2, the REST API or Berth itself, is announced once as one typed
 * event. What reacts to changes (read cache, audit log, replication triggers, ISA scanner; later quotas, GC,
 * webhooks, the proxy cache) subscribes here instead of being called from each handler, so a new entry point
 * cannot forget one of them.
 *
 * Emit only after the database transaction committed (QUOTA_EXCEED: after it rolled back): subscribers act at once (replicate,
 * scan) and must never see a change that was rolled back. Subscribers run on the emitting thread, in subscription order, and must
 * not block: slow work is queued for a thread of their own. Subscriptions are made at start-up, before the first request; the table
 * is fixed afterwards and read without a lock.
 */
#ifndef BERTH_SERVICE_EVENTS_H
#define BERTH_SERVICE_EVENTS_H

#include <stdint.h>
#include <time.h>

typedef enum {
    BERTH_EVENT_MANIFEST_PUSH,     /* a manifest stored; `tag` set when it was pushed by tag */
    BERTH_EVENT_MANIFEST_DELETE,   /* a manifest and its tags removed */
    BERTH_EVENT_TAG_PUSH,          /* a tag set on a stored manifest (REST tag create) */
    BERTH_EVENT_TAG_DELETE,        /* a tag removed; the manifest stays */
    BERTH_EVENT_BLOB_PUSH,         /* an upload committed or a blob mounted into the repository */
    BERTH_EVENT_BLOB_DELETE,       /* a blob unlinked from the repository */
    BERTH_EVENT_REPOSITORY_DELETE, /* the repository and everything in it */
    BERTH_EVENT_TAG_RETENTION,     /* a retention execution ended: `project` set, `repo` NULL, `detail` its summary */
    BERTH_EVENT_QUOTA_EXCEED,      /* a manifest push refused by the project's storage quota (nothing committed) */
    BERTH_EVENT_QUOTA_WARNING,     /* a manifest push took the project's usage across quota.warning_percent */
    BERTH_EVENT_KINDS
} berth_event_kind_t;

typedef enum {
    BERTH_EVENT_V2,       /* the distribution API */
    BERTH_EVENT_REST,     /* /api/v2.0 */
    BERTH_EVENT_INTERNAL, /* Berth itself (ISA scan verdicts) */
} berth_event_surface_t;

/** One change. Strings are borrowed for the duration of the emit; subscribers copy what they keep. */
typedef struct st_berth_event_t {
    berth_event_kind_t kind;
    berth_event_surface_t surface;
    const char *project;    /* project name; NULL: berth_event_emit derives it from `repo` */
    const char *repo;       /* repository name */
    const char *digest;     /* manifest or blob digest; NULL when the change names none (tag or repository delete) */
    const char *tag;        /* NULL when no tag is involved */
    const char *media_type; /* manifest pushes; NULL otherwise */
    int64_t size;           /* bytes of the manifest or blob (quota events: bytes the push adds); -1 when unknown */
    const char *principal;  /* who ("" anonymous or Berth itself) */
    const char *remote;     /* client address; NULL for internal changes */
    const char *isa_rows;   /* a pushed index's CPU-ISA declarations to scan (JSON rows of service/isa.h), or NULL */
    /* TAG_RETENTION: JSON {execution_id, policy_id, trigger, dry_run, status, total, retained, deleted: [{repository,
     * digest, tags}]} (Harbor's webhook payload carries the same facts); QUOTA_*: Harbor's sentence ("adding 2.1 MiB
     * of storage resource, ..."); NULL for other kinds */
    const char *detail;
    time_t time;        /* when it committed: set by berth_event_emit when 0 */
    int64_t quota_used; /* quota events: the project's usage before the push (EXCEED) or after it (WARNING) */
    int64_t quota_hard; /* quota events: the project's limit in bytes */
} berth_event_t;

typedef void (*berth_event_fn)(const berth_event_t *ev, void *ctx);

/** Add a subscriber at start-up. BERTH_ETOOBIG when the fixed table is full. `name` is kept (a literal). */
int berth_event_subscribe(const char *name, berth_event_fn fn, void *ctx);
/** Drop every subscriber (shutdown and tests; no emit may run concurrently). */
void berth_event_unsubscribe_all(void);
/** Deliver a committed change to every subscriber, in subscription order. */
void berth_event_emit(const berth_event_t *ev);
/** "manifest_push", "tag_delete", ... for logs and tests. */
const char *berth_event_kind_name(berth_event_kind_t kind);

/** Subscribe the registry's own reactions: read cache, audit log, replication triggers, ISA scanner, squashfs gateway,
 * webhook delivery wake-up (in that order). */
int berth_event_subscribers_install(void);

/** The audit-log row of a change (event_subscribers.c): what operation on what, as the log has always said. */
typedef struct st_berth_event_audit_row_t {
    const char *operation;     /* push, create, delete */
    const char *resource_type; /* artifact, tag, repository */
    const char *detail;        /* "api" for the REST surface, "" for /v2 */
    char resource[600];        /* repo:tag, repo@digest or the repository */
} berth_event_audit_row_t;
/** 1 with `row` filled, or 0 when the change is not audited (blobs; Berth's own writes). */
int berth_event_audit_row(const berth_event_t *ev, berth_event_audit_row_t *row);

#endif
