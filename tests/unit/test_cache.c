/* registry/service/cache.c: only enabled, only positive, never older than the epoch read before the query. */
#include "registry/service/cache.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static berth_cache_val_t manifest(const char *content)
{
    berth_cache_val_t v;
    memset(&v, 0, sizeof(v));
    strcpy(v.digest, "sha256:0123");
    v.media_type = (char *)"application/vnd.oci.image.manifest.v1+json";
    v.content = (char *)content;
    v.len = strlen(content);
    return v;
}

int main(void)
{
    berth_cache_val_t v = manifest("{\"a\":1}"), out;
    uint64_t hits, misses;
    int enabled;

    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "v1", berth_cache_epoch("p/r"), &v);
    memset(&out, 0, sizeof(out));
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "v1", &out) == 0, "off (the notification channel is down): no hit");

    berth_cache_set_enabled(1);
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "v1", berth_cache_epoch("p/r"), &v);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "v1", &out) == 1, "on: a put is a hit");
    ok(out.len == v.len && memcmp(out.content, v.content, v.len) == 0 && strcmp(out.digest, v.digest) == 0 &&
           strcmp(out.media_type, v.media_type) == 0,
       "the hit is a copy of what was put");
    berth_cache_val_dispose(&out);
    ok(berth_cache_get(BERTH_CACHE_BLOB, "p/r", "v1", &out) == 0, "kinds are separate keys");
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/other", "v1", &out) == 0, "repositories are separate keys");

    berth_cache_invalidate("p/r");
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "v1", &out) == 0, "a write (invalidate) hides the entry");

    /* a reader took the epoch, then a write committed, then the reader put what it read: it must not be served */
    uint64_t before = berth_cache_epoch("p/r");
    berth_cache_invalidate("p/r");
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "v1", before, &v);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "v1", &out) == 0, "a put with an epoch older than a write is never a hit");

    /* the same across a global invalidation (the channel came back: writes may have been missed) */
    before = berth_cache_epoch("p/r");
    berth_cache_invalidate(NULL);
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "v1", before, &v);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "v1", &out) == 0, "a put read before a global invalidation is never a hit");

    char *big = malloc((256u << 10) + 2);
    memset(big, 'x', (256u << 10) + 1);
    big[(256u << 10) + 1] = 0;
    berth_cache_val_t large = manifest(big);
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "big", berth_cache_epoch("p/r"), &large);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "big", &out) == 0, "an item over 256 KiB is not cached");
    free(big);

    /* the channel is lost (a frozen database, usually): what was cached keeps answering for a while, nothing new
     * is kept, and the metric says the cache is not fully on */
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "kept", berth_cache_epoch("p/r"), &v);
    berth_cache_set_enabled(0);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "kept", &out) == 1, "lost channel: an entry cached before still answers");
    berth_cache_val_dispose(&out);
    berth_cache_put(BERTH_CACHE_MANIFEST, "p/r", "new", berth_cache_epoch("p/r"), &v);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "new", &out) == 0, "lost channel: nothing new is kept");
    berth_cache_stats(&hits, &misses, &enabled);
    ok(hits == 2 && misses == 7 && enabled == 0, "stats count hits and misses (%llu/%llu); not on while lost",
       (unsigned long long)hits, (unsigned long long)misses);
    berth_cache_set_enabled(1);
    ok(berth_cache_get(BERTH_CACHE_MANIFEST, "p/r", "kept", &out) == 0, "back: the cache starts from empty");
    return tap_done();
}
