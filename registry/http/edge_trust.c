#include "registry/http/edge_trust.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <string.h>

#define SECRET_BYTES 16
static char secret[2 * SECRET_BYTES + 1]; /* written once at start, before any listener or the edge exists */

int berth_edge_trust_init(void)
{
    unsigned char raw[SECRET_BYTES];
    if (secret[0] != '\0')
        return 0;
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -1;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(raw); i++) {
        secret[2 * i] = hex[raw[i] >> 4];
        secret[2 * i + 1] = hex[raw[i] & 15];
    }
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

const char *berth_edge_trust_secret(void)
{
    return secret;
}

int berth_edge_trusted(const char *value, size_t len)
{
    return secret[0] != '\0' && value != NULL && len == 2 * SECRET_BYTES && CRYPTO_memcmp(value, secret, len) == 0;
}
