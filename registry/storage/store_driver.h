/*
 * The storage driver interface: what a driver implements (store.h is what callers see). A driver's store and
 * upload structs begin with the common ones below, so store.c dispatches through `ops` without knowing them.
 */
#ifndef BERTH_STORAGE_STORE_DRIVER_H
#define BERTH_STORAGE_STORE_DRIVER_H

#include "registry/storage/store.h"

typedef struct st_berth_store_ops_t {
    const char *name;
    void (*close)(berth_store_t *s);
    int (*blob_stat)(berth_store_t *s, const berth_digest_t *d, int64_t *size_out, berth_err_t *err);
    int (*blob_read)(berth_store_t *s, const berth_digest_t *d, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg,
                     berth_err_t *err);
    int (*blob_remove)(berth_store_t *s, const berth_digest_t *d, berth_err_t *err);
    int (*blob_each)(berth_store_t *s, berth_store_blob_fn cb, void *cb_data);
    void (*blob_serve)(berth_store_t *s, const berth_digest_t *d, int64_t size, const char *method, berth_resp_t *resp);
    int (*upload_open)(berth_store_t *s, const char *id, int create, berth_store_upload_t **out, int64_t *size_out,
                       berth_err_t *err);
    int (*upload_write)(berth_store_upload_t *u, const void *buf, size_t len, berth_err_t *err);
    /* durable and verified (by the caller, or by the driver's read-back), not yet visible */
    int (*upload_prepare)(berth_store_upload_t *u, const berth_digest_t *d, int verified, berth_err_t *err);
    /* visible at the content address; the session's bytes are gone */
    int (*upload_place)(berth_store_t *s, const char *id, const berth_digest_t *d, berth_err_t *err);
    /* keeps the bytes for the next request and frees u (also after a failed commit) */
    int (*upload_close)(berth_store_upload_t *u, berth_err_t *err);
    int (*upload_read)(berth_store_t *s, const char *id, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err);
    int (*upload_size)(berth_store_t *s, const char *id, int64_t *size_out);
    int (*upload_open_read)(berth_store_t *s, const char *id, int *fd_out); /* NULL: not local files */
    int (*upload_each)(berth_store_t *s, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data);
    void (*upload_remove)(berth_store_t *s, const char *id);
    /* sessions whose state the caller keeps (store.h); NULL for drivers that keep none */
    int (*upload_resume)(berth_store_t *s, const char *id, const char *state, berth_store_upload_t **out, int64_t *size_out,
                         berth_err_t *err);
    int (*upload_save)(berth_store_upload_t *u, char **state_out, berth_err_t *err);
    int (*upload_state_size)(berth_store_t *s, const char *state, int64_t *size_out);
    void (*upload_discard)(berth_store_t *s, const char *id, const char *state);
    int (*space)(berth_store_t *s, berth_store_space_t *out); /* NULL: no figures */
    int (*reachable)(berth_store_t *s, berth_err_t *err);     /* NULL: space() answers for it */
    void (*edge)(const berth_store_t *s, berth_store_edge_t *out);
} berth_store_ops_t;

struct st_berth_store_t {
    const berth_store_ops_t *ops;
    char edge_prefix[64];      /* "/_berth/blobs/" */
    char edge_head_prefix[64]; /* "/_berth/blob-heads/": a HEAD the edge proxies (s3) */
    int64_t min_free;          /* -1: min(1 GiB, 2 % of the file system) */
    int below;                 /* last reserve state logged, so each crossing is logged once */
};

struct st_berth_store_upload_t {
    berth_store_t *store;
    char id[64];
};

/* the two drivers' tables */
extern const berth_store_ops_t berth_store_fs_ops, berth_store_s3_ops;

/* shared by the drivers: "sha256/ab/<hex>" */
void berth_store__blob_relpath(const berth_digest_t *d, char *buf, size_t bufsz);
/* hash everything a read delivers, for drivers that verify an upload by reading it back */
int berth_store__hash_sink(const char *data, size_t len, void *arg);

#endif
