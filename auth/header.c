#include "auth/header.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

#include "core/utf8.h"

static int b64_value(char c)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c != '\0' ? strchr(alphabet, c) : NULL;
    return p != NULL ? (int)(p - alphabet) : -1;
}

/* Canonical base64 only: one spelling per credential, so one login-cache entry and one edge link name each
 * (EVP_DecodeBlock takes whitespace and ignores the bits a padded end leaves unused) */
static int b64_decode(const char *in, size_t len, unsigned char *out, size_t outsz, size_t *out_len)
{
    if (len == 0 || len % 4 != 0 || (len / 4) * 3 > outsz)
        return -1;
    size_t pad = (in[len - 1] == '=') + (in[len - 2] == '=');
    for (size_t i = 0; i < len - pad; i++)
        if (b64_value(in[i]) < 0)
            return -1;
    if ((pad == 1 && (b64_value(in[len - 2]) & 0x3) != 0) || (pad == 2 && (b64_value(in[len - 3]) & 0xf) != 0))
        return -1;
    int n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
    if (n < 0)
        return -1;
    *out_len = (size_t)n - pad;
    return 0;
}

int berth_auth_header_parse(berth_auth_header_t *out, const char *v, size_t len)
{
    memset(out, 0, sizeof(*out));
    if (v == NULL || len == 0)
        return 0;
    const char *sp = memchr(v, ' ', len);
    if (sp == NULL)
        return -1;
    size_t slen = (size_t)(sp - v);
    const char *cred = sp + 1;
    while (cred < v + len && *cred == ' ')
        cred++;
    size_t clen = (size_t)(v + len - cred);
    if (slen == 6 && strncasecmp(v, "Bearer", 6) == 0) {
        if (clen == 0 || clen > BERTH_AUTH_TOKEN_MAX)
            return -1;
        for (size_t i = 0; i < clen; i++) /* base64url and dots only */
            if (!((cred[i] >= 'A' && cred[i] <= 'Z') || (cred[i] >= 'a' && cred[i] <= 'z') || (cred[i] >= '0' && cred[i] <= '9') ||
                  cred[i] == '-' || cred[i] == '_' || cred[i] == '.' || cred[i] == '='))
                return -1;
        memcpy(out->token, cred, clen);
        out->kind = BERTH_AUTH_BEARER;
        return 0;
    }
    if (slen == 5 && strncasecmp(v, "Basic", 5) == 0) {
        unsigned char buf[BERTH_AUTH_USER_MAX + BERTH_AUTH_SECRET_MAX + 8];
        size_t n;
        if (b64_decode(cred, clen, buf, sizeof(buf), &n) != 0)
            return -1;
        unsigned char *colon = memchr(buf, ':', n);
        int rc = -1;
        if (colon != NULL) {
            size_t ulen = (size_t)(colon - buf), plen = n - ulen - 1;
            /* never cut at a NUL or pass a control byte on to a directory; names and secrets are text
             * (PostgreSQL, LDAP, JSON), so bytes that are not UTF-8 are bad input too, not a wrong password */
            if (!berth_auth_credential_ok((const char *)buf, ulen) || !berth_auth_credential_ok((const char *)colon + 1, plen) ||
                !berth_utf8_valid(buf, n))
                rc = -2;
            else if (ulen > 0 && ulen <= BERTH_AUTH_USER_MAX && plen <= BERTH_AUTH_SECRET_MAX)
                rc = 0;
            if (rc == 0) {
                memcpy(out->user, buf, ulen);
                memcpy(out->secret, colon + 1, plen);
                out->kind = BERTH_AUTH_BASIC;
            }
        }
        OPENSSL_cleanse(buf, sizeof(buf));
        return rc;
    }
    return -1;
}

int berth_auth_credential_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

void berth_auth_header_dispose(berth_auth_header_t *h)
{
    OPENSSL_cleanse(h, sizeof(*h));
}
