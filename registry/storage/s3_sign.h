/*
 * AWS Signature Version 4 for S3, the parts libcurl does not do: presigned (query-string) URLs for the edge and
 * for redirects. Pure: no I/O, no clock (the caller passes the time), so AWS's published examples are its tests.
 */
#ifndef BERTH_STORAGE_S3_SIGN_H
#define BERTH_STORAGE_S3_SIGN_H

#include <stddef.h>
#include <time.h>

/** Percent-encode as SigV4 wants (RFC 3986 unreserved kept; '/' kept when keep_slash). 0, or -1 if out is too small. */
int berth_s3_uri_encode(const char *in, int keep_slash, char *out, size_t outsz);
/** kSigning = HMAC chain over "AWS4"+secret, date (YYYYMMDD), region, service, "aws4_request". */
void berth_s3_signing_key(const char *secret, const char *date8, const char *region, const char *service, unsigned char out[32]);
/** Lower-case hex SHA-256 of data (65 bytes with NUL). */
void berth_s3_sha256_hex(const void *data, size_t len, char out[65]);

/**
 * The signature of a canonical request: hex HMAC(kSigning, "AWS4-HMAC-SHA256\n" amz_date "\n" scope "\n"
 * hex(sha256(canonical))). amz_date is "YYYYMMDDTHHMMSSZ".
 */
void berth_s3_sign_canonical(const char *canonical, const char *secret, const char *region, const char *amz_date, char out[65]);

/**
 * The Authorization header value for a header-signed request. headers: "name:value" lines, names in lower case,
 * sorted by name (host and x-amz-date among them); query: canonical (sorted, encoded). Used where libcurl's
 * signer gets the order wrong (README.md). 0, or -1 if out is too small.
 */
int berth_s3_authorization(const char *method, const char *path, const char *query, const char *const *headers, size_t nheaders,
                           const char *payload_hash, const char *access_key, const char *secret_key, const char *region,
                           const char *amz_date, char *out, size_t outsz);

typedef struct st_berth_s3_presign_t {
    const char *method; /* "GET", "HEAD" */
    const char *scheme; /* "http" or "https" */
    const char *host;   /* Host header as the client will send it, port included when not the default */
    const char *path;   /* URI path, already encoded (berth_s3_uri_encode with keep_slash) */
    const char *access_key;
    const char *secret_key;
    const char *region;
    time_t now;
    long expires; /* seconds, 1..604800 */
} berth_s3_presign_t;

/** "scheme://host/path?X-Amz-...&X-Amz-Signature=..." with only host signed. 0, or -1 if out is too small. */
int berth_s3_presign_url(const berth_s3_presign_t *p, char *out, size_t outsz);

#endif
