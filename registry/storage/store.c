/* The driver seam: every store.h call dispatches to the driver's table (store_driver.h); shared helpers. */
#include "registry/storage/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "registry/storage/store_driver.h"

void berth_store_close(berth_store_t *s)
{
    if (s != NULL)
        s->ops->close(s);
}

const char *berth_store_driver(const berth_store_t *s)
{
    return s->ops->name;
}

void berth_store__blob_relpath(const berth_digest_t *d, char *buf, size_t bufsz)
{
    snprintf(buf, bufsz, "%s/%.2s/%s", d->alg == BERTH_DIGEST_SHA256 ? "sha256" : "sha512", berth_digest_hex(d),
             berth_digest_hex(d));
}

int berth_store__hash_sink(const char *data, size_t len, void *arg)
{
    berth_hash_update(arg, data, len);
    return 0;
}

int berth_store_blob_stat(berth_store_t *s, const berth_digest_t *d, int64_t *size_out, berth_err_t *err)
{
    return s->ops->blob_stat(s, d, size_out, err);
}

int berth_store_blob_read(berth_store_t *s, const berth_digest_t *d, int64_t off, int64_t len, berth_store_sink_fn sink, void *arg,
                          berth_err_t *err)
{
    return s->ops->blob_read(s, d, off, len, sink, arg, err);
}

typedef struct {
    char *buf;
    size_t len, max;
} slurp_t;

static int slurp_sink(const char *data, size_t len, void *arg)
{
    slurp_t *b = arg;
    if (b->len + len > b->max)
        return -1;
    memcpy(b->buf + b->len, data, len);
    b->len += len;
    return 0;
}

char *berth_store_blob_slurp(berth_store_t *s, const berth_digest_t *d, size_t max, size_t *len_out)
{
    int64_t size;
    if (s->ops->blob_stat(s, d, &size, NULL) != 0 || size < 0 || (uint64_t)size > max)
        return NULL;
    slurp_t b = {.buf = malloc((size_t)size + 1), .max = (size_t)size};
    if (b.buf == NULL || s->ops->blob_read(s, d, 0, -1, slurp_sink, &b, NULL) != 0 || b.len != (size_t)size) {
        free(b.buf);
        return NULL;
    }
    b.buf[b.len] = '\0';
    *len_out = b.len;
    return b.buf;
}

int berth_store_blob_remove(berth_store_t *s, const berth_digest_t *d, berth_err_t *err)
{
    return s->ops->blob_remove(s, d, err);
}

int berth_store_blob_each(berth_store_t *s, berth_store_blob_fn cb, void *cb_data)
{
    return s->ops->blob_each(s, cb, cb_data);
}

void berth_store_blob_serve(berth_store_t *s, const berth_digest_t *d, int64_t size, const char *method, berth_resp_t *resp)
{
    s->ops->blob_serve(s, d, size, method, resp);
}

int berth_store_upload_open(berth_store_t *s, const char *id, int create, berth_store_upload_t **out, int64_t *size_out,
                            berth_err_t *err)
{
    if (strlen(id) >= sizeof((*out)->id))
        return berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
    return s->ops->upload_open(s, id, create, out, size_out, err);
}

int berth_store_upload_write(berth_store_upload_t *u, const void *buf, size_t len, berth_err_t *err)
{
    return u->store->ops->upload_write(u, buf, len, err);
}

int berth_store_upload_prepare(berth_store_upload_t *u, const berth_digest_t *d, int verified, berth_err_t *err)
{
    return u->store->ops->upload_prepare(u, d, verified, err);
}

int berth_store_upload_place(berth_store_t *s, const char *id, const berth_digest_t *d, berth_err_t *err)
{
    return s->ops->upload_place(s, id, d, err);
}

int berth_store_upload_commit(berth_store_upload_t *u, const berth_digest_t *d, int verified, berth_err_t *err)
{
    int rc = u->store->ops->upload_prepare(u, d, verified, err);
    return rc != 0 ? rc : u->store->ops->upload_place(u->store, u->id, d, err);
}

int berth_store_upload_close(berth_store_upload_t *u, berth_err_t *err)
{
    return u == NULL ? 0 : u->store->ops->upload_close(u, err);
}

int berth_store_upload_read(berth_store_t *s, const char *id, int64_t len, berth_store_sink_fn sink, void *arg, berth_err_t *err)
{
    return s->ops->upload_read(s, id, len, sink, arg, err);
}

