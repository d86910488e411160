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
#include <sys/mman.h>
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
 * Logins that succeeded, remembered as HMAC(key drawn at start, stored hash, password): the gate decides a busy
 * credential afresh every auth.decision_ttl_seconds, and paying argon2 again each time cost 9 MiB and ~30 ms per
 * credential per window (a burst's peak memory held one). argon2 is a function of the stored string (salt and
 * parameters in it) and the password, so the same pair verified before verifies again; a changed password is
 * another stored string and misses. Only whole successful logins are kept (berth_password_remember, after the
 * account was found enabled), so a wrong password, or any password of a disabled account, always costs argon2:
 * the answer's timing tells a caller nothing it did not already know (an outside review timed a disabled
 * account's right password at 1 ms against 30 ms when argon2's success alone was kept). The account itself is
 * still read from the database at every re-check (gate.c). The key and the table are left out of core dumps.
 */
#define MEMO_SLOTS 256
#define MEMO_SECONDS 3600
typedef struct {
    unsigned char key[32];
    struct {
        unsigned char mac[32];
        time_t until; /* CLOCK_MONOTONIC seconds: a clock stepped back does not stretch it */
    } slot[MEMO_SLOTS];
} memo_t;
static memo_t *memo;                /* mmap'd: MADV_DONTDUMP */
static uint64_t by_argon2, by_memo; /* __atomic: verifications answered each way */
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static void memo_init(void)
{
    void *p = mmap(NULL, sizeof(memo_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    madvise(p, sizeof(memo_t), MADV_DONTDUMP);
    if (RAND_bytes(((memo_t *)p)->key, sizeof(((memo_t *)p)->key)) != 1) {
        munmap(p, sizeof(memo_t));
        return;
    }
    memo = p;
}

static time_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static int memo_mac(unsigned char mac[32], const char *encoded, const char *password)
{
    pthread_once(&memo_once, memo_init);
    size_t el = strlen(encoded), pl = strlen(password);
    unsigned char *msg = malloc(el + 1 + pl);
    if (memo == NULL || msg == NULL) {
        free(msg);
        return -1;
    }
    memcpy(msg, encoded, el);
    msg[el] = 0; /* separates them: no (hash, password) pair spells another */
    memcpy(msg + el + 1, password, pl);
    unsigned int n = 0;
    int ok = HMAC(EVP_sha256(), memo->key, sizeof(memo->key), msg, el + 1 + pl, mac, &n) != NULL && n == 32;
    OPENSSL_cleanse(msg, el + 1 + pl);
    free(msg);
    return ok ? 0 : -1;
}

static unsigned memo_index(const unsigned char mac[32])
{
    return (mac[0] | (unsigned)mac[1] << 8) % MEMO_SLOTS;
}

int berth_password_verify(const char *encoded, const char *password)
{
    if (!berth_offload_here() || encoded == NULL || strncmp(encoded, "$argon2id$", 10) != 0)
        return 0;
    unsigned char mac[32];
    if (memo_mac(mac, encoded, password) == 0) {
        pthread_mutex_lock(&memo_mu);
        unsigned i = memo_index(mac);
        int hit = CRYPTO_memcmp(memo->slot[i].mac, mac, 32) == 0 && memo->slot[i].until > now_s();
        pthread_mutex_unlock(&memo_mu);
        OPENSSL_cleanse(mac, sizeof(mac));
        if (hit) {
            __atomic_add_fetch(&by_memo, 1, __ATOMIC_RELAXED);
            return 1;
        }
    }
    __atomic_add_fetch(&by_argon2, 1, __ATOMIC_RELAXED);
    enter();
    int ok = argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
    sem_post(&slots);
    return ok;
}

void berth_password_remember(const char *encoded, const char *password)
{
    unsigned char mac[32];
    if (encoded == NULL || memo_mac(mac, encoded, password) != 0)
        return;
    pthread_mutex_lock(&memo_mu);
    unsigned i = memo_index(mac);
    memcpy(memo->slot[i].mac, mac, 32);
    memo->slot[i].until = now_s() + MEMO_SECONDS;
    pthread_mutex_unlock(&memo_mu);
    OPENSSL_cleanse(mac, sizeof(mac));
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
