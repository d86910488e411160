#include "registry/service/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 1024 /* epoch slots */
#define BUCKETS 8192
#define WAYS 4 /* entries per bucket; the oldest is replaced */
#define MAX_ITEM (256u << 10)
#define MAX_BYTES (32u << 20)
#define TTL_SECONDS 300 /* a safety net behind the notifications, not the mechanism */
/* After the invalidation channel is lost, what was cached before keeps answering this long and nothing new is
 * kept: a frozen or restarting database (the usual cause) commits nothing anywhere, so those answers are still
 * true and cached pulls go on; in a partition that cuts only this instance off, this is its staleness bound. */
#define LOST_GRACE_SECONDS 30

typedef struct {
    char *key;               /* kind, repo, NUL, ref */
    size_t key_len, charged; /* bytes counted against MAX_BYTES */
    uint64_t epoch;          /* berth_cache_epoch() taken before the read that produced the value */
    time_t born;
    berth_cache_val_t val;
} entry_t;

static uint64_t slot_epoch[SLOTS];
static uint64_t global_epoch = 1;
static int enabled;
static time_t lost_at; /* the channel went down at (0: it is up, or never came up) */
static entry_t table[BUCKETS][WAYS];
static pthread_mutex_t locks[BUCKETS / 64];
static size_t bytes;
static uint64_t hits, misses;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    for (size_t i = 0; i < sizeof(locks) / sizeof(locks[0]); i++)
        pthread_mutex_init(&locks[i], NULL);
}

