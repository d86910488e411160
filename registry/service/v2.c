#include "registry/service/registry.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/audit.h"
#include "core/digest.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/query.h"
#include "registry/service/cache.h"
#include "registry/service/events.h"
#include "registry/service/isa.h"
#include "registry/service/proxy.h"
#include "registry/service/quota.h"
#include "sql/proxy.h"
#include "sql/registry.h"

#define LIST_MAX 10000 /* page size cap for tags/list and _catalog; a Link header leads on */

static void json_resp(berth_resp_t *resp, int status, json_t *root, const char *ctype)
{
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    berth_resp_body(resp, status, s, strlen(s), ctype);
}

static int is(const char *method, const char *m)
{
    return strcmp(method, m) == 0;
}

/* n and last for tags/list and _catalog; returns 0 or fills err */
static int page_params(const berth_v2_req_t *rq, long *n, char *last, size_t lastsz, berth_err_t *err)
{
    char nbuf[24];
    *n = LIST_MAX;
    last[0] = '\0';
    if (rq->query == NULL)
        return 0;
    long r = berth_query_get(rq->query, rq->query_len, "n", nbuf, sizeof(nbuf));
    if (r == -2)
        return berth_err_set(err, BERTH_OCI_PARAM_INVALID, "invalid n");
    if (r >= 0) {
        char *end;
        long v = strtol(nbuf, &end, 10);
        if (*end != '\0' || v < 0 || end == nbuf)
            return berth_err_set(err, BERTH_OCI_PARAM_INVALID, "invalid n");
        *n = v < LIST_MAX ? v : LIST_MAX;
    }
    if (berth_query_get(rq->query, rq->query_len, "last", last, lastsz) == -2)
        return berth_err_set(err, BERTH_OCI_PARAM_INVALID, "invalid last");
    return 0;
}

/* Render a tags/list or _catalog page; returns the Link header value it set (owned by resp) or NULL. */
static const char *list_resp(berth_resp_t *resp, const char *path, const char *key, const char *name, berth_strlist_t *l, long n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(arr, json_string(l->items[i]));
    json_t *root = name != NULL ? json_pack("{s:s,s:o}", "name", name, key, arr) : json_pack("{s:o}", key, arr);
    if (n > 0 && l->n == (size_t)n)
        berth_resp_header(resp, "link", "<%s?n=%ld&last=%s>; rel=\"next\"", path, n, l->items[l->n - 1]);
    json_resp(resp, 200, root, "application/json");
    return berth_resp_get(resp, "link");
}

static int do_catalog(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    long n;
    char last[BERTH_NAME_MAX + 1];
    int rc;
    if ((rc = page_params(rq, &n, last, sizeof(last), err)) != 0)
        return rc;
    berth_strlist_t l = {0};
    if (n > 0 && (rc = berth_db_catalog(c, last, n, &l, err)) != 0)
        return rc;
    list_resp(resp, "/v2/_catalog", "repositories", NULL, &l, n);
    berth_strlist_dispose(&l);
    return 0;
}

static void page_key(char *out, size_t outsz, long n, const char *last)
{
    snprintf(out, outsz, "%ld\n%s", n, last);
}

static int do_tags(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    long n;
    char last[BERTH_TAG_MAX + 1], path[BERTH_NAME_MAX + 32], key[BERTH_TAG_MAX + 32];
    int rc;
    if ((rc = page_params(rq, &n, last, sizeof(last), err)) != 0)
        return rc;
    uint64_t epoch = berth_cache_epoch(rq->route.name);
    berth_strlist_t l = {0};
    /* n=0 still proves the repository exists */
    if ((rc = berth_db_tags_list(c, rq->route.name, last, n, &l, err)) != 0)
        return rc;
    snprintf(path, sizeof(path), "/v2/%s/tags/list", rq->route.name);
    const char *link = list_resp(resp, path, "tags", rq->route.name, &l, n);
    berth_strlist_dispose(&l);
    berth_cache_val_t v = {.content = resp->body, .len = resp->len, .link = (char *)link};
    page_key(key, sizeof(key), n, last);
    berth_cache_put(BERTH_CACHE_TAGS, rq->route.name, key, epoch, &v);
    return 0;
}

