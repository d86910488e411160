#include "auth/token.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <jwt.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct st_berth_token_keys_t {
    char *priv_pem, *pub_pem;
    size_t priv_len, pub_len;
    char *x5c; /* base64 DER certificate */
    char kid[64];
    jwt_alg_t alg; /* the one algorithm issued and accepted: ES256 (P-256 key) or RS256 (RSA key) */
};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, r;
    char tmp[4096];
    while ((r = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (n + r + 1 > cap) {
            cap = (n + r + 1) * 2;
            buf = realloc(buf, cap);
        }
        memcpy(buf + n, tmp, r);
        n += r;
    }
    fclose(f);
    if (buf == NULL)
        return NULL;
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* temp file, fsync, rename: a crash never leaves a half-written key */
static int write_atomic(const char *path, const char *data, size_t len, mode_t mode)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    int ok = write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static char *bio_string(BIO *b, size_t *len)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *s = malloc((size_t)n + 1);
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    *len = (size_t)n;
    return s;
}

static int generate(const char *key_path, const char *crt_path, int rsa)
{
    EVP_PKEY *key = rsa ? EVP_RSA_gen(3072) : EVP_EC_gen("P-256");
    X509 *crt = X509_new();
    int rc = -1;
    if (key == NULL || crt == NULL)
        goto Exit;
    X509_set_version(crt, 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(crt));
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(crt), -3600);
    X509_gmtime_adj(X509_getm_notAfter(crt), 10L * 365 * 24 * 3600);
    X509_NAME *name = X509_get_subject_name(crt);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"berth token signer", -1, -1, 0);
    X509_set_issuer_name(crt, name);
    X509_set_pubkey(crt, key);
    if (X509_sign(crt, key, EVP_sha256()) == 0)
        goto Exit;
    BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL);
    PEM_write_bio_X509(cb, crt);
    size_t kl, cl;
    char *ks = bio_string(kb, &kl), *cs = bio_string(cb, &cl);
    rc = write_atomic(key_path, ks, kl, 0600) == 0 && write_atomic(crt_path, cs, cl, 0644) == 0 ? 0 : -1;
    OPENSSL_cleanse(ks, kl);
    free(ks);
    free(cs);
    BIO_free(kb);
    BIO_free(cb);
Exit:
    EVP_PKEY_free(key);
    X509_free(crt);
    return rc;
}

/* libtrust key id: base32(sha256(DER SubjectPublicKeyInfo))[0:240 bits] in 12 groups of 4, joined by ':' */
static void libtrust_kid(EVP_PKEY *pub, char out[64])
{
    unsigned char *der = NULL, md[32];
    int len = i2d_PUBKEY(pub, &der);
    EVP_Digest(der, (size_t)len, md, NULL, EVP_sha256(), NULL);
    OPENSSL_free(der);
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    char b32[49];
    for (int i = 0; i < 48; i++) { /* 48 chars x 5 bits = 240 bits = 30 bytes */
        int bit = i * 5, byte = bit / 8, off = bit % 8;
        unsigned v = ((unsigned)md[byte] << 8 | (byte + 1 < 32 ? md[byte + 1] : 0)) >> (11 - off);
        b32[i] = alphabet[v & 31];
    }
    size_t n = 0;
    for (int g = 0; g < 12; g++) {
        if (g > 0)
            out[n++] = ':';
        memcpy(out + n, b32 + g * 4, 4);
        n += 4;
    }
    out[n] = '\0';
}

