/* Content digests: "algorithm:encoded" parsing and streaming hashing (sha256, sha512). */
#ifndef BERTH_CORE_DIGEST_H
#define BERTH_CORE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef enum { BERTH_DIGEST_SHA256 = 0, BERTH_DIGEST_SHA512 = 1 } berth_digest_alg_t;

#define BERTH_DIGEST_MAX 136 /* "sha512:" + 128 hex + NUL */

typedef struct st_berth_digest_t {
    berth_digest_alg_t alg;
    char str[BERTH_DIGEST_MAX]; /* canonical "sha256:<hex>"; the struct is safe to copy by value */
} berth_digest_t;

/** The encoded part of a digest (after the colon). */
static inline const char *berth_digest_hex(const berth_digest_t *d)
{
    return d->str + 7; /* "sha256:" and "sha512:" are both 7 bytes */
}

/**
 * Parse and validate a digest (lowercase hex of the exact length for its algorithm).
 * Returns 0, or BERTH_EDIGEST with err set to DIGEST_INVALID (unknown algorithm or bad encoding).
 */
int berth_digest_parse(berth_digest_t *out, const char *s, size_t len, berth_err_t *err);

/** Streaming hash (OpenSSL's SHA256_CTX for sha256, an EVP_MD_CTX for sha512). */
typedef struct st_berth_hash_t berth_hash_t;
berth_hash_t *berth_hash_new(berth_digest_alg_t alg);
void berth_hash_update(berth_hash_t *h, const void *data, size_t len);
/** Produce the digest of everything fed so far without ending the stream. */
void berth_hash_peek(berth_hash_t *h, berth_digest_t *out);
void berth_hash_free(berth_hash_t *h);
/** Save a sha256 state as text (out: at least 214 bytes) so another process resumes it; -1 for sha512. */
int berth_hash_save(const berth_hash_t *h, char *out, size_t outsz);
#define BERTH_HASH_SAVED_MAX 214
/** A sha256 state saved by berth_hash_save, or NULL if `text` is not one. */
berth_hash_t *berth_hash_load(const char *text);
/** One-shot digest of a buffer. */
void berth_digest_of(berth_digest_t *out, berth_digest_alg_t alg, const void *data, size_t len);
/** Constant-time comparison of two digests. */
int berth_digest_equal(const berth_digest_t *a, const berth_digest_t *b);

#endif