static int is_index_type(const char *media_type)
{
    return strcmp(media_type, BERTH_MT_OCI_INDEX) == 0 || strcmp(media_type, BERTH_MT_DOCKER_LIST) == 0;
}

/* The one place a manifest answer is built, from the database or the cache. Takes `content`. */
static void manifest_resp(berth_resp_t *resp, const char *digest, const char *media_type, char *content, size_t len)
{
    berth_resp_header(resp, "docker-content-digest", "%s", digest);
    berth_resp_header(resp, "etag", "\"%s\"", digest);
    berth_resp_body(resp, 200, content, len, media_type);
}

/* The one place a blob answer is built: the store's driver says where the edge (or the client) gets the bytes */
static void blob_resp(berth_registry_t *reg, const char *method, berth_resp_t *resp, const berth_digest_t *d, int64_t size)
{
    berth_resp_header(resp, "docker-content-digest", "%s", d->str);
    berth_store_blob_serve(reg->store, d, size, method, resp);
}

/* Harbor counts a manifest GET as a pull (HEAD is a client checking, blobs follow a manifest) */
static void audit_pull(const berth_v2_req_t *rq, const char *digest)
{
    if (is(rq->method, "GET"))
        berth_audit_pull(rq->who, rq->remote, rq->route.name, rq->route.ref, digest);
}

/* A change through /v2 committed: announce it (events.h); `ev` holds what the route does not say */
static void emit(const berth_v2_req_t *rq, berth_event_t *ev)
{
    ev->surface = rq->from_upstream ? BERTH_EVENT_INTERNAL : BERTH_EVENT_V2;
    ev->repo = rq->route.name;
    ev->principal = rq->who;
    ev->remote = rq->remote;
    berth_event_emit(ev);
}

/*
 * A pull from a proxy-cache project that the upstream must answer first: a missing manifest or blob, or a held tag
 * last compared with the upstream more than proxy.manifest_ttl ago. 1 with rq->need filled, 0 to answer from
 * what is held (also when this is no proxy project), <0 on a database error. *proxied says whether it is one.
 */
static int needs_upstream(berth_dbconn_t *c, const berth_v2_req_t *rq, berth_proxy_kind_t kind, const char *held, int *proxied,
                          double *fresh_for, berth_err_t *err)
{
    berth_db_proxy_t f;
    *proxied = 0;
    if (fresh_for != NULL)
        *fresh_for = 0;
    if (rq->need == NULL || strchr(rq->route.name, '/') == NULL) /* "<project>/<upstream name>": a bare project has none */
        return 0;
    char checked[BERTH_REF_MAX + 16]; /* what proxy_tag_checks names: a tag, or the referrers of a digest */
    berth_proxy_check_name(kind, rq->route.ref, checked, sizeof(checked));
    int rc = berth_db_proxy_of(c, rq->route.name, checked[0] ? checked : NULL, &f, err);
    if (rc <= 0)
        return rc;
    *proxied = 1;
    int fresh = f.tag_age >= 0 && f.tag_age < berth_proxy_manifest_ttl();
    if (fresh && fresh_for != NULL)
        *fresh_for = berth_proxy_manifest_ttl() - f.tag_age;
    if (rq->proxy_done || (held != NULL && (checked[0] == '\0' || fresh)))
        return 0;
    berth_proxy_need_t *n = rq->need;
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    snprintf(n->repo, sizeof(n->repo), "%s", rq->route.name);
    snprintf(n->ref, sizeof(n->ref), "%s", rq->route.ref);
    n->registry_id = f.registry_id;
    n->speed_kb = f.speed_kb;
    snprintf(n->cached, sizeof(n->cached), "%s", held != NULL ? held : "");
    return 1;
}

