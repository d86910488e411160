/*
 * registry/service/events.c: subscribers get every event, in subscription order, with its typed fields; the
 * table is fixed; and the registry's own subscribers (event_subscribers.c) react to the kinds they should.
 */
#include "registry/service/events.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "registry/service/cache.h"

#define LOG_MAX 64

/* What one subscriber saw: copies, since the event's strings are only borrowed */
typedef struct {
    int who;
    berth_event_t ev;
    char project[64], repo[64], digest[80], tag[32], media_type[64], principal[32], remote[32];
} seen_t;

static seen_t seen[LOG_MAX];
static int nseen;

static void copy(char *out, size_t outsz, const char *s)
{
    snprintf(out, outsz, "%s", s != NULL ? s : "(null)");
}

static void record(const berth_event_t *ev, void *ctx)
{
    if (nseen == LOG_MAX)
        return;
    seen_t *s = &seen[nseen++];
    s->who = *(int *)ctx;
    s->ev = *ev;
    copy(s->project, sizeof(s->project), ev->project);
    copy(s->repo, sizeof(s->repo), ev->repo);
    copy(s->digest, sizeof(s->digest), ev->digest);
    copy(s->tag, sizeof(s->tag), ev->tag);
    copy(s->media_type, sizeof(s->media_type), ev->media_type);
    copy(s->principal, sizeof(s->principal), ev->principal);
    copy(s->remote, sizeof(s->remote), ev->remote);
}

static int ids[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};

static void hook(void)
{
    ok(berth_event_subscribe("first", record, &ids[0]) == 0 && berth_event_subscribe("second", record, &ids[1]) == 0 &&
           berth_event_subscribe("third", record, &ids[2]) == 0,
       "three subscribers");
    berth_event_t push = {.kind = BERTH_EVENT_MANIFEST_PUSH,
                          .surface = BERTH_EVENT_V2,
                          .project = "team",
                          .repo = "team/app",
                          .digest = "sha256:0123",
                          .tag = "1.0",
                          .media_type = "application/vnd.oci.image.manifest.v1+json",
                          .size = 512,
                          .principal = "alice",
                          .remote = "10.0.0.1"};
    berth_event_emit(&push);
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_TAG_DELETE,
                                      .surface = BERTH_EVENT_REST,
                                      .repo = "team/sub/app",
                                      .tag = "old",
                                      .size = -1,
                                      .principal = "",
                                      .time = 42});
    ok(nseen == 6, "two events reach three subscribers: %d deliveries", nseen);
    ok(seen[0].who == 0 && seen[1].who == 1 && seen[2].who == 2 && seen[3].who == 0 && seen[4].who == 1 && seen[5].who == 2,
       "each event reaches every subscriber in subscription order before the next event");
    int typed = 1;
    for (int i = 0; i < 3; i++)
        typed &= seen[i].ev.kind == BERTH_EVENT_MANIFEST_PUSH && seen[i].ev.surface == BERTH_EVENT_V2 &&
                 strcmp(seen[i].project, "team") == 0 && strcmp(seen[i].repo, "team/app") == 0 &&
                 strcmp(seen[i].digest, "sha256:0123") == 0 && strcmp(seen[i].tag, "1.0") == 0 &&
                 strcmp(seen[i].media_type, push.media_type) == 0 && seen[i].ev.size == 512 &&
                 strcmp(seen[i].principal, "alice") == 0 && strcmp(seen[i].remote, "10.0.0.1") == 0 && seen[i].ev.isa_rows == NULL;
    ok(typed, "every subscriber gets the typed fields as emitted");
    ok(seen[0].ev.time > 1700000000 && push.time == 0, "the time is set on delivery, the emitter's event is untouched");
    ok(seen[3].ev.kind == BERTH_EVENT_TAG_DELETE && seen[3].ev.surface == BERTH_EVENT_REST && strcmp(seen[3].tag, "old") == 0 &&
           strcmp(seen[3].digest, "(null)") == 0 && seen[3].ev.size == -1,
       "a tag delete carries its tag and no digest");
    ok(strcmp(seen[3].project, "team") == 0, "without a project, the repository's first component is the project: %s",
       seen[3].project);
    ok(seen[3].ev.time == 42, "a time the emitter set is kept");

    int filled = 1;
    for (int i = 3; i < 16; i++)
        filled &= berth_event_subscribe("more", record, &ids[i]) == 0;
    ok(filled, "sixteen subscribers fit");
    ok(berth_event_subscribe("seventeenth", record, &ids[16]) == BERTH_ETOOBIG, "the seventeenth is refused (BERTH_ETOOBIG)");
    nseen = 0;
    berth_event_emit(&push);
    ok(nseen == 16 && seen[15].who == 15, "an emit reaches the sixteen, in order, and not the refused one");

    berth_event_unsubscribe_all();
    nseen = 0;
    berth_event_emit(&push);
    ok(nseen == 0, "after unsubscribe_all nothing is delivered");

    ok(strcmp(berth_event_kind_name(BERTH_EVENT_BLOB_PUSH), "blob_push") == 0 &&
           strcmp(berth_event_kind_name(BERTH_EVENT_REPOSITORY_DELETE), "repository_delete") == 0 &&
           strcmp(berth_event_kind_name(BERTH_EVENT_KINDS), "unknown") == 0,
       "kind names");
}

