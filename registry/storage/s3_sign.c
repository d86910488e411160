#include "registry/storage/s3_sign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

int berth_s3_uri_encode(const char *in, int keep_slash, char *out, size_t outsz)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0'; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
                    *p == '.' || *p == '~' || (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= outsz)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o >= outsz)
        return -1;
    out[o] = '\0';
    return 0;
}

static void hmac(const unsigned char *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int n = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

void berth_s3_signing_key(const char *secret, const char *date8, const char *region, const char *service, unsigned char out[32])
{
    char k0[256];
    snprintf(k0, sizeof(k0), "AWS4%s", secret);
    unsigned char a[32], b[32];
    hmac((const unsigned char *)k0, strlen(k0), date8, a);
    hmac(a, 32, region, b);
    hmac(b, 32, service, a);
    hmac(a, 32, "aws4_request", out);
    OPENSSL_cleanse(k0, sizeof(k0));
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
}

void berth_s3_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 32;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    to_hex(md, 32, out);
}

void berth_s3_sign_canonical(const char *canonical, const char *secret, const char *region, const char *amz_date, char out[65])
{
    char date8[9], creq_hash[65], sts[512];
    snprintf(date8, sizeof(date8), "%.8s", amz_date);
    berth_s3_sha256_hex(canonical, strlen(canonical), creq_hash);
    snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", amz_date, date8, region, creq_hash);
    unsigned char key[32], sig[32];
    berth_s3_signing_key(secret, date8, region, "s3", key);
    hmac(key, 32, sts, sig);
    OPENSSL_cleanse(key, sizeof(key));
    to_hex(sig, 32, out);
}

int berth_s3_presign_url(const berth_s3_presign_t *p, char *out, size_t outsz)
{
    struct tm tm;
    gmtime_r(&p->now, &tm);
    char amz_date[17], date8[9];
    strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
    snprintf(date8, sizeof(date8), "%.8s", amz_date);
    char cred[512], cred_enc[768];
    snprintf(cred, sizeof(cred), "%s/%s/%s/s3/aws4_request", p->access_key, date8, p->region);
    if (berth_s3_uri_encode(cred, 0, cred_enc, sizeof(cred_enc)) != 0)
        return -1;
    /* the query parameters in their sorted (canonical) order, which is also the URL's order */
    char query[1024];
    int n =
        snprintf(query, sizeof(query),
                 "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%ld&X-Amz-SignedHeaders=host",
                 cred_enc, amz_date, p->expires);
    if (n < 0 || (size_t)n >= sizeof(query))
        return -1;
    size_t clen = strlen(p->method) + strlen(p->path) + strlen(query) + strlen(p->host) + 64;
    char canonical[4096];
    if (clen >= sizeof(canonical))
        return -1;
    snprintf(canonical, sizeof(canonical), "%s\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", p->method, p->path, query, p->host);
    char sig[65];
    berth_s3_sign_canonical(canonical, p->secret_key, p->region, amz_date, sig);
    n = snprintf(out, outsz, "%s://%s%s?%s&X-Amz-Signature=%s", p->scheme, p->host, p->path, query, sig);
    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

int berth_s3_authorization(const char *method, const char *path, const char *query, const char *const *headers, size_t nheaders,
                           const char *payload_hash, const char *access_key, const char *secret_key, const char *region,
                           const char *amz_date, char *out, size_t outsz)
{
    char canonical[8192], names[1024];
    size_t c = 0, nl = 0;
    int n = snprintf(canonical, sizeof(canonical), "%s\n%s\n%s\n", method, path, query != NULL ? query : "");
    if (n < 0 || (size_t)n >= sizeof(canonical))
        return -1;
    c = (size_t)n;
    names[0] = '\0';
    for (size_t i = 0; i < nheaders; i++) {
        n = snprintf(canonical + c, sizeof(canonical) - c, "%s\n", headers[i]);
        if (n < 0 || (size_t)n >= sizeof(canonical) - c)
            return -1;
        c += (size_t)n;
        size_t name_len = strcspn(headers[i], ":");
        n = snprintf(names + nl, sizeof(names) - nl, "%s%.*s", i > 0 ? ";" : "", (int)name_len, headers[i]);
        if (n < 0 || (size_t)n >= sizeof(names) - nl)
            return -1;
        nl += (size_t)n;
    }
    n = snprintf(canonical + c, sizeof(canonical) - c, "\n%s\n%s", names, payload_hash);
    if (n < 0 || (size_t)n >= sizeof(canonical) - c)
        return -1;
    char sig[65];
    berth_s3_sign_canonical(canonical, secret_key, region, amz_date, sig);
    n = snprintf(out, outsz, "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/s3/aws4_request, SignedHeaders=%s, Signature=%s", access_key,
                 amz_date, region, names, sig);
    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}