/* a lookup that found nothing, so a proxy project may fetch it */
static int is_miss(int rc, const berth_err_t *err)
{
    return rc != 0 && err != NULL &&
           (err->oci == BERTH_OCI_MANIFEST_UNKNOWN || err->oci == BERTH_OCI_NAME_UNKNOWN || err->oci == BERTH_OCI_BLOB_UNKNOWN);
}

static int do_manifest_get(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    berth_db_manifest_t m = {0};
    uint64_t epoch = berth_cache_epoch(rq->route.name); /* before the read: see cache.h */
    int rc = berth_db_manifest_get(c, rq->route.name, rq->route.ref, rq->route.ref_is_digest, &m, err);
    int proxied = 0;
    double fresh_for = 0; /* a proxied tag: seconds until its next upstream check is due */
    if (rc == 0 || is_miss(rc, err)) {
        berth_err_t perr;
        berth_err_clear(&perr);
        int need = needs_upstream(c, rq, rq->route.ref_is_digest ? BERTH_PROXY_DIGEST : BERTH_PROXY_TAG, rc == 0 ? m.digest : NULL,
                                  &proxied, &fresh_for, &perr);
        if (need != 0) {
            berth_db_manifest_dispose(&m);
            if (need < 0)
                *err = perr;
            return need < 0 ? need : 0;
        }
    }
    if (rc != 0)
        return rc;
    berth_cache_val_t v = {.media_type = m.media_type, .content = m.content, .len = m.len};
    snprintf(v.digest, sizeof(v.digest), "%s", m.digest);
    /* a proxied tag is answered from memory only until its next upstream check is due (proxy.manifest_ttl after
     * the last one); then its lookups come here again to be revalidated */
    if (!proxied || rq->route.ref_is_digest || fresh_for > 0) {
        v.until = proxied && !rq->route.ref_is_digest ? berth_cache_now() + fresh_for : 0;
        berth_cache_put(BERTH_CACHE_MANIFEST, rq->route.name, rq->route.ref, epoch, &v);
    }
    /* An index only goes to clients that say they understand it; single manifests are always served. */
    if (is_index_type(m.media_type) && !berth_manifest_accepts(rq->accept, rq->accept_len, m.media_type)) {
        berth_db_manifest_dispose(&m);
        return berth_err_set(err, BERTH_OCI_MANIFEST_UNKNOWN, "manifest media type not in Accept");
    }
    manifest_resp(resp, m.digest, m.media_type, m.content, m.len);
    /* a proxied tag must be checked upstream again when due: only berthd knows when */
    resp->edge_keep = !proxied || rq->route.ref_is_digest;
    audit_pull(rq, m.digest);
    m.content = NULL;
    berth_db_manifest_dispose(&m);
    return 0;
}

int berth_v2_cached(berth_registry_t *reg, const berth_v2_req_t *rq, berth_resp_t *resp)
{
    if (!is(rq->method, "GET") && !is(rq->method, "HEAD"))
        return 0;
    berth_cache_val_t v = {0};
    if (rq->route.id == BERTH_V2_MANIFEST_GET) {
        if (!berth_cache_get(BERTH_CACHE_MANIFEST, rq->route.name, rq->route.ref, &v))
            return 0;
        if (is_index_type(v.media_type) && !berth_manifest_accepts(rq->accept, rq->accept_len, v.media_type)) {
            berth_cache_val_dispose(&v);
            return 0; /* the slow path says why */
        }
        berth_resp_init(resp);
        manifest_resp(resp, v.digest, v.media_type, v.content, v.len);
        resp->edge_keep = v.until == 0; /* until: a proxied tag, fresh only so long */
        audit_pull(rq, v.digest);
        v.content = NULL;
        berth_cache_val_dispose(&v);
        return 1;
    }
    if (rq->route.id == BERTH_V2_TAGS && is(rq->method, "GET")) {
        long n;
        char last[BERTH_TAG_MAX + 1], key[BERTH_TAG_MAX + 32];
        if (page_params(rq, &n, last, sizeof(last), NULL) != 0)
            return 0;
        page_key(key, sizeof(key), n, last);
        if (!berth_cache_get(BERTH_CACHE_TAGS, rq->route.name, key, &v))
            return 0;
        berth_resp_init(resp);
        if (v.link != NULL)
            berth_resp_header(resp, "link", "%s", v.link);
        berth_resp_body(resp, 200, v.content, v.len, "application/json");
        v.content = NULL;
        berth_cache_val_dispose(&v);
        return 1;
    }
    if (rq->route.id == BERTH_V2_BLOB_GET) {
        berth_digest_t d;
        if (berth_digest_parse(&d, rq->route.ref, strlen(rq->route.ref), NULL) != 0 ||
            !berth_cache_get(BERTH_CACHE_BLOB, rq->route.name, d.str, &v))
            return 0;
        int64_t size = (int64_t)v.len;
        berth_cache_val_dispose(&v);
        berth_resp_init(resp);
        blob_resp(reg, rq->method, resp, &d, size);
        return 1;
    }
    return 0;
}

