/* The change-event hook (events.h): a small fixed table of subscribers and the one emit. */
#include "registry/service/events.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/ref.h"

#define MAX_SUBSCRIBERS 16 /* the registry's own four, plus room for quotas, GC, webhooks, the proxy cache */

typedef struct {
    const char *name;
    berth_event_fn fn;
    void *ctx;
} subscriber_t;

static subscriber_t subscribers[MAX_SUBSCRIBERS];
static unsigned nsubscribers; /* published with release: an emit sees only complete rows */

static const char *const kind_names[BERTH_EVENT_KINDS] = {
    [BERTH_EVENT_MANIFEST_PUSH] = "manifest_push",
    [BERTH_EVENT_MANIFEST_DELETE] = "manifest_delete",
    [BERTH_EVENT_TAG_PUSH] = "tag_push",
    [BERTH_EVENT_TAG_DELETE] = "tag_delete",
    [BERTH_EVENT_BLOB_PUSH] = "blob_push",
    [BERTH_EVENT_BLOB_DELETE] = "blob_delete",
    [BERTH_EVENT_REPOSITORY_DELETE] = "repository_delete",
    [BERTH_EVENT_TAG_RETENTION] = "tag_retention",
    [BERTH_EVENT_QUOTA_EXCEED] = "quota_exceed",
    [BERTH_EVENT_QUOTA_WARNING] = "quota_warning",
};

int berth_event_subscribe(const char *name, berth_event_fn fn, void *ctx)
{
    unsigned n = __atomic_load_n(&nsubscribers, __ATOMIC_ACQUIRE);
    if (n == MAX_SUBSCRIBERS) {
        berth_log_err("event subscriber %s refused: all %d places taken", name, MAX_SUBSCRIBERS);
        return BERTH_ETOOBIG;
    }
    subscribers[n] = (subscriber_t){.name = name, .fn = fn, .ctx = ctx};
    __atomic_store_n(&nsubscribers, n + 1, __ATOMIC_RELEASE);
    return 0;
}

void berth_event_unsubscribe_all(void)
{
    __atomic_store_n(&nsubscribers, 0, __ATOMIC_RELEASE);
}

void berth_event_emit(const berth_event_t *ev)
{
    berth_event_t e = *ev;
    char project[BERTH_NAME_MAX + 1];
    if (e.project == NULL && e.repo != NULL) {
        snprintf(project, sizeof(project), "%.*s", (int)berth_ref_project_len(e.repo, strlen(e.repo)), e.repo);
        e.project = project;
    }
    if (e.time == 0)
        e.time = time(NULL);
    unsigned n = __atomic_load_n(&nsubscribers, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        subscribers[i].fn(&e, subscribers[i].ctx);
}

const char *berth_event_kind_name(berth_event_kind_t kind)
{
    return (unsigned)kind < BERTH_EVENT_KINDS ? kind_names[kind] : "unknown";
}
