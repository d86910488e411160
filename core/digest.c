#include "core/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_berth_hash_t {
    EVP_MD_CTX *ctx;
    berth_digest_alg_t alg;
};

static const struct {
    const char *name;
    size_t name_len, hex_len;
} algs[] = {{"sha256", 6, 64}, {"sha512", 6, 128}};

int berth_digest_parse(berth_digest_t *out, const char *s, size_t len, berth_err_t *err)
{
    const char *colon = memchr(s, ':', len);
    if (colon == NULL)
        return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "digest has no algorithm");
    size_t alen = (size_t)(colon - s), hlen = len - alen - 1;
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        if (alen != algs[i].name_len || memcmp(s, algs[i].name, alen) != 0)
            continue;
        if (hlen != algs[i].hex_len)
            return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "digest has the wrong length for %s", algs[i].name);
        for (size_t j = 0; j < hlen; j++) {
            char c = colon[1 + j];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "digest is not lowercase hex");
        }
        out->alg = (berth_digest_alg_t)i;
        memcpy(out->str, s, len);
        out->str[len] = '\0';
        return 0;
    }
    return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "unsupported digest algorithm");
}

berth_hash_t *berth_hash_new(berth_digest_alg_t alg)
{
    berth_hash_t *h = malloc(sizeof(*h));
    if (h == NULL)
        abort();
    h->alg = alg;
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx == NULL || !EVP_DigestInit_ex(h->ctx, alg == BERTH_DIGEST_SHA256 ? EVP_sha256() : EVP_sha512(), NULL))
        abort();
    return h;
}

void berth_hash_update(berth_hash_t *h, const void *data, size_t len)
{
    EVP_DigestUpdate(h->ctx, data, len);
}

static void format(berth_digest_t *out, berth_digest_alg_t alg, const unsigned char *md, unsigned mdlen)
{
    static const char hexd[] = "0123456789abcdef";
    size_t n = (size_t)snprintf(out->str, sizeof(out->str), "%s:", algs[alg].name);
    for (unsigned i = 0; i < mdlen; i++) {
        out->str[n++] = hexd[md[i] >> 4];
        out->str[n++] = hexd[md[i] & 15];
    }
    out->str[n] = '\0';
    out->alg = alg;
}

void berth_hash_peek(berth_hash_t *h, berth_digest_t *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *copy = EVP_MD_CTX_new();
    EVP_MD_CTX_copy_ex(copy, h->ctx);
    EVP_DigestFinal_ex(copy, md, &mdlen);
    EVP_MD_CTX_free(copy);
    format(out, h->alg, md, mdlen);
}

void berth_hash_free(berth_hash_t *h)
{
    if (h == NULL)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void berth_digest_of(berth_digest_t *out, berth_digest_alg_t alg, const void *data, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, alg == BERTH_DIGEST_SHA256 ? EVP_sha256() : EVP_sha512(), NULL);
    format(out, alg, md, mdlen);
}

int berth_digest_equal(const berth_digest_t *a, const berth_digest_t *b)
{
    size_t la = strlen(a->str), lb = strlen(b->str);
    return la == lb && CRYPTO_memcmp(a->str, b->str, la) == 0;
}