static int do_manifest_put(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    if (rq->body_len > BERTH_MANIFEST_MAX)
        return berth_err_set(err, BERTH_OCI_MANIFEST_TOO_BIG, "manifest exceeds %u bytes", BERTH_MANIFEST_MAX);
    int rc;
    if (!rq->from_upstream && (rc = berth_db_project_check(c, rq->route.name, err)) != 0) /* a proxy cache refuses pushes */
        return rc;
    berth_manifest_info_t info;
    if ((rc = berth_manifest_parse(&info, rq->body, rq->body_len, rq->content_type, err)) != 0)
        return rc;
    berth_digest_t d;
    if (rq->route.ref_is_digest) {
        berth_digest_t want;
        berth_digest_parse(&want, rq->route.ref, strlen(rq->route.ref), NULL);
        berth_digest_of(&d, want.alg, rq->body, rq->body_len);
        if (!berth_digest_equal(&d, &want)) {
            rc = berth_err_set(err, BERTH_OCI_DIGEST_INVALID, "manifest digest does not match the reference");
            goto Exit;
        }
    } else {
        berth_digest_of(&d, BERTH_DIGEST_SHA256, rq->body, rq->body_len);
    }
    char *isa_rows = NULL;
    if (is_index_type(info.media_type) &&
        (rc = berth_isa_push_check(reg, c, rq->route.name, rq->body, rq->body_len, &isa_rows, resp, err)) != 0)
        goto Exit;
    berth_db_quota_t quota;
    berth_event_t qe = {.surface = BERTH_EVENT_V2,
                        .repo = rq->route.name,
                        .digest = d.str,
                        .tag = rq->route.ref_is_digest ? NULL : rq->route.ref,
                        .media_type = info.media_type,
                        .principal = rq->who,
                        .remote = rq->remote};
    rc = berth_db_manifest_put(c, rq->route.name, rq->route.ref_is_digest ? NULL : rq->route.ref, &d, &info, rq->body, rq->body_len,
                               isa_rows, &quota, berth_quota_warning_outbox, &qe, err);
    if (rc == 0)
        emit(rq, &(berth_event_t){.kind = BERTH_EVENT_MANIFEST_PUSH,
                                  .digest = d.str,
                                  .tag = rq->route.ref_is_digest ? NULL : rq->route.ref,
                                  .media_type = info.media_type,
                                  .size = (int64_t)rq->body_len,
                                  .isa_rows = isa_rows});
    if (rc == 0 || quota.refused)
        berth_quota_push_events(c, &quota, &qe);
    free(isa_rows);
    if (rc != 0)
        goto Exit;
    berth_resp_header(resp, "location", "/v2/%s/manifests/%s", rq->route.name, d.str);
    berth_resp_header(resp, "docker-content-digest", "%s", d.str);
    if (info.subject != NULL)
        berth_resp_header(resp, "oci-subject", "%s", info.subject);
    berth_resp_body(resp, 201, NULL, 0, NULL);
    berth_log_info("manifest %s@%s stored%s%s", rq->route.name, d.str, rq->route.ref_is_digest ? "" : " as ",
                   rq->route.ref_is_digest ? "" : rq->route.ref);
Exit:
    berth_manifest_info_dispose(&info);
    return rc;
}

