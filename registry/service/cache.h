/*
 * Read cache for the hot pull path (manifest and blob GET/HEAD), answered on the event loop without a worker
 * hop or a database round trip. Only positive answers are cached, so a new push is visible at once.
 *
 * Invalidation: every repository hashes to an epoch slot; an entry is valid only while its slot's epoch is the
 * one read *before* the database query that produced it, so a write that commits concurrently can never be
 * hidden by an older read. Writers bump the slot after commit; other berthd instances bump it when PostgreSQL
 * delivers the NOTIFY the write sent (sql/listen.c). While that notification channel is down, the cache is off.
 */
#ifndef BERTH_SERVICE_CACHE_H
#define BERTH_SERVICE_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { BERTH_CACHE_MANIFEST = 'M', BERTH_CACHE_BLOB = 'B', BERTH_CACHE_TAGS = 'T' } berth_cache_kind_t;

typedef struct st_berth_cache_val_t {
    char digest[136];
    char *media_type; /* manifests */
    char *content;    /* manifests, tag lists */
    char *link;       /* tag lists: the Link header of the page, or NULL */
    size_t len;       /* content bytes, or blob size */
    double until;     /* 0, or the monotonic second (berth_cache_now) from which the entry is a miss */
} berth_cache_val_t;

/** Seconds on the monotonic clock, for `until`. */
double berth_cache_now(void);

/** Epoch of a repository's slot and of the whole cache; read it before the query whose result you will insert. */
uint64_t berth_cache_epoch(const char *repo);
/** Copy a live entry into *out (caller disposes with berth_cache_val_dispose). Returns 1 on a hit. */
int berth_cache_get(berth_cache_kind_t kind, const char *repo, const char *ref, berth_cache_val_t *out);
/** Insert a copy of `val`, valid while berth_cache_epoch(repo) is still `epoch`. */
void berth_cache_put(berth_cache_kind_t kind, const char *repo, const char *ref, uint64_t epoch, const berth_cache_val_t *val);
/** A write to `repo` committed (NULL: anything may have changed). */
void berth_cache_invalidate(const char *repo);
/** Also call `fn(repo)` whenever an invalidation happens (the edge's kept blob decisions go with the cache); NULL: none */
void berth_cache_on_invalidate(void (*fn)(const char *repo));
/** The invalidation channel is up (on: the cache starts from empty and fills) or lost (off: entries cached before
 * answer for 30 s more, nothing new is kept). Off until the first call with on. */
void berth_cache_set_enabled(int enabled);
void berth_cache_val_dispose(berth_cache_val_t *v);
/** Hits and misses for /metrics. */
void berth_cache_stats(uint64_t *hits, uint64_t *misses, int *enabled);

#endif
