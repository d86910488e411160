/* sha256 runs on OpenSSL's SHA256_CTX (deprecated in 3.0, still shipped): unlike an EVP_MD_CTX its state is a
 * public struct, so an upload's running hash can be saved in PostgreSQL and resumed by another berthd */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "core/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_berth_hash_t {
    EVP_MD_CTX *ctx; /* sha512 */
    SHA256_CTX sha;  /* sha256 */
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
    h->ctx = NULL;
    if (alg == BERTH_DIGEST_SHA256) {
        SHA256_Init(&h->sha);
        return h;
    }
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx == NULL || !EVP_DigestInit_ex(h->ctx, EVP_sha512(), NULL))
        abort();
    return h;
}

void berth_hash_update(berth_hash_t *h, const void *data, size_t len)
{
    if (h->ctx == NULL)
        SHA256_Update(&h->sha, data, len);
    else
        EVP_DigestUpdate(h->ctx, data, len);
}

/* "s1:" h[8] Nl Nh (8 hex digits each), num (2), the 64-byte block buffer (128) */
#define SAVED_LEN (3 + 10 * 8 + 2 + 128)

int berth_hash_save(const berth_hash_t *h, char *out, size_t outsz)
{
    if (h->ctx != NULL || outsz < SAVED_LEN + 1 || h->sha.md_len != SHA256_DIGEST_LENGTH)
        return -1;
    size_t n = (size_t)snprintf(out, outsz, "s1:");
    for (int i = 0; i < 8; i++)
        n += (size_t)snprintf(out + n, outsz - n, "%08x", (unsigned)h->sha.h[i]);
    n += (size_t)snprintf(out + n, outsz - n, "%08x%08x%02x", (unsigned)h->sha.Nl, (unsigned)h->sha.Nh, h->sha.num);
    const unsigned char *b = (const unsigned char *)h->sha.data;
    for (int i = 0; i < SHA256_CBLOCK; i++)
        n += (size_t)snprintf(out + n, outsz - n, "%02x", b[i]);
    return 0;
}

static int hexval(const char *p, int digits, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < digits; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

berth_hash_t *berth_hash_load(const char *text)
{
    if (text == NULL || strlen(text) != SAVED_LEN || strncmp(text, "s1:", 3) != 0)
        return NULL;
    berth_hash_t *h = berth_hash_new(BERTH_DIGEST_SHA256);
    const char *p = text + 3;
    unsigned v[10] = {0}, num = 0;
    int bad = 0;
    for (int i = 0; i < 10; i++, p += 8)
        bad |= hexval(p, 8, &v[i]);
    bad |= hexval(p, 2, &num);
    p += 2;
    unsigned char *b = (unsigned char *)h->sha.data;
    for (int i = 0; i < SHA256_CBLOCK && !bad; i++, p += 2) {
        unsigned x = 0;
        bad |= hexval(p, 2, &x);
        b[i] = (unsigned char)x;
    }
    if (bad || num >= SHA256_CBLOCK || ((v[8] >> 3) & 63) != num) { /* the bit count and the buffered bytes agree */
        berth_hash_free(h);
        return NULL;
    }
    for (int i = 0; i < 8; i++)
        h->sha.h[i] = v[i];
    h->sha.Nl = v[8];
    h->sha.Nh = v[9];
    h->sha.num = num;
    return h;
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
    if (h->ctx == NULL) {
        SHA256_CTX copy = h->sha;
        SHA256_Final(md, &copy);
        format(out, h->alg, md, SHA256_DIGEST_LENGTH);
        return;
    }
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