static int do_manifest_delete(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp,
                              berth_err_t *err)
{
    int rc = rq->route.ref_is_digest ? berth_db_manifest_delete(c, rq->route.name, rq->route.ref, err)
                                     : berth_db_tag_delete(c, rq->route.name, rq->route.ref, err);
    if (rc == 0) {
        if (rq->route.ref_is_digest)
            emit(rq, &(berth_event_t){.kind = BERTH_EVENT_MANIFEST_DELETE, .digest = rq->route.ref, .size = -1});
        else
            emit(rq, &(berth_event_t){.kind = BERTH_EVENT_TAG_DELETE, .tag = rq->route.ref, .size = -1});
        berth_resp_body(resp, 202, NULL, 0, NULL);
    }
    return rc;
}

static int do_blob_get(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    berth_digest_t d;
    int64_t size;
    int rc = berth_digest_parse(&d, rq->route.ref, strlen(rq->route.ref), err);
    if (rc != 0)
        return rc;
    uint64_t epoch = berth_cache_epoch(rq->route.name);
    if ((rc = berth_db_blob_stat(c, rq->route.name, d.str, &size, err)) != 0) {
        int head = is(rq->method, "HEAD");
        if (head && is_miss(rc, err) && berth_proxy_head_lookup(rq->route.name, d.str, &size)) {
            if (size < 0) /* the upstream's 404, lately: BLOB_UNKNOWN without asking again */
                return rc;
            /* what the upstream's HEAD said, within the TTL: a length and no body (core/resp.h) */
            berth_resp_header(resp, "docker-content-digest", "%s", d.str);
            berth_resp_body(resp, 200, NULL, (size_t)size, "application/octet-stream");
            return 0;
        }
        berth_err_t perr;
        berth_err_clear(&perr);
        int proxied, need = is_miss(rc, err) ? needs_upstream(c, rq, head ? BERTH_PROXY_BLOB_HEAD : BERTH_PROXY_BLOB, NULL,
                                                              &proxied, NULL, &perr)
                                             : 0;
        if (need < 0)
            *err = perr;
        return need == 0 ? rc : need < 0 ? need : 0;
    }
    berth_cache_val_t v = {.len = (size_t)size};
    snprintf(v.digest, sizeof(v.digest), "%s", d.str);
    berth_cache_put(BERTH_CACHE_BLOB, rq->route.name, d.str, epoch, &v);
    blob_resp(reg, rq->method, resp, &d, size);
    return 0;
}

static int do_blob_delete(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    berth_digest_t d;
    int rc = berth_digest_parse(&d, rq->route.ref, strlen(rq->route.ref), err);
    if (rc == 0 && (rc = berth_db_blob_unlink(c, rq->route.name, d.str, err)) == 0) {
        emit(rq, &(berth_event_t){.kind = BERTH_EVENT_BLOB_DELETE, .digest = d.str, .size = -1});
        berth_resp_body(resp, 202, NULL, 0, NULL);
    }
    return rc;
}

