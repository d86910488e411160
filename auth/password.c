#include "auth/password.h"

#include "auth/offload.h"

#include <argon2.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

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

int berth_password_verify(const char *encoded, const char *password)
{
    if (!berth_offload_here() || encoded == NULL || strncmp(encoded, "$argon2id$", 10) != 0)
        return 0;
    enter();
    int ok = argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
    sem_post(&slots);
    return ok;
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
