/* Local-user passwords: argon2id hashes (PHC string format) and Harbor's password policy. */
#ifndef BERTH_AUTH_PASSWORD_H
#define BERTH_AUTH_PASSWORD_H

#include <stddef.h>
#include <stdint.h>

#define BERTH_PASSWORD_HASH_MAX 128

/**
 * Hash with argon2id (t=4, m=9 MiB, p=1, 16-byte random salt) into `out` ("$argon2id$v=19$..."). Slow by
 * design: call it on a worker thread. Returns 0 or -1.
 */
int berth_password_hash(char out[BERTH_PASSWORD_HASH_MAX], const char *password);
/**
 * 1 if `password` matches `encoded` (constant-time compare inside libargon2), else 0. A pair given to
 * berth_password_remember within the last hour is answered from memory without argon2 (an HMAC under a
 * per-process key); anything else runs argon2.
 */
int berth_password_verify(const char *encoded, const char *password);
/** After a whole login succeeded (the account found enabled): `password` verifies against `encoded` from memory. */
void berth_password_remember(const char *encoded, const char *password);
/** Verifications so far that ran argon2, and those answered from memory. */
void berth_password_stats(uint64_t *argon2, uint64_t *remembered);
/**
 * Harbor's policy: 8-128 characters with at least one uppercase letter, one lowercase letter and one digit.
 * Returns NULL when acceptable, else a sentence saying what is missing.
 */
const char *berth_password_policy(const char *password);

#endif
