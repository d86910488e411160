/* Quota settings and the events a push's quota figures make (quota.h). */
#include "registry/service/quota.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/log.h"
#include "sql/webhook.h"

static int64_t default_limit = -1;
static int warning_percent = 85;

void berth_quota_configure(int64_t limit, int percent)
{
    default_limit = limit;
    warning_percent = percent;
}

int64_t berth_quota_default_limit(void)
{
    return default_limit;
}

int berth_quota_limit_ok(long long v)
{
    return v == -1 || (v >= 0 && v <= BERTH_QUOTA_MAX);
}

int berth_quota_warns(int64_t used, int64_t hard)
{
    /* used/hard >= percent/100, without overflow: both are at most 2^50 and percent at most 100 */
    return hard > 0 && used * 100 >= hard * warning_percent;
}

/*
 * The webhook event, written to the outbox on the request's connection before the push is answered: an exceeded
 * push rolled back, so it has no transaction to ride in; a warning is written just after the push's commit. Once
 * the client has its answer, the event survives a crash (delivered at the next start).
 */
static void outbox(berth_dbconn_t *c, const char *type, const berth_event_t *ev)
{
    char project[256];
    snprintf(project, sizeof(project), "%.*s", (int)strcspn(ev->repo, "/"), ev->repo); /* the repository may be new */
    json_t *x = json_pack("{s:{s:s?, s:I, s:I, s:I}}", "custom_attributes", "Details", ev->detail, "used",
                          (json_int_t)ev->quota_used, "hard", (json_int_t)ev->quota_hard, "adding", (json_int_t)ev->size);
    char *extra = x != NULL ? json_dumps(x, JSON_COMPACT) : NULL;
    berth_err_t err;
    berth_err_clear(&err);
    if (berth_db_webhook_enqueue(c, project, type, ev->repo, ev->digest, ev->tag, extra, &err) != 0)
        berth_log_warn("webhook: %s event of %s not queued: %s", type, ev->repo, err.msg);
    free(extra);
    json_decref(x);
}

void berth_quota_push_events(berth_dbconn_t *c, const berth_db_quota_t *q, berth_event_t *ev)
{
    char detail[256], add[BERTH_BYTES_HUMAN_MAX], used[BERTH_BYTES_HUMAN_MAX], hard[BERTH_BYTES_HUMAN_MAX];
    ev->quota_hard = q->hard;
    ev->size = q->after - q->before;
    if (q->refused) {
        ev->detail = detail;
        ev->kind = BERTH_EVENT_QUOTA_EXCEED;
        ev->quota_used = q->before;
        snprintf(detail, sizeof(detail),
                 "adding %s of storage resource, which when updated to current usage of %s will exceed the configured "
                 "upper limit of %s.",
                 berth_bytes_human(q->after - q->before, add), berth_bytes_human(q->before, used),
                 berth_bytes_human(q->hard, hard));
        berth_log_info("quota_exceed: push of %s@%s refused: %s", ev->repo, ev->digest, detail);
        outbox(c, "QUOTA_EXCEED", ev);
        berth_event_emit(ev);
        ev->detail = NULL;
        return;
    }
    /* a crossing only: pushes that stay above the line (or add nothing) do not repeat the warning */
    if (!berth_quota_warns(q->after, q->hard) || berth_quota_warns(q->before, q->hard))
        return;
    ev->kind = BERTH_EVENT_QUOTA_WARNING;
    ev->detail = detail;
    ev->quota_used = q->after;
    snprintf(detail, sizeof(detail), "quota usage reach %d%%: current usage is %s of the %s quota limit", warning_percent,
             berth_bytes_human(q->after, used), berth_bytes_human(q->hard, hard));
    berth_log_info("quota_warning: %s@%s: %s", ev->repo, ev->digest, detail);
    outbox(c, "QUOTA_WARNING", ev);
    berth_event_emit(ev);
    ev->detail = NULL; /* `detail` ends here */
}
