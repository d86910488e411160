/*
 * A small S3 client for the s3 storage driver: libcurl signs (CURLOPT_AWS_SIGV4), this file adds what S3 and
 * Ceph RGW need around it (see registry/storage/README.md), a pool of reused handles (connections stay open),
 * retries with back-off on 500/503/SlowDown and timeouts on every call. Blocking; called from worker and
 * upload threads, never from an event loop.
 */
#ifndef BERTH_STORAGE_S3_H
#define BERTH_STORAGE_S3_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/err.h"

typedef struct st_berth_s3_conf_t {
    const char *endpoint; /* "http[s]://host[:port]" */
    const char *region;   /* "us-east-1" */
    const char *bucket;
    const char *prefix; /* key prefix without slashes at either end, or "" */
    const char *access_key;
    const char *secret_key;
    const char *ca_file; /* NULL: the system's */
    int path_style;      /* host/bucket/key rather than bucket.host/key */
    int tls_verify;      /* on unless explicitly turned off */
    long timeout_ms;     /* a request without a body stream (and each stall of one with) ends after this */
    int retries;         /* further attempts on 500/503/SlowDown and broken connections */
} berth_s3_conf_t;

typedef struct st_berth_s3_t berth_s3_t;

/** Copies the configuration. Makes no request. */
berth_s3_t *berth_s3_new(const berth_s3_conf_t *conf);
void berth_s3_free(berth_s3_t *s3);
const berth_s3_conf_t *berth_s3_conf(const berth_s3_t *s3);

/* Flags for berth_s3_req_t: the tests use them to show what the gateway refuses (README.md) */
#define BERTH_S3_OMIT_SHA256 1 /* no x-amz-content-sha256 header */
#define BERTH_S3_CHUNKED 2     /* send the body with unknown length (chunked) */
#define BERTH_S3_RAW_KEY 4     /* the key is used as given: no prefix */
#define BERTH_S3_CURL_SIGNS 8  /* let libcurl sign even a request with extra_header */

typedef struct st_berth_s3_req_t {
    const char *method;
    const char *key;   /* object key below the prefix, unencoded; NULL: the bucket itself */
    const char *query; /* canonical query, already encoded: "uploads=", "partNumber=1&uploadId=…" */
    const void *body;
    size_t body_len;
    const char *range;        /* "bytes=a-b" or NULL */
    const char *copy_source;  /* object key (below the prefix) to copy from, or NULL */
    const char *extra_header; /* one more "name: value" header, or NULL */
    /* GET: 2xx body bytes go here as they arrive (else they are collected into res->body); non-zero stops */
    int (*sink)(const char *data, size_t len, void *arg);
    void *sink_arg;
    int flags;
} berth_s3_req_t;

typedef struct st_berth_s3_res_t {
    long status;
    char *body; /* collected body (error documents, listings), NUL-terminated, at most 8 MiB */
    size_t body_len;
    char etag[128];
    int64_t content_length; /* -1 when not given */
    char code[64];          /* S3 error code, when the body is an error document */
} berth_s3_res_t;

/**
 * One request, with retries. 0 when the gateway answered (any status: look at res->status); BERTH_EUNAVAIL
 * when it could not be reached, timed out, or kept answering 5xx / SlowDown (err says which). Dispose res with
 * berth_s3_res_dispose in both cases.
 */
int berth_s3_do(berth_s3_t *s3, const berth_s3_req_t *req, berth_s3_res_t *res, berth_err_t *err);
void berth_s3_res_dispose(berth_s3_res_t *res);

/* Operations: 0, BERTH_ENOTFOUND (404 / NoSuchUpload), BERTH_EUNAVAIL, or BERTH_ERROR for other refusals */
/** HEAD the bucket: a missing bucket and refused credentials get their own sentence in err->msg. */
int berth_s3_check_bucket(berth_s3_t *s3, berth_err_t *err);
int berth_s3_head(berth_s3_t *s3, const char *key, int64_t *size_out, berth_err_t *err);
int berth_s3_put(berth_s3_t *s3, const char *key, const void *body, size_t len, berth_err_t *err);
/** GET bytes [off, off+len) (len -1: to the end) into sink. */
int berth_s3_get(berth_s3_t *s3, const char *key, int64_t off, int64_t len, int (*sink)(const char *, size_t, void *), void *arg,
                 berth_err_t *err);
/** Missing is fine. */
int berth_s3_delete(berth_s3_t *s3, const char *key, berth_err_t *err);
/** Server-side copy (objects up to 5 GiB). */
int berth_s3_copy(berth_s3_t *s3, const char *from_key, const char *to_key, berth_err_t *err);

/* Multipart uploads. upload ids and ETags are opaque strings of at most 127 bytes. */
int berth_s3_mpu_begin(berth_s3_t *s3, const char *key, char upload_id[128], berth_err_t *err);
int berth_s3_mpu_part(berth_s3_t *s3, const char *key, const char *upload_id, int part, const void *body, size_t len,
                      char etag[128], berth_err_t *err);
/** Server-side copy of bytes [off, off+len) of from_key as part `part`. */
int berth_s3_mpu_part_copy(berth_s3_t *s3, const char *key, const char *upload_id, int part, const char *from_key, int64_t off,
                           int64_t len, char etag[128], berth_err_t *err);
int berth_s3_mpu_complete(berth_s3_t *s3, const char *key, const char *upload_id, int nparts, const char *const *etags,
                          berth_err_t *err);
int berth_s3_mpu_abort(berth_s3_t *s3, const char *key, const char *upload_id, berth_err_t *err);

/**
 * One page of keys below `prefix` (relative to the configured prefix). token: "" for the first page; on return
 * next_token is "" after the last page. cb gets keys relative to the configured prefix.
 */
int berth_s3_list(berth_s3_t *s3, const char *prefix, const char *token, char *next_token, size_t next_size,
                  void (*cb)(const char *key, int64_t size, time_t mtime, void *arg), void *arg, berth_err_t *err);

/** A presigned URL for GET (or HEAD) of key, valid `expires` seconds from `now`. 0, or -1 when too long. */
int berth_s3_presign(const berth_s3_t *s3, const char *method, const char *key, time_t now, long expires, char *out, size_t outsz);
/** The Host header value requests to the gateway carry ("host:port"), for a proxy that forwards presigned URLs. */
const char *berth_s3_host(const berth_s3_t *s3);

/** Text of the XML element <tag> in doc (first one at or after *pos; *pos moves past it), unescaped. */
int berth_s3_xml_text(const char *doc, size_t *pos, const char *tag, char *out, size_t outsz);

#endif
