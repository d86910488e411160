#include "auth/backoff.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define KEY_MAX 320 /* a 255-byte name, '\n', a 63-byte address */
#define BUCKETS (BERTH_BACKOFF_ENTRIES * 2)
#define EVICT_SCAN 16   /* how far from the LRU end eviction looks for an entry not in back-off */
#define ANY_ADDRESS "*" /* the address part of a name's all-addresses entry (no client address is "*") */

typedef struct {
    char key[KEY_MAX + 1];
    int failures;
    int64_t until;   /* CLOCK_MONOTONIC ms: whole seconds made a 1 s back-off last anything from 0 to 1 s */
    int next;        /* bucket chain */
    int prev, newer; /* LRU list: prev = older neighbour, newer = newer neighbour */
} entry_t;

static entry_t entries[BERTH_BACKOFF_ENTRIES];
static int buckets[BUCKETS];
static int oldest = -1, newest = -1, nused, nfree_next; /* entries[0 .. nfree_next) have been used at least once */
static int free_list = -1;
static uint64_t seed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void init(void)
{
    for (int i = 0; i < BUCKETS; i++)
        buckets[i] = -1;
    if (RAND_bytes((unsigned char *)&seed, sizeof(seed)) != 1) /* chains an attacker cannot aim at */
        seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
}

/* name case-folded (ASCII: what LDAP's caseIgnoreMatch folds for the usual uid values) + '\n' + address */
static void make_key(char out[KEY_MAX + 1], const char *name, const char *remote)
{
    size_t o = 0;
    for (const char *p = name; *p && o < 255; p++)
        out[o++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
    out[o++] = '\n';
    snprintf(out + o, KEY_MAX + 1 - o, "%.63s", remote != NULL ? remote : "");
}

static unsigned bucket_of(const char *key)
{
    uint64_t h = 14695981039346656037ull ^ seed;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (unsigned)((h ^ (h >> 32)) % BUCKETS);
}

static int find(const char *key)
{
    for (int i = buckets[bucket_of(key)]; i >= 0; i = entries[i].next)
        if (strcmp(entries[i].key, key) == 0)
            return i;
    return -1;
}

static void lru_unlink(int i)
{
    entry_t *e = &entries[i];
    if (e->prev >= 0)
        entries[e->prev].newer = e->newer;
    else
        oldest = e->newer;
    if (e->newer >= 0)
        entries[e->newer].prev = e->prev;
    else
        newest = e->prev;
}

static void lru_push(int i)
{
    entries[i].prev = newest;
    entries[i].newer = -1;
    if (newest >= 0)
        entries[newest].newer = i;
    newest = i;
    if (oldest < 0)
        oldest = i;
}

static void drop(int i)
{
    int *pp = &buckets[bucket_of(entries[i].key)];
    while (*pp != i)
        pp = &entries[*pp].next;
    *pp = entries[i].next;
    lru_unlink(i);
    entries[i].next = free_list;
    free_list = i;
    nused--;
}

/* A free entry; when the table is full, the least recently used one that is not holding anyone back */
static int take(int64_t now)
{
    if (free_list < 0 && nfree_next < BERTH_BACKOFF_ENTRIES) {
        entries[nfree_next].next = free_list;
        free_list = nfree_next++;
    }
    if (free_list < 0) {
        int victim = oldest;
        for (int i = oldest, n = 0; i >= 0 && n < EVICT_SCAN; i = entries[i].newer, n++)
            if (entries[i].until <= now) {
                victim = i;
                break;
            }
        drop(victim);
    }
    int i = free_list;
    free_list = entries[i].next;
    return i;
}

/* whole seconds, rounded up: what Retry-After says */
static long wait_locked(const char *key, int64_t now)
{
    int i = find(key);
    return i >= 0 && entries[i].until > now ? (long)((entries[i].until - now + 999) / 1000) : 0;
}

static void record_locked(const char key[KEY_MAX + 1], int ok, int free_failures, int64_t now)
{
    int i = find(key);
    if (ok) {
        if (i >= 0)
            drop(i);
        return;
    }
    if (i < 0) {
        i = take(now);
        entry_t *e = &entries[i];
        memcpy(e->key, key, KEY_MAX + 1);
        e->failures = 0;
        e->until = 0;
        unsigned b = bucket_of(key);
        e->next = buckets[b];
        buckets[b] = i;
        lru_push(i);
        nused++;
    } else {
        lru_unlink(i);
        lru_push(i);
    }
    entry_t *e = &entries[i];
    if (++e->failures >= free_failures) {
        int shift = e->failures - free_failures;
        long backoff = shift >= 9 ? BERTH_BACKOFF_MAX_SECONDS : 1L << shift;
        e->until = now + 1000 * (backoff < BERTH_BACKOFF_MAX_SECONDS ? backoff : BERTH_BACKOFF_MAX_SECONDS);
    }
}

/* Both keys of an attempt: (name, address) and (name, any address); the lock is taken */
static void lock_keys(char addr_key[KEY_MAX + 1], char any_key[KEY_MAX + 1], const char *name, const char *remote)
{
    make_key(addr_key, name, remote);
    make_key(any_key, name, ANY_ADDRESS);
    pthread_once(&once, init);
    pthread_mutex_lock(&mu);
}

long berth_backoff_wait(const char *name, const char *remote)
{
    char k1[KEY_MAX + 1], k2[KEY_MAX + 1];
    int64_t now = now_ms();
    lock_keys(k1, k2, name, remote);
    long w1 = wait_locked(k1, now), w2 = wait_locked(k2, now);
    pthread_mutex_unlock(&mu);
    return w1 > w2 ? w1 : w2;
}

void berth_backoff_record(const char *name, const char *remote, int ok)
{
    char k1[KEY_MAX + 1], k2[KEY_MAX + 1];
    int64_t now = now_ms();
    lock_keys(k1, k2, name, remote);
    record_locked(k1, ok, BERTH_BACKOFF_FREE, now);
    record_locked(k2, ok, BERTH_BACKOFF_FREE_ANY, now);
    pthread_mutex_unlock(&mu);
}

int berth_backoff_size(void)
{
    pthread_mutex_lock(&mu);
    int n = nused;
    pthread_mutex_unlock(&mu);
    return n;
}