int berth_store_upload_open_read(berth_store_t *s, const char *id, int *fd_out)
{
    return s->ops->upload_open_read != NULL ? s->ops->upload_open_read(s, id, fd_out) : BERTH_EINVAL;
}

int berth_store_upload_size(berth_store_t *s, const char *id, int64_t *size_out)
{
    return s->ops->upload_size(s, id, size_out);
}

int berth_store_upload_each(berth_store_t *s, void (*cb)(const char *id, double age_seconds, void *cb_data), void *cb_data)
{
    return s->ops->upload_each(s, cb, cb_data);
}

void berth_store_upload_remove(berth_store_t *s, const char *id)
{
    s->ops->upload_remove(s, id);
}

int berth_store_upload_keeps_state(const berth_store_t *s)
{
    return s->ops->upload_resume != NULL;
}

int berth_store_upload_resume(berth_store_t *s, const char *id, const char *state, berth_store_upload_t **out, int64_t *size_out,
                              berth_err_t *err)
{
    if (s->ops->upload_resume == NULL)
        return s->ops->upload_open(s, id, 0, out, size_out, err);
    return s->ops->upload_resume(s, id, state, out, size_out, err);
}

int berth_store_upload_save(berth_store_upload_t *u, char **state_out, berth_err_t *err)
{
    *state_out = NULL;
    return u->store->ops->upload_save != NULL ? u->store->ops->upload_save(u, state_out, err) : 0;
}

int berth_store_upload_state_size(berth_store_t *s, const char *state, int64_t *size_out)
{
    return s->ops->upload_state_size != NULL ? s->ops->upload_state_size(s, state, size_out) : BERTH_EINVAL;
}

void berth_store_upload_discard(berth_store_t *s, const char *id, const char *state)
{
    if (s->ops->upload_discard != NULL && state != NULL)
        s->ops->upload_discard(s, id, state);
    else
        s->ops->upload_remove(s, id);
}

int berth_store_put_upload(berth_store_t *s, const char *id, const void *data, size_t len, const berth_digest_t *d,
                           berth_err_t *err)
{
    berth_digest_t got;
    berth_digest_of(&got, d->alg, data, len);
    if (!berth_digest_equal(&got, d))
        return berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "content digest %s does not match %s", got.str, d->str);
    berth_store_upload_t *u;
    int64_t size;
    int rc = berth_store_upload_open(s, id, 1, &u, &size, err);
    if (rc != 0)
        return rc;
    if ((rc = berth_store_upload_write(u, data, len, err)) == 0)
        rc = berth_store_upload_prepare(u, d, 1, err);
    berth_store_upload_close(u, NULL);
    if (rc != 0)
        berth_store_upload_remove(s, id);
    return rc;
}

void berth_store_edge(const berth_store_t *s, berth_store_edge_t *out)
{
    memset(out, 0, sizeof(*out));
    s->ops->edge(s, out);
}

void berth_store_set_edge_prefix(berth_store_t *s, const char *prefix, const char *head_prefix)
{
    snprintf(s->edge_prefix, sizeof(s->edge_prefix), "%s", prefix);
    snprintf(s->edge_head_prefix, sizeof(s->edge_head_prefix), "%s", head_prefix);
}

void berth_store_set_reserve(berth_store_t *s, int64_t min_free)
{
    s->min_free = min_free;
}

int berth_store_space(berth_store_t *s, berth_store_space_t *out)
{
    memset(out, 0, sizeof(*out));
    return s->ops->space != NULL ? s->ops->space(s, out) : BERTH_ERROR;
}

int berth_store_reachable(berth_store_t *s, berth_err_t *err)
{
    if (s->ops->reachable != NULL)
        return s->ops->reachable(s, err);
    berth_store_space_t sp;
    return berth_store_space(s, &sp) == 0 ? 0 : berth_err_set(err, BERTH_OCI_UNAVAILABLE, "cannot read free space");
}

int berth_store_check_reserve(berth_store_t *s, berth_err_t *err)
{
    berth_store_space_t sp;
    if (berth_store_space(s, &sp) != 0 || !sp.below_reserve)
        return 0;
    return berth_err_set(err, BERTH_OCI_STORAGE_FULL, "upload refused: %lld bytes free, reserve %lld", (long long)sp.free_bytes,
                         (long long)sp.reserve_bytes);
}
