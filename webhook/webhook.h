/*
 * Webhooks (issue 14): delivery of the events change transactions queue in PostgreSQL (the outbox,
 * sql/webhook.h). Worker threads turn queued events into executions and tasks, claim due tasks with
 * FOR UPDATE SKIP LOCKED and a lease (so several berthd on one database send each attempt once), POST them with
 * libcurl and retry failures with exponential back-off. A dead or slow receiver only occupies a delivery
 * thread: pushes never wait for it.
 *
 * Signature (beyond Harbor): every request carries
 *   X-Berth-Event-Id: <uuid>          stable across retries and redeliveries: receivers de-duplicate on it
 *   X-Berth-Timestamp: <unix seconds> when this attempt was signed
 *   X-Berth-Signature: sha256=<hex of HMAC-SHA256(policy secret, timestamp + "." + body)>
 * A receiver recomputes the HMAC over the raw body with the secret it was shown at policy creation, compares in
 * constant time, rejects a timestamp more than 5 minutes from its clock, and drops event ids it has seen
 * (docs/webhooks.md).
 */
#ifndef BERTH_WEBHOOK_WEBHOOK_H
#define BERTH_WEBHOOK_WEBHOOK_H

#include <stddef.h>

#include "sql/db.h"

/** Harbor's event types plus Berth's ISA_SCAN_COMPLETED, NULL-terminated (GET .../webhook/events). */
extern const char *const berth_webhook_event_types[];
/** 1 if `type` is one of them. */
int berth_webhook_event_type_known(const char *type);
/** 1 if `url` may be a target: http or https only (the rule replication's endpoints follow). */
int berth_webhook_address_ok(const char *url);
/**
 * Why `url` may not be stored as a target (NULL: it may): besides berth_webhook_address_ok, at most 2048 bytes,
 * a host and a valid port as libcurl parses them, and no user:password, which every reader of the policy and of
 * its tasks would see (credentials go in the sealed auth_header).
 */
const char *berth_webhook_address_refused(const char *url);

typedef struct st_berth_webhook_conf_t {
    berth_db_t *db;
    const char *registry_host; /* host[:port] in payloads' resource_url */
    int workers;               /* delivery threads (default 2) */
    long timeout_s;            /* per attempt (default 10) */
    int max_attempts;          /* before a task is Error (default 10) */
    double backoff_s;          /* first retry after this, doubling (default 1) */
    double backoff_cap_s;      /* retries at most this far apart (default 600) */
} berth_webhook_conf_t;

/** Start the delivery threads. 0, or BERTH_ERROR (nothing started). */
int berth_webhook_start(const berth_webhook_conf_t *conf);
/** Stop them (an attempt in progress finishes first; its task is retried by whoever claims it next otherwise). */
void berth_webhook_stop(void);
/** Look for work now (a change committed, a redelivery was asked for); from any thread, never blocks. */
void berth_webhook_wake(void);

/** "sha256=<64 hex>" for `body` signed at `timestamp` with `secret` (the X-Berth-Signature value). */
void berth_webhook_sign(char out[72], const char *secret, const char *timestamp, const char *body, size_t len);

#endif