int berth_token_keys_load(berth_token_keys_t **out, const char *dir, const char *alg, berth_err_t *err)
{
    char kp[4096], cp[4096];
    int rsa = alg != NULL && strcmp(alg, "RS256") == 0;
    if (alg != NULL && !rsa && strcmp(alg, "ES256") != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "token algorithm must be ES256 or RS256, not %s", alg);
    snprintf(kp, sizeof(kp), "%s/token.key", dir);
    snprintf(cp, sizeof(cp), "%s/token.crt", dir);
    mkdir(dir, 0700);
    if (access(kp, F_OK) != 0 && generate(kp, cp, rsa) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot create the token signing key in %s", dir);
    berth_token_keys_t *k = calloc(1, sizeof(*k));
    size_t cl;
    char *crt_pem = read_file(cp, &cl);
    k->priv_pem = read_file(kp, &k->priv_len);
    X509 *crt = NULL;
    if (crt_pem != NULL) {
        BIO *b = BIO_new_mem_buf(crt_pem, (int)cl);
        crt = PEM_read_bio_X509(b, NULL, NULL, NULL);
        BIO_free(b);
    }
    free(crt_pem);
    if (k->priv_pem == NULL || crt == NULL) {
        X509_free(crt);
        berth_token_keys_free(k);
        return berth_err_set(err, BERTH_OCI_INTERNAL, "cannot read the token key or certificate in %s", dir);
    }
    EVP_PKEY *pub = X509_get0_pubkey(crt);
    if (EVP_PKEY_get_base_id(pub) != (rsa ? EVP_PKEY_RSA : EVP_PKEY_EC)) {
        X509_free(crt);
        berth_token_keys_free(k);
        return berth_err_set(err, BERTH_OCI_INTERNAL, "the key in %s is not for %s (move it away to generate a new one)", dir,
                             rsa ? "RS256" : "ES256");
    }
    k->alg = rsa ? JWT_ALG_RS256 : JWT_ALG_ES256;
    BIO *pb = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(pb, pub);
    k->pub_pem = bio_string(pb, &k->pub_len);
    BIO_free(pb);
    libtrust_kid(pub, k->kid);
    unsigned char *der = NULL;
    int dlen = i2d_X509(crt, &der);
    k->x5c = malloc((size_t)(dlen + 2) / 3 * 4 + 1);
    EVP_EncodeBlock((unsigned char *)k->x5c, der, dlen);
    OPENSSL_free(der);
    X509_free(crt);
    *out = k;
    return 0;
}

void berth_token_keys_free(berth_token_keys_t *k)
{
    if (k == NULL)
        return;
    if (k->priv_pem != NULL)
        OPENSSL_cleanse(k->priv_pem, k->priv_len);
    free(k->priv_pem);
    free(k->pub_pem);
    free(k->x5c);
    free(k);
}

const char *berth_token_public_pem(const berth_token_keys_t *k)
{
    return k->pub_pem;
}

const char *berth_token_kid(const berth_token_keys_t *k)
{
    return k->kid;
}

char *berth_token_issue(const berth_token_keys_t *k, const char *issuer, const char *audience, const char *subject,
                        int64_t account_id, const berth_scope_t *access, size_t naccess, int64_t now, int ttl)
{
    jwt_t *jwt = NULL;
    if (jwt_new(&jwt) != 0)
        return NULL;
    unsigned char jti[16];
    char jti_hex[33];
    RAND_bytes(jti, sizeof(jti));
    for (int i = 0; i < 16; i++)
        snprintf(jti_hex + 2 * i, 3, "%02x", jti[i]);
    json_t *acc = json_array();
    for (size_t i = 0; i < naccess; i++) {
        json_t *acts = json_array();
        static const char *names[] = {"pull", "push", "delete", "*"};
        for (int b = 0; b < 4; b++)
            if (access[i].actions & (1u << b))
                json_array_append_new(acts, json_string(names[b]));
        json_array_append_new(acc, json_pack("{s:s,s:s,s:o}", "type", access[i].type, "name", access[i].name, "actions", acts));
    }
    json_t *claims =
        json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:o}", "iss", issuer, "sub", subject, "aud", audience, "exp", (json_int_t)now + ttl,
                  "nbf", (json_int_t)now, "iat", (json_int_t)now, "jti", jti_hex, "access", acc);
    if (account_id != 0)
        json_object_set_new(claims, "berth_aid", json_integer((json_int_t)account_id));
    char *claims_s = json_dumps(claims, JSON_COMPACT);
    json_decref(claims);
    char *out = NULL;
    char x5c[16384];
    snprintf(x5c, sizeof(x5c), "{\"x5c\":[\"%s\"]}", k->x5c);
    if (jwt_add_grants_json(jwt, claims_s) == 0 && jwt_add_header(jwt, "kid", k->kid) == 0 && jwt_add_headers_json(jwt, x5c) == 0 &&
        jwt_set_alg(jwt, k->alg, (const unsigned char *)k->priv_pem, (int)k->priv_len) == 0)
        out = jwt_encode_str(jwt);
    free(claims_s);
    jwt_free(jwt);
    return out;
}

void berth_token_claims_dispose(berth_token_claims_t *c)
{
    free(c->access);
    memset(c, 0, sizeof(*c));
}