/* The registry's own subscribers. The cache is observable without a server; replication and the scanner ignore
 * events while stopped; the audit subscriber writes the row berth_event_audit_row makes (its writer needs a
 * database, so the row is checked here and the written log by integration_api). */
static void registry_subscribers(void)
{
    ok(berth_event_subscribers_install() == 0, "the registry's subscribers install");
    berth_cache_set_enabled(1);
    berth_cache_val_t v = {.digest = "sha256:0123", .len = 2};
    berth_cache_val_t out;
    berth_cache_put(BERTH_CACHE_BLOB, "team/app", "sha256:0123", berth_cache_epoch("team/app"), &v);
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_BLOB_PUSH,
                                      .surface = BERTH_EVENT_V2,
                                      .repo = "team/app",
                                      .digest = "sha256:4567",
                                      .size = 9,
                                      .principal = "alice",
                                      .remote = "10.0.0.1"});
    ok(berth_cache_get(BERTH_CACHE_BLOB, "team/app", "sha256:0123", &out) == 1,
       "a blob push leaves the cache alone (only positives are cached)");
    berth_cache_val_dispose(&out);
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_MANIFEST_PUSH,
                                      .surface = BERTH_EVENT_INTERNAL,
                                      .repo = "team/app",
                                      .digest = "sha256:89ab",
                                      .size = 10,
                                      .principal = ""});
    ok(berth_cache_get(BERTH_CACHE_BLOB, "team/app", "sha256:0123", &out) == 0, "a manifest push invalidates the repository");
    berth_cache_put(BERTH_CACHE_BLOB, "team/app", "sha256:0123", berth_cache_epoch("team/app"), &v);
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_TAG_PUSH,
                                      .surface = BERTH_EVENT_REST,
                                      .project = "team",
                                      .repo = "team/app",
                                      .digest = "sha256:0123",
                                      .tag = "rest",
                                      .size = -1,
                                      .principal = "alice",
                                      .remote = "10.0.0.1"});
    ok(berth_cache_get(BERTH_CACHE_BLOB, "team/app", "sha256:0123", &out) == 0,
       "a tag push through the API invalidates the repository");
    berth_event_unsubscribe_all();

    /* the audit rows, as /v2 and the API wrote them before the hook */
    static const struct {
        berth_event_kind_t kind;
        berth_event_surface_t surface;
        const char *digest, *tag;
        const char *op, *type, *resource, *detail; /* op NULL: not audited */
    } rows[] = {
        {BERTH_EVENT_MANIFEST_PUSH, BERTH_EVENT_V2, "sha256:01", "1.0", "push", "artifact", "team/app:1.0", ""},
        {BERTH_EVENT_MANIFEST_PUSH, BERTH_EVENT_V2, "sha256:01", NULL, "push", "artifact", "team/app@sha256:01", ""},
        {BERTH_EVENT_MANIFEST_DELETE, BERTH_EVENT_V2, "sha256:01", NULL, "delete", "artifact", "team/app@sha256:01", ""},
        {BERTH_EVENT_MANIFEST_DELETE, BERTH_EVENT_REST, "sha256:01", NULL, "delete", "artifact", "team/app@sha256:01", "api"},
        {BERTH_EVENT_TAG_DELETE, BERTH_EVENT_V2, NULL, "1.0", "delete", "tag", "team/app:1.0", ""},
        {BERTH_EVENT_TAG_PUSH, BERTH_EVENT_REST, "sha256:01", "rest", "create", "tag", "team/app:rest", "api"},
        {BERTH_EVENT_TAG_DELETE, BERTH_EVENT_REST, NULL, "rest", "delete", "tag", "team/app:rest", "api"},
        {BERTH_EVENT_REPOSITORY_DELETE, BERTH_EVENT_REST, NULL, NULL, "delete", "repository", "team/app", "api"},
        {BERTH_EVENT_BLOB_PUSH, BERTH_EVENT_V2, "sha256:01", NULL, NULL, NULL, NULL, NULL},
        {BERTH_EVENT_BLOB_DELETE, BERTH_EVENT_V2, "sha256:01", NULL, NULL, NULL, NULL, NULL},
        {BERTH_EVENT_MANIFEST_PUSH, BERTH_EVENT_INTERNAL, "sha256:01", NULL, NULL, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        berth_event_t ev = {
            .kind = rows[i].kind, .surface = rows[i].surface, .repo = "team/app", .digest = rows[i].digest, .tag = rows[i].tag};
        berth_event_audit_row_t row;
        int audited = berth_event_audit_row(&ev, &row);
        if (rows[i].op == NULL)
            ok(!audited, "%s (surface %d) is not audited", berth_event_kind_name(rows[i].kind), rows[i].surface);
        else
            ok(audited && strcmp(row.operation, rows[i].op) == 0 && strcmp(row.resource_type, rows[i].type) == 0 &&
                   strcmp(row.resource, rows[i].resource) == 0 && strcmp(row.detail, rows[i].detail) == 0,
               "%s (surface %d): %s %s %s \"%s\"", berth_event_kind_name(rows[i].kind), rows[i].surface, rows[i].op, rows[i].type,
               rows[i].resource, rows[i].detail);
    }
}

int main(void)
{
    hook();
    registry_subscribers();
    return tap_done();
}
