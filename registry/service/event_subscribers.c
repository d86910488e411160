/*
 * The registry's own reactions to a committed change (events.h), subscribed at start-up in this order:
 * the read cache first, so that whatever the others set off (a replication worker reading this Berth through
 * its edge, a scan) already reads the new state; then the audit log, replication triggers, the ISA scanner and the
 * squashfs gateway.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/audit.h"
#include "registry/service/cache.h"
#include "registry/service/events.h"
#include "registry/service/isa_scan.h"
#include "registry/service/sqfs_gateway.h"
#include "replication/replication.h"
#include "webhook/webhook.h"

/* Per kind: the audit row it makes (operation NULL: not audited) and the replication event (NULL: none) */
static const struct {
    const char *audit_op, *audit_type, *repl_op;
} reactions[BERTH_EVENT_KINDS] = {
    [BERTH_EVENT_MANIFEST_PUSH] = {"push", "artifact", "push"},
    [BERTH_EVENT_MANIFEST_DELETE] = {"delete", "artifact", "delete"},
    [BERTH_EVENT_TAG_PUSH] = {"create", "tag", "push"},
    [BERTH_EVENT_TAG_DELETE] = {"delete", "tag", "delete"},
    [BERTH_EVENT_BLOB_PUSH] = {NULL, NULL, NULL},
    [BERTH_EVENT_BLOB_DELETE] = {NULL, NULL, NULL},
    [BERTH_EVENT_REPOSITORY_DELETE] = {"delete", "repository", NULL},
    [BERTH_EVENT_TAG_RETENTION] = {NULL, NULL, NULL}, /* each artifact it deleted had its own event */
    [BERTH_EVENT_QUOTA_EXCEED] = {NULL, NULL, NULL},  /* for webhooks; the refused push changed nothing */
    [BERTH_EVENT_QUOTA_WARNING] = {NULL, NULL, NULL},
};

/* Only positive answers are cached: a new blob makes none of them stale, every other change may */
static void on_change_cache(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    if (ev->kind != BERTH_EVENT_BLOB_PUSH && ev->kind != BERTH_EVENT_QUOTA_EXCEED && ev->kind != BERTH_EVENT_QUOTA_WARNING &&
        ev->repo != NULL)
        berth_cache_invalidate(ev->repo);
}

/* The rows Harbor's audit log shows: what callers do through /v2 and the API; Berth's own writes and blobs are not */
int berth_event_audit_row(const berth_event_t *ev, berth_event_audit_row_t *row)
{
    row->operation = reactions[ev->kind].audit_op;
    row->resource_type = reactions[ev->kind].audit_type;
    row->detail = ev->surface == BERTH_EVENT_REST ? "api" : "";
    if (row->operation == NULL || ev->surface == BERTH_EVENT_INTERNAL)
        return 0;
    if (ev->kind == BERTH_EVENT_REPOSITORY_DELETE)
        snprintf(row->resource, sizeof(row->resource), "%s", ev->repo);
    else if (ev->tag != NULL)
        snprintf(row->resource, sizeof(row->resource), "%s:%s", ev->repo, ev->tag);
    else
        snprintf(row->resource, sizeof(row->resource), "%s@%s", ev->repo, ev->digest);
    return 1;
}

static void on_change_audit(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    berth_event_audit_row_t row;
    if (berth_event_audit_row(ev, &row))
        berth_audit(ev->principal, ev->remote, row.operation, row.resource_type, row.resource, ev->project, 1, row.detail);
}

/* Event-based policies name tags: a change without one (a manifest by digest) triggers nothing */
static void on_change_replication(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    if (reactions[ev->kind].repl_op != NULL && ev->tag != NULL)
        berth_repl_event(reactions[ev->kind].repl_op, ev->repo, ev->tag);
}

/* Verdicts arrive later as referrers; the push never waits for them */
static void on_change_isa_scan(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    if (ev->kind == BERTH_EVENT_MANIFEST_PUSH && ev->isa_rows != NULL)
        berth_isa_scan_enqueue(ev->repo, ev->isa_rows);
}

/* The change queued its webhook event in its own transaction (sql/webhook.h); this only makes delivery start now
 * rather than at the next poll */
static void on_change_webhook(const berth_event_t *ev, void *ctx)
{
    (void)ctx;
    if (ev->kind != BERTH_EVENT_BLOB_PUSH && ev->kind != BERTH_EVENT_BLOB_DELETE)
        berth_webhook_wake();
}

int berth_event_subscribers_install(void)
{
    int rc;
    if ((rc = berth_event_subscribe("cache", on_change_cache, NULL)) != 0 ||
        (rc = berth_event_subscribe("audit", on_change_audit, NULL)) != 0 ||
        (rc = berth_event_subscribe("replication", on_change_replication, NULL)) != 0 ||
        (rc = berth_event_subscribe("isa-scan", on_change_isa_scan, NULL)) != 0 ||
        (rc = berth_event_subscribe("squashfs", berth_sqfs_gateway_event, NULL)) != 0 ||
        (rc = berth_event_subscribe("webhooks", on_change_webhook, NULL)) != 0)
        return rc;
    return 0;
}
