#include "auth/password.h"

#include "auth/offload.h"

#include <argon2.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One of OWASP's equivalent argon2id settings (m=9 MiB, t=4, p=1), chosen for the smallest memory per
 * concurrent login: the server's whole footprint is meant to stay under 64 MiB */
#define T_COST 4
#define M_COST_KIB 9216
#define PARALLELISM 1
#define SALT_LEN 16
#define HASH_LEN 32

/* Each running hash holds M_COST_KIB of memory: at most this many run at once, whatever the login storm. */
#define MAX_CONCURRENT 2
static sem_t slots;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
static void slots_init(void)
{
    sem_init(&slots, 0, MAX_CONCURRENT);
}

static void enter(void)
{
    pthread_once(&slots_once, slots_init);
    while (sem_wait(&slots) != 0)
        ;
}

int berth_password_hash(char out[BERTH_PASSWORD_HASH_MAX], const char *password)
{
    unsigned char salt[SALT_LEN];
    if (!berth_offload_here() || RAND_bytes(salt, sizeof(salt)) != 1)
        return -1;
    enter();
    int rc = argon2id_hash_encoded(T_COST, M_COST_KIB, PARALLELISM, password, strlen(password), salt, sizeof(salt), HASH_LEN, out,
                                   BERTH_PASSWORD_HASH_MAX);
    sem_post(&slots);
    return rc == ARGON2_OK ? 0 : -1;
}

/*
 * Verifications that succeeded, remembered as HMAC(key drawn at start, stored hash, password): the gate decides
 * a busy credential afresh every auth.decision_ttl_seconds, and paying argon2 again each time cost 9 MiB and
 * ~30 ms per credential per window (a burst's peak memory held one). argon2 is a function of the stored string
 * (salt and parameters in it) and the password, so the same pair verified before verifies again; a changed
 * password is another stored string and misses. Only successes are kept, so a wrong password always costs
 * argon2 (and its back-off) and a hit tells a caller nothing it did not already know. The account itself is
 * still read from the database at every re-check (gate.c): a deleted or disabled account stops as before.
 */
#define MEMO_SLOTS 256
#define MEMO_SECONDS 3600
static struct {
    unsigned char mac[32];
    time_t until;
} memo[MEMO_SLOTS];
static uint64_t by_argon2, by_memo; /* __atomic: verifications answered each way */
static unsigned char memo_key[32];
static int memo_ready;
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static void memo_init(void)
{
    memo_ready = RAND_bytes(memo_key, sizeof(memo_key)) == 1;
}

static int memo_mac(unsigned char mac[32], const char *encoded, const char *password)
{
    pthread_once(&memo_once, memo_init);
    size_t el = strlen(encoded), pl = strlen(password);
    unsigned char *msg = malloc(el + 1 + pl);
    if (!memo_ready || msg == NULL) {
        free(msg);
        return -1;
    }
    memcpy(msg, encoded, el);
    msg[el] = 0; /* separates them: no (hash, password) pair spells another */
    memcpy(msg + el + 1, password, pl);
    unsigned int n = 0;
    int ok = HMAC(EVP_sha256(), memo_key, sizeof(memo_key), msg, el + 1 + pl, mac, &n) != NULL && n == 32;
    OPENSSL_cleanse(msg, el + 1 + pl);
    free(msg);
    return ok ? 0 : -1;
}

static int memo_find(const unsigned char mac[32])
{
    unsigned i = (mac[0] | (unsigned)mac[1] << 8) % MEMO_SLOTS;
    pthread_mutex_lock(&memo_mu);
    int hit = CRYPTO_memcmp(memo[i].mac, mac, 32) == 0 && memo[i].until > time(NULL);
    pthread_mutex_unlock(&memo_mu);
    return hit;
}

static void memo_keep(const unsigned char mac[32])
{
    unsigned i = (mac[0] | (unsigned)mac[1] << 8) % MEMO_SLOTS;
    pthread_mutex_lock(&memo_mu);
    memcpy(memo[i].mac, mac, 32);
    memo[i].until = time(NULL) + MEMO_SECONDS;
    pthread_mutex_unlock(&memo_mu);
}

int berth_password_verify(const char *encoded, const char *password)
{
    if (!berth_offload_here() || encoded == NULL || strncmp(encoded, "$argon2id$", 10) != 0)
        return 0;
    unsigned char mac[32];
    int have_mac = memo_mac(mac, encoded, password) == 0;
    if (have_mac && memo_find(mac)) {
        __atomic_add_fetch(&by_memo, 1, __ATOMIC_RELAXED);
        return 1;
    }
    __atomic_add_fetch(&by_argon2, 1, __ATOMIC_RELAXED);
    enter();
    int ok = argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
    sem_post(&slots);
    if (ok && have_mac)
        memo_keep(mac);
    OPENSSL_cleanse(mac, sizeof(mac));
    return ok;
}

void berth_password_stats(uint64_t *argon2, uint64_t *remembered)
{
    *argon2 = __atomic_load_n(&by_argon2, __ATOMIC_RELAXED);
    *remembered = __atomic_load_n(&by_memo, __ATOMIC_RELAXED);
}

const char *berth_password_policy(const char *p)
{
    size_t n = strlen(p);
    int upper = 0, lower = 0, digit = 0;
    for (size_t i = 0; i < n; i++) {
        upper |= p[i] >= 'A' && p[i] <= 'Z';
        lower |= p[i] >= 'a' && p[i] <= 'z';
        digit |= p[i] >= '0' && p[i] <= '9';
    }
    if (n < 8 || n > 128)
        return "the password must be 8 to 128 characters long";
    if (!upper || !lower || !digit)
        return "the password needs at least one uppercase letter, one lowercase letter and one digit";
    return NULL;
}