static uint64_t fnv(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static size_t slot_of(const char *repo)
{
    return fnv(repo, strlen(repo), 1469598103934665603ull) % SLOTS;
}

static char *make_key(berth_cache_kind_t kind, const char *repo, const char *ref, size_t *len)
{
    size_t rl = strlen(repo), fl = strlen(ref);
    char *k = malloc(rl + fl + 2);
    k[0] = (char)kind;
    memcpy(k + 1, repo, rl);
    k[1 + rl] = '\0';
    memcpy(k + 2 + rl, ref, fl);
    *len = rl + fl + 2;
    return k;
}

/* The slot's epoch and the global one in one word, so a put is checked against both as they were before its
 * read: a global invalidation (the channel came back, writes may have been missed) between a read and its put
 * must hide the value too. Equal words after 2^32 invalidations in between is not a case that occurs. */
uint64_t berth_cache_epoch(const char *repo)
{
    uint64_t slot = __atomic_load_n(&slot_epoch[slot_of(repo)], __ATOMIC_ACQUIRE);
    uint64_t global = __atomic_load_n(&global_epoch, __ATOMIC_ACQUIRE);
    return slot << 32 | (global & 0xffffffffu);
}

static void entry_clear(entry_t *e)
{
    if (e->key == NULL)
        return;
    __atomic_sub_fetch(&bytes, e->charged, __ATOMIC_RELAXED);
    free(e->key);
    berth_cache_val_dispose(&e->val);
    memset(e, 0, sizeof(*e));
}

double berth_cache_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void copy_val(berth_cache_val_t *dst, const berth_cache_val_t *src)
{
    memcpy(dst->digest, src->digest, sizeof(dst->digest));
    dst->len = src->len;
    dst->until = src->until;
    dst->media_type = src->media_type != NULL ? strdup(src->media_type) : NULL;
    dst->link = src->link != NULL ? strdup(src->link) : NULL;
    dst->content = NULL;
    if (src->content != NULL) {
        dst->content = malloc(src->len + 1);
        memcpy(dst->content, src->content, src->len);
        dst->content[src->len] = '\0';
    }
}

int berth_cache_get(berth_cache_kind_t kind, const char *repo, const char *ref, berth_cache_val_t *out)
{
    pthread_once(&once, init);
    if (!__atomic_load_n(&enabled, __ATOMIC_ACQUIRE))
        return 0;
    time_t lost = __atomic_load_n(&lost_at, __ATOMIC_ACQUIRE);
    if (lost != 0 && time(NULL) - lost > LOST_GRACE_SECONDS)
        return 0;
    size_t klen;
    char *key = make_key(kind, repo, ref, &klen);
    size_t b = fnv(key, klen, 1469598103934665603ull) % BUCKETS;
    uint64_t ep = berth_cache_epoch(repo);
    time_t now = time(NULL);
    int hit = 0;
    pthread_mutex_lock(&locks[b % (sizeof(locks) / sizeof(locks[0]))]);
    for (int w = 0; w < WAYS; w++) {
        entry_t *e = &table[b][w];
        if (e->key == NULL || e->key_len != klen || memcmp(e->key, key, klen) != 0)
            continue;
        if (e->epoch != ep || now - e->born > TTL_SECONDS || (e->val.until != 0 && berth_cache_now() >= e->val.until)) {
            entry_clear(e);
            break;
        }
        copy_val(out, &e->val);
        hit = 1;
        break;
    }
    pthread_mutex_unlock(&locks[b % (sizeof(locks) / sizeof(locks[0]))]);
    free(key);
    __atomic_add_fetch(hit ? &hits : &misses, 1, __ATOMIC_RELAXED);
    return hit;
}

void berth_cache_put(berth_cache_kind_t kind, const char *repo, const char *ref, uint64_t epoch, const berth_cache_val_t *val)
{
    pthread_once(&once, init);
    if (!__atomic_load_n(&enabled, __ATOMIC_ACQUIRE) || __atomic_load_n(&lost_at, __ATOMIC_ACQUIRE) != 0 ||
        (val->content != NULL && val->len > MAX_ITEM) || __atomic_load_n(&bytes, __ATOMIC_RELAXED) > MAX_BYTES)
        return;
    size_t klen;
    char *key = make_key(kind, repo, ref, &klen);
    size_t b = fnv(key, klen, 1469598103934665603ull) % BUCKETS;
    pthread_mutex_lock(&locks[b % (sizeof(locks) / sizeof(locks[0]))]);
    entry_t *victim = &table[b][0];
    for (int w = 0; w < WAYS; w++) {
        entry_t *e = &table[b][w];
        if (e->key == NULL || (e->key_len == klen && memcmp(e->key, key, klen) == 0)) {
            victim = e;
            break;
        }
        if (e->born < victim->born)
            victim = e;
    }
    entry_clear(victim);
    victim->key = key;
    victim->key_len = klen;
    victim->epoch = epoch;
    victim->born = time(NULL);
    copy_val(&victim->val, val);
    victim->charged = klen + (val->content != NULL ? val->len : 0);
    __atomic_add_fetch(&bytes, victim->charged, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&locks[b % (sizeof(locks) / sizeof(locks[0]))]);
}

static void (*also_invalidate)(const char *repo); /* __atomic */

void berth_cache_on_invalidate(void (*fn)(const char *repo))
{
    __atomic_store_n(&also_invalidate, fn, __ATOMIC_RELEASE);
}

void berth_cache_invalidate(const char *repo)
{
    if (repo == NULL)
        __atomic_add_fetch(&global_epoch, 1, __ATOMIC_ACQ_REL);
    else
        __atomic_add_fetch(&slot_epoch[slot_of(repo)], 1, __ATOMIC_ACQ_REL);
    void (*fn)(const char *) = __atomic_load_n(&also_invalidate, __ATOMIC_ACQUIRE);
    if (fn != NULL)
        fn(repo);
}

void berth_cache_set_enabled(int on)
{
    if (!on) { /* lost: the entries answer for LOST_GRACE_SECONDS more (first loss counts), nothing new is kept */
        time_t none = 0;
        __atomic_compare_exchange_n(&lost_at, &none, time(NULL), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return;
    }
    berth_cache_invalidate(NULL); /* notifications were missed while it was down: start from empty */
    __atomic_store_n(&lost_at, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&enabled, 1, __ATOMIC_RELEASE);
}

void berth_cache_val_dispose(berth_cache_val_t *v)
{
    free(v->media_type);
    free(v->content);
    free(v->link);
    v->media_type = v->content = v->link = NULL;
}

void berth_cache_stats(uint64_t *h, uint64_t *m, int *en)
{
    *h = __atomic_load_n(&hits, __ATOMIC_RELAXED);
    *m = __atomic_load_n(&misses, __ATOMIC_RELAXED);
    *en = __atomic_load_n(&enabled, __ATOMIC_RELAXED) && __atomic_load_n(&lost_at, __ATOMIC_RELAXED) == 0;
}