static int do_referrers(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    char at[256];
    const char *filter = NULL;
    if (rq->query != NULL) {
        long r = berth_query_get(rq->query, rq->query_len, "artifactType", at, sizeof(at));
        if (r == -2)
            return berth_err_set(err, BERTH_OCI_PARAM_INVALID, "invalid artifactType");
        if (r >= 0)
            filter = at;
    }
    berth_err_t perr;
    berth_err_clear(&perr);
    int proxied, need = needs_upstream(c, rq, BERTH_PROXY_REFERRERS, "", &proxied, NULL, &perr); /* what is held always answers */
    if (need != 0) {
        if (need < 0)
            *err = perr;
        return need < 0 ? need : 0;
    }
    berth_db_referrer_t *refs = NULL;
    size_t n = 0;
    int rc = berth_db_referrers(c, rq->route.name, rq->route.ref, filter, &refs, &n, err);
    if (rc != 0)
        return rc;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *d =
            json_pack("{s:s,s:s,s:I}", "mediaType", refs[i].media_type, "digest", refs[i].digest, "size", (json_int_t)refs[i].size);
        if (refs[i].artifact_type != NULL)
            json_object_set_new(d, "artifactType", json_string(refs[i].artifact_type));
        if (refs[i].annotations != NULL)
            json_object_set_new(d, "annotations", json_loads(refs[i].annotations, 0, NULL));
        json_array_append_new(arr, d);
    }
    berth_db_referrers_free(refs, n);
    if (filter != NULL)
        berth_resp_header(resp, "oci-filters-applied", "artifactType");
    json_resp(resp, 200, json_pack("{s:i,s:s,s:o}", "schemaVersion", 2, "mediaType", BERTH_MT_OCI_INDEX, "manifests", arr),
              BERTH_MT_OCI_INDEX);
    return 0;
}

static int do_base(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err)
{
    berth_resp_body(resp, 200, strdup("{}"), 2, "application/json");
    return 0;
}

typedef int (*handler_fn)(berth_registry_t *reg, berth_dbconn_t *c, const berth_v2_req_t *rq, berth_resp_t *resp, berth_err_t *err);

/*
 * The handler column of the /v2 route table, at the route's index. The paths, methods and scopes are in
 * core/route.c, where the parser and the gate (auth/) read them: core cannot name the service that answers, so
 * what answers lives here. Upload routes have no row: the upload listener answers them (upload.c), as it must
 * stream their bodies. unit_routes proves every other route has one.
 */
static const struct {
    handler_fn fn;
    int no_db; /* answers without the database: /v2/ keeps answering while it is down */
} handlers[BERTH_V2__COUNT] = {
    [BERTH_V2_BASE] = {do_base, 1},
    [BERTH_V2_CATALOG] = {do_catalog},
    [BERTH_V2_TAGS] = {do_tags},
    [BERTH_V2_MANIFEST_GET] = {do_manifest_get},
    [BERTH_V2_MANIFEST_PUT] = {do_manifest_put},
    [BERTH_V2_MANIFEST_DELETE] = {do_manifest_delete},
    [BERTH_V2_BLOB_GET] = {do_blob_get},
    [BERTH_V2_BLOB_DELETE] = {do_blob_delete},
    [BERTH_V2_REFERRERS] = {do_referrers},
};
_Static_assert(sizeof(handlers) / sizeof(handlers[0]) == BERTH_V2__COUNT, "the handler column has a row per route id");

int berth_v2_answers(berth_route_id_t id)
{
    return id > BERTH_V2_NONE && id < BERTH_V2__COUNT && handlers[id].fn != NULL;
}

void berth_v2_handle(berth_registry_t *reg, const berth_v2_req_t *rq, berth_resp_t *resp)
{
    berth_err_t err;
    berth_err_clear(&err);
    berth_resp_init(resp);
    if (!berth_v2_answers(rq->route.id)) {
        berth_err_set(&err, BERTH_OCI_NOT_FOUND, NULL);
        berth_resp_error(resp, &err);
        return;
    }
    berth_dbconn_t *c = NULL;
    if (!handlers[rq->route.id].no_db && (c = berth_db_acquire(reg->db, &err)) == NULL) {
        berth_resp_error(resp, &err);
        return;
    }
    if (c != NULL)
        berth_db_set_actor(c, rq->who); /* the operator of the webhook events it queues */
    int rc = handlers[rq->route.id].fn(reg, c, rq, resp, &err);
    if (c != NULL)
        berth_db_release(reg->db, c);
    if (rc != 0) {
        if (berth_err_status(err.oci) >= 500)
            berth_log_err("%s /v2/%s (%s): %s", rq->method, rq->route.name, berth_route_label(rq->route.kind), err.msg);
        berth_resp_dispose(resp);
        berth_resp_init(resp);
        berth_resp_error(resp, &err);
    }
}
