#include "registry/service/upload_limits.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/*
 * One counter per key ("p:<principal>", "a:<address>") with streams in flight. A key lives only while its count
 * is above zero and every stream holds at most two, so twice the listener's connections is always enough (the
 * table never fills); it is scanned linearly under one mutex, once per upload request, which costs nothing next
 * to the body.
 */
#define KEY_MAX 300

typedef struct {
    char key[KEY_MAX];
    int count;
} counter_t;

static counter_t *counters; /* NULL until configured: no limits */
static size_t nkeys;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int per_principal, per_address, max_held, held; /* held: streams in flight, all callers */

void berth_upload_limits_configure(int principal, int address, int max_streams, int max_total)
{
    max_held = max_total > 0 && max_total < max_streams ? max_total : max_streams;
    /* one principal never holds more than half of all streams: with a small cap (s3: half the database pool) the
     * configured share could exceed the cap, and one pusher's stalled bodies would turn every other push into 429 */
    int half = max_held / 2 > 0 ? max_held / 2 : 1;
    per_principal = principal < half ? principal : half;
    per_address = address;
    nkeys = 2 * (size_t)max_streams + 2;
    counters = calloc(nkeys, sizeof(*counters)); /* lives as long as the upload listener, i.e. the process */
}

/* The counter for key, or a free one claimed for it (NULL when the table is full); mu held. */
static counter_t *find(const char *key, int create)
{
    counter_t *free_slot = NULL;
    for (size_t i = 0; i < nkeys; i++) {
        if (counters[i].count > 0 && strcmp(counters[i].key, key) == 0)
            return &counters[i];
        if (counters[i].count == 0 && free_slot == NULL)
            free_slot = &counters[i];
    }
    if (!create || free_slot == NULL)
        return NULL;
    snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
    return free_slot;
}

static void key_of(char out[KEY_MAX], char kind, const char *v)
{
    snprintf(out, KEY_MAX, "%c:%s", kind, v != NULL ? v : "");
}

int berth_upload_limits_acquire(const char *principal, const char *address)
{
    char pk[KEY_MAX], ak[KEY_MAX];
    int use_p = principal != NULL && principal[0] != '\0', use_a = address != NULL && address[0] != '\0';
    if (counters == NULL)
        return 0;
    key_of(pk, 'p', principal);
    key_of(ak, 'a', address);
    pthread_mutex_lock(&mu);
    if (held >= max_held) {
        pthread_mutex_unlock(&mu);
        return BERTH_ERETRY;
    }
    counter_t *p = use_p ? find(pk, 1) : NULL;
    int ok = !use_p || (p != NULL && p->count < per_principal);
    if (ok && use_p)
        p->count++; /* claimed before the address lookup, so both cannot take the same free slot */
    counter_t *a = ok && use_a ? find(ak, 1) : NULL;
    if (ok && use_a && (a == NULL || a->count >= per_address)) {
        ok = 0;
        if (use_p)
            p->count--;
    } else if (ok && use_a) {
        a->count++;
    }
    held += ok;
    pthread_mutex_unlock(&mu);
    return ok ? 0 : BERTH_ERETRY;
}

void berth_upload_limits_release(const char *principal, const char *address)
{
    char pk[KEY_MAX], ak[KEY_MAX];
    if (counters == NULL)
        return;
    key_of(pk, 'p', principal);
    key_of(ak, 'a', address);
    pthread_mutex_lock(&mu);
    counter_t *p = principal != NULL && principal[0] != '\0' ? find(pk, 0) : NULL;
    counter_t *a = address != NULL && address[0] != '\0' ? find(ak, 0) : NULL;
    if (p != NULL)
        p->count--;
    if (a != NULL)
        a->count--;
    held--;
    pthread_mutex_unlock(&mu);
}
