/*
 * Per-project storage quotas (issue 13). The accounting lives in the database (sql/migrations/0110_quotas.sql:
 * what counts, and the triggers that keep usage in the transaction of every change); the limit is checked by
 * berth_db_manifest_put. This module holds the two settings and turns a push's quota figures into change events.
 */
#ifndef BERTH_SERVICE_QUOTA_H
#define BERTH_SERVICE_QUOTA_H

#include <stdint.h>

#include "registry/service/events.h"
#include "sql/registry.h"

#define BERTH_QUOTA_MAX (1LL << 50) /* 1024 TiB, the largest limit Harbor offers */

/** Set at start, before any request: quota.default_storage_limit (bytes, -1 unlimited) and quota.warning_percent. */
void berth_quota_configure(int64_t default_limit, int warning_percent);
/** 1 if `v` may be a limit: -1 (unlimited) or 0 to BERTH_QUOTA_MAX bytes. */
int berth_quota_limit_ok(long long v);
/** The limit a new project gets when its creator names none. */
int64_t berth_quota_default_limit(void);
/** 1 if usage `used` of a limit `hard` is at or beyond the warning line. */
int berth_quota_warns(int64_t used, int64_t hard);
/**
 * berth_db_manifest_put's hook (sql/registry.h), `push` the push's berth_event_t (where and by whom): a push that
 * takes usage across the warning line queues QUOTA_WARNING in the push's transaction, so it commits with the push
 * or not at all.
 */
int berth_quota_warning_outbox(berth_dbconn_t *c, const berth_db_quota_t *q, void *push, berth_err_t *err);
/**
 * After a manifest PUT, for a push the quota refused (QUOTA_EXCEED) or one that took usage across the warning line
 * (QUOTA_WARNING): the change event is emitted, and QUOTA_EXCEED is written to the webhook outbox on `c` (outside
 * any transaction, before the refusal is answered; QUOTA_WARNING was queued by the hook above). `ev` says where and
 * by whom (kind, size, figures and detail are filled here).
 */
void berth_quota_push_events(berth_dbconn_t *c, const berth_db_quota_t *q, berth_event_t *ev);

#endif
