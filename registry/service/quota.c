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
 * The webhook event on `c`: QUOTA_WARNING inside the push's transaction (berth_quota_warning_outbox), so it commits
 * with the push or not at all; QUOTA_EXCEED after the refused push rolled back (it has no transaction to ride in)
 * and before the 403 is sent. Once the client has its answer, the event survives a crash.
 */
static int outbox(berth_dbconn_t *c, const char *type, const berth_event_t *ev, berth_err_t *err)
{
    char project[256];
    snprintf(project, sizeof(project), "%.*s", (int)strcspn(ev->repo, "/"), ev->repo); /* the repository may be new */
    json_t *x = json_pack("{s:{s:s?, s:I, s:I, s:I}}", "custom_attributes", "Details", ev->detail, "used",
                          (json_int_t)ev->quota_used, "hard", (json_int_t)ev->quota_hard, "adding", (json_int_t)ev->size);
    char *extra = x != NULL ? json_dumps(x, JSON_COMPACT) : NULL;
    int rc = berth_db_webhook_enqueue(c, project, type, ev->repo, ev->digest, ev->tag, extra, err);
    free(extra);
    json_decref(x);
    return rc;
}

/* a crossing only: pushes that stay above the line (or add nothing) do not repeat the warning */
static int crossed(const berth_db_quota_t *q)
{
    return !q->refused && berth_quota_warns(q->after, q->hard) && !berth_quota_warns(q->before, q->hard);
}

/* The event's figures and Harbor's sentence (into `detail`, which ev->detail points at) for a refused or crossing push */
static void figures(const berth_db_quota_t *q, berth_event_t *ev, char detail[256])
{
    char add[BERTH_BYTES_HUMAN_MAX], used[BERTH_BYTES_HUMAN_MAX], hard[BERTH_BYTES_HUMAN_MAX];
    ev->quota_hard = q->hard;
    ev->size = q->after - q->before;
    ev->detail = detail;
    if (q->refused) {
        ev->kind = BERTH_EVENT_QUOTA_EXCEED;
        ev->quota_used = q->before;
        snprintf(detail, 256,
                 "adding %s of storage resource, which when updated to current usage of %s will exceed the configured "
                 "upper limit of %s.",
                 berth_bytes_human(q->after - q->before, add), berth_bytes_human(q->before, used),
                 berth_bytes_human(q->hard, hard));
        return;
    }
    ev->kind = BERTH_EVENT_QUOTA_WARNING;
    ev->quota_used = q->after;
    snprintf(detail, 256, "quota usage reach %d%%: current usage is %s of the %s quota limit", warning_percent,
             berth_bytes_human(q->after, used), berth_bytes_human(q->hard, hard));
}

int berth_quota_warning_outbox(berth_dbconn_t *c, const berth_db_quota_t *q, void *push, berth_err_t *err)
{
    if (!crossed(q))
        return 0;
    berth_event_t ev = *(const berth_event_t *)push;
    char detail[256];
    figures(q, &ev, detail);
    return outbox(c, "QUOTA_WARNING", &ev, err);
}

void berth_quota_push_events(berth_dbconn_t *c, const berth_db_quota_t *q, berth_event_t *ev)
{
    if (!q->refused && !crossed(q))
        return;
    char detail[256];
    figures(q, ev, detail);
    if (q->refused) {
        berth_log_info("quota_exceed: push of %s@%s refused: %s", ev->repo, ev->digest, detail);
        berth_err_t err;
        berth_err_clear(&err);
        if (outbox(c, "QUOTA_EXCEED", ev, &err) != 0)
            berth_log_warn("webhook: QUOTA_EXCEED event of %s not queued: %s", ev->repo, err.msg);
    } else {
        berth_log_info("quota_warning: %s@%s: %s", ev->repo, ev->digest, detail); /* queued with the push */
    }
    berth_event_emit(ev);
    ev->detail = NULL; /* `detail` ends here */
}