static int aud_matches(jwt_t *jwt, const char *audience)
{
    const char *aud = jwt_get_grant(jwt, "aud");
    if (aud != NULL)
        return strcmp(aud, audience) == 0;
    char *arr = jwt_get_grants_json(jwt, "aud");
    int ok = 0;
    json_t *j = arr != NULL ? json_loads(arr, 0, NULL) : NULL;
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) ok |= json_is_string(v) && strcmp(json_string_value(v), audience) == 0;
    json_decref(j);
    free(arr);
    return ok;
}

int berth_token_verify(const berth_token_keys_t *k, const char *token, const char *issuer, const char *audience, int64_t now,
                       berth_token_claims_t *out, berth_err_t *err)
{
    memset(out, 0, sizeof(*out));
    jwt_t *jwt = NULL;
    /* libjwt takes the algorithm from the token header: check it, or an HS256 token keyed with our public
     * PEM (algorithm confusion) would pass */
    if (jwt_decode(&jwt, token, (const unsigned char *)k->pub_pem, (int)k->pub_len) != 0 || jwt == NULL)
        return berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token signature or encoding invalid");
    int rc = BERTH_EUNAUTH;
    if (jwt_get_alg(jwt) != k->alg) {
        berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token algorithm not allowed");
        goto Exit;
    }
    const char *iss = jwt_get_grant(jwt, "iss"), *sub = jwt_get_grant(jwt, "sub");
    errno = 0;
    long exp = jwt_get_grant_int(jwt, "exp");
    int has_exp = errno == 0;
    errno = 0;
    long nbf = jwt_get_grant_int(jwt, "nbf");
    int has_nbf = errno == 0;
    if (iss == NULL || strcmp(iss, issuer) != 0) {
        berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token issuer mismatch");
        goto Exit;
    }
    if (!aud_matches(jwt, audience)) {
        berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token audience mismatch");
        goto Exit;
    }
    if (!has_exp || exp + BERTH_TOKEN_LEEWAY < now) {
        berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token expired");
        goto Exit;
    }
    if (has_nbf && nbf - BERTH_TOKEN_LEEWAY > now) {
        berth_err_set(err, BERTH_OCI_UNAUTHORIZED, "token not yet valid");
        goto Exit;
    }
    snprintf(out->subject, sizeof(out->subject), "%s", sub != NULL ? sub : "");
    out->expires_at = exp;
    errno = 0;
    long aid = jwt_get_grant_int(jwt, "berth_aid");
    out->account_id = errno == 0 ? aid : 0;
    errno = 0;
    out->issued_at = jwt_get_grant_int(jwt, "iat");
    char *acc = jwt_get_grants_json(jwt, "access");
    json_t *arr = acc != NULL ? json_loads(acc, 0, NULL) : NULL;
    free(acc);
    out->access = calloc(json_array_size(arr) + 1, sizeof(berth_scope_t));
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "type")), *n = json_string_value(json_object_get(e, "name"));
        if (t == NULL || n == NULL || strlen(t) >= sizeof(out->access[0].type) || strlen(n) >= sizeof(out->access[0].name))
            continue;
        berth_scope_t *s = &out->access[out->naccess++];
        snprintf(s->type, sizeof(s->type), "%s", t);
        snprintf(s->name, sizeof(s->name), "%s", n);
        size_t j;
        json_t *a;
        json_array_foreach(json_object_get(e, "actions"), j, a)
        {
            const char *av = json_string_value(a);
            if (av == NULL)
                continue;
            s->actions |= strcmp(av, "pull") == 0     ? BERTH_ACTION_PULL
                          : strcmp(av, "push") == 0   ? BERTH_ACTION_PUSH
                          : strcmp(av, "delete") == 0 ? BERTH_ACTION_DELETE
                          : strcmp(av, "*") == 0      ? BERTH_ACTION_ALL
                                                      : 0;
        }
    }
    json_decref(arr);
    rc = 0;
Exit:
    jwt_free(jwt);
    return rc;
}

unsigned berth_token_allowed(const berth_token_claims_t *c, const char *type, const char *name)
{
    unsigned a = 0;
    for (size_t i = 0; i < c->naccess; i++)
        if (strcmp(c->access[i].type, type) == 0 && strcmp(c->access[i].name, name) == 0)
            a |= c->access[i].actions;
    return a;
}
