/*
 * Registry tokens (Docker token spec): ES256 JWTs signed with a key berthd generates on first start, with
 * `kid` (libtrust key id) and `x5c` (the self-signed certificate) in the header, so that a stock Distribution
 * registry configured with that certificate as rootcertbundle accepts them.
 */
#ifndef BERTH_AUTH_TOKEN_H
#define BERTH_AUTH_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "auth/scope.h"
#include "core/err.h"

#define BERTH_TOKEN_LEEWAY 60 /* seconds of clock skew tolerated on exp and nbf */

typedef struct st_berth_token_keys_t berth_token_keys_t;

/**
 * Load `dir`/token.key and `dir`/token.crt, generating them (P-256 key for "ES256", RSA-3072 for "RS256";
 * 10-year self-signed certificate, key file mode 0600, written atomically) when absent. `alg` NULL means ES256;
 * an existing key of the other kind is refused. Returns 0 or BERTH_ERROR with err set.
 */
int berth_token_keys_load(berth_token_keys_t **out, const char *dir, const char *alg, berth_err_t *err);
void berth_token_keys_free(berth_token_keys_t *k);
/** The public key as PEM (what verification uses). */
const char *berth_token_public_pem(const berth_token_keys_t *k);
/** The libtrust key id of the public key ("ABCD:EFGH:..."). */
const char *berth_token_kid(const berth_token_keys_t *k);

typedef struct st_berth_token_claims_t {
    char subject[256];
    int64_t account_id; /* the subject's account row (berth_aid), 0 for anonymous or tokens without it */
    int64_t issued_at, expires_at;
    berth_scope_t *access; /* malloc'd */
    size_t naccess;
} berth_token_claims_t;
void berth_token_claims_dispose(berth_token_claims_t *c);

/**
 * Sign a token for `subject` (account row `account_id`, 0 for anonymous: a re-created account of the same name is
 * another account) granting exactly `access`. Returns a malloc'd JWT or NULL.
 */
char *berth_token_issue(const berth_token_keys_t *k, const char *issuer, const char *audience, const char *subject,
                        int64_t account_id, const berth_scope_t *access, size_t naccess, int64_t now, int ttl_seconds);
/**
 * Verify signature (the keys' algorithm only: any other alg, including "none" and HS256 keyed with our public key,
 * is refused), issuer, audience, exp and nbf with BERTH_TOKEN_LEEWAY. Returns 0 with *out filled (dispose it), or
 * BERTH_EUNAUTH with the reason in err (for the log; clients only ever see invalid_token).
 */
int berth_token_verify(const berth_token_keys_t *k, const char *token, const char *issuer, const char *audience, int64_t now,
                       berth_token_claims_t *out, berth_err_t *err);
/** Actions the claims grant on (type, name). */
unsigned berth_token_allowed(const berth_token_claims_t *c, const char *type, const char *name);

#endif
