#include "registry/service/artifact_push.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/manifest.h"
#include "registry/service/events.h"
#include "registry/service/upload.h"
#include "sql/registry.h"

static void blob_event(const char *repo, const berth_digest_t *d, int64_t size)
{
    berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_BLOB_PUSH,
                                      .surface = BERTH_EVENT_INTERNAL,
                                      .repo = repo,
                                      .digest = d->str,
                                      .size = size,
                                      .principal = ""});
}

static void session_id(char id[40])
{
    unsigned char rnd[12];
    RAND_bytes(rnd, sizeof(rnd));
    snprintf(id, 40, "berth-");
    for (int i = 0; i < 12; i++)
        snprintf(id + 6 + 2 * i, 3, "%02x", rnd[i]);
}

/* The prepared session becomes the blob inside the row's transaction, under the blob-file lock GC respects */
static int commit(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *id, const berth_digest_t *d, int64_t size,
                  berth_err_t *err)
{
    berth_upload_place_t place = {.store = reg->store, .id = id, .digest = d};
    if (berth_db_blob_commit(c, repo, d->str, size, NULL, berth_upload_place, &place, err) != 0) {
        berth_store_upload_remove(reg->store, id); /* missing once placed: fine */
        return err != NULL && err->code < 0 ? err->code : BERTH_ERROR;
    }
    blob_event(repo, d, size);
    return 0;
}

int berth_artifact_blob_bytes(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const void *data, size_t len,
                              berth_digest_t *d)
{
    char id[40];
    berth_err_t err;
    session_id(id);
    berth_digest_of(d, BERTH_DIGEST_SHA256, data, len);
    if (berth_store_put_upload(reg->store, id, data, len, d, &err) != 0)
        return BERTH_ERROR;
    return commit(reg, c, repo, id, d, (int64_t)len, &err) == 0 ? 0 : BERTH_ERROR;
}

int berth_artifact_blob_file(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, int fd, berth_digest_t *d, int64_t *size,
                             berth_err_t *err)
{
    char id[40];
    session_id(id);
    berth_store_upload_t *u;
    int64_t have;
    int rc = berth_store_upload_open(reg->store, id, 1, &u, &have, err);
    if (rc != 0)
        return rc;
    berth_hash_t *h = berth_hash_new(BERTH_DIGEST_SHA256);
    char *buf = malloc(1 << 20);
    int64_t off = 0;
    ssize_t n;
    while (rc == 0 && (n = pread(fd, buf, 1 << 20, (off_t)off)) > 0) {
        berth_hash_update(h, buf, (size_t)n);
        rc = berth_store_upload_write(u, buf, (size_t)n, err);
        off += n;
    }
    free(buf);
    berth_hash_peek(h, d);
    berth_hash_free(h);
    if (rc == 0 && n < 0)
        rc = berth_err_set(err, BERTH_OCI_INTERNAL, "reading the squashfs back failed");
    if (rc == 0)
        rc = berth_store_upload_prepare(u, d, 1, err);
    berth_store_upload_close(u, NULL);
    if (rc != 0) {
        berth_store_upload_remove(reg->store, id);
        return rc;
    }
    *size = off;
    return commit(reg, c, repo, id, d, off, err);
}

int berth_artifact_push_referrer(berth_registry_t *reg, berth_dbconn_t *c, const char *repo, const char *artifact_type,
                                 json_t *layers, json_t *annotations, const char *subject, size_t subject_size,
                                 const char *subject_mt, berth_digest_t *digest_out, berth_err_t *err)
{
    berth_digest_t ed;
    if (berth_artifact_blob_bytes(reg, c, repo, "{}", 2, &ed) != 0)
        return berth_err_set(err, BERTH_OCI_INTERNAL, "the empty config blob could not be stored");
    json_t *m = json_pack("{s:i,s:s,s:s,s:{s:s,s:s,s:i},s:O,s:{s:s,s:s,s:I},s:O}", "schemaVersion", 2, "mediaType",
                          BERTH_MT_OCI_MANIFEST, "artifactType", artifact_type, "config", "mediaType",
                          "application/vnd.oci.empty.v1+json", "digest", ed.str, "size", 2, "layers", layers, "subject",
                          "mediaType", subject_mt, "digest", subject, "size", (json_int_t)subject_size, "annotations", annotations);
    char *body = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(m);
    berth_manifest_info_t info;
    int rc = berth_manifest_parse(&info, body, strlen(body), BERTH_MT_OCI_MANIFEST, err);
    if (rc == 0) {
        berth_digest_of(digest_out, BERTH_DIGEST_SHA256, body, strlen(body));
        rc = berth_db_manifest_put(c, repo, NULL, digest_out, &info, body, strlen(body), NULL, NULL, NULL, NULL, err);
        berth_manifest_info_dispose(&info);
        if (rc == 0) /* a new referrer changes what the subject's referrers list shows */
            berth_event_emit(&(berth_event_t){.kind = BERTH_EVENT_MANIFEST_PUSH,
                                              .surface = BERTH_EVENT_INTERNAL,
                                              .repo = repo,
                                              .digest = digest_out->str,
                                              .media_type = BERTH_MT_OCI_MANIFEST,
                                              .size = (int64_t)strlen(body),
                                              .principal = ""});
    }
    free(body);
    return rc;
}
