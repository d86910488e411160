#include "replication/seal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "replication/replication.h"

#define NONCE_LEN 12
#define TAG_LEN 16

static unsigned char key[32];

int berth_repl_seal_load_key(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, key, sizeof(key));
        close(fd);
        return n == (ssize_t)sizeof(key) ? 0 : BERTH_ERROR;
    }
    if (errno != ENOENT)
        return BERTH_ERROR;
    if (RAND_bytes(key, sizeof(key)) != 1)
        return BERTH_ERROR;
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return BERTH_ERROR;
    int ok = write(fd, key, sizeof(key)) == (ssize_t)sizeof(key) && fsync(fd) == 0;
    close(fd);
    return ok && rename(tmp, path) == 0 ? 0 : BERTH_ERROR;
}

void berth_repl_seal_derive(const char *label, char out[65])
{
    unsigned char md[32];
    unsigned len = 0;
    HMAC(EVP_sha256(), key, sizeof(key), (const unsigned char *)label, strlen(label), md, &len);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    OPENSSL_cleanse(md, sizeof(md));
}

char *berth_repl_seal(const char *secret)
{
    unsigned char nonce[NONCE_LEN], tag[TAG_LEN];
    size_t n = strlen(secret);
    unsigned char *ct = malloc(n + 1);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int len = 0, ok = RAND_bytes(nonce, sizeof(nonce)) == 1 && EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) == 1 &&
                      EVP_EncryptUpdate(x, ct, &len, (const unsigned char *)secret, (int)n) == 1 &&
                      EVP_EncryptFinal_ex(x, ct + len, &len) == 1 &&
                      EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1;
    EVP_CIPHER_CTX_free(x);
    char *hex = NULL;
    if (ok) {
        hex = malloc((NONCE_LEN + n + TAG_LEN) * 2 + 1);
        size_t o = 0;
        for (int i = 0; i < NONCE_LEN; i++, o += 2)
            snprintf(hex + o, 3, "%02x", nonce[i]);
        for (size_t i = 0; i < n; i++, o += 2)
            snprintf(hex + o, 3, "%02x", ct[i]);
        for (int i = 0; i < TAG_LEN; i++, o += 2)
            snprintf(hex + o, 3, "%02x", tag[i]);
    }
    free(ct);
    return hex;
}

static int nibble(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *berth_repl_open(const char *hex)
{
    size_t hl = hex != NULL ? strlen(hex) : 0;
    if (hl < 2 * (NONCE_LEN + TAG_LEN) || hl % 2 != 0)
        return NULL;
    size_t n = hl / 2;
    unsigned char *raw = malloc(n);
    for (size_t i = 0; i < n; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(raw);
            return NULL;
        }
        raw[i] = (unsigned char)(hi << 4 | lo);
    }
    size_t ctn = n - NONCE_LEN - TAG_LEN;
    char *pt = malloc(ctn + 1);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int len = 0, ok = EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, raw) == 1 &&
                      EVP_DecryptUpdate(x, (unsigned char *)pt, &len, raw + NONCE_LEN, (int)ctn) == 1 &&
                      EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, raw + NONCE_LEN + ctn) == 1 &&
                      EVP_DecryptFinal_ex(x, (unsigned char *)pt + len, &len) == 1;
    EVP_CIPHER_CTX_free(x);
    free(raw);
    if (!ok) {
        free(pt);
        return NULL;
    }
    pt[ctn] = '\0';
    return pt;
}
