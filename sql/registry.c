#include "sql/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/ref.h"
#include "sql/db_internal.h"
#include "sql/immutable.h"
#include "sql/webhook.h"

/* All SQL of this file, parameters always out of line. */
/* A repository of a proxy-cache project (migration 0140): its manifests are stored before what they reference,
 * which is fetched from the upstream when first pulled (a child manifest of an index, a layer). */
#define PROXIED(rid)                                                                                                               \
    "EXISTS (SELECT 1 FROM repositories r JOIN projects p ON p.id = r.project_id WHERE r.id = " rid                                \
    " AND p.registry_id IS NOT NULL)"

const berth_db__stmt_t berth_db__registry_stmts[BERTH_SQL__COUNT] = {
    BERTH_DB__STMT(BERTH_SQL_REPO_ID, "SELECT id FROM repositories WHERE name = $1", 1),
    /* DO UPDATE (not DO NOTHING) so RETURNING yields the id even when a concurrent push created the row */
    /* its quota row with the default limit in the same statement (the projects trigger would make it unlimited) */
    BERTH_DB__STMT(BERTH_SQL_PROJECT_ENSURE,
                   "WITH p AS (INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name "
                   "RETURNING id), q AS (INSERT INTO quotas (project_id, hard_storage) SELECT id, $2::bigint FROM p "
                   "ON CONFLICT (project_id) DO NOTHING) SELECT id FROM p",
                   2),
    BERTH_DB__STMT(
        BERTH_SQL_REPO_ENSURE,
        "INSERT INTO repositories (project_id, name) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name "
        "RETURNING id",
        2),
    BERTH_DB__STMT(BERTH_SQL_PROJECT_ID, "SELECT id FROM projects WHERE name = $1", 1),
    BERTH_DB__STMT(BERTH_SQL_PROJECT_PUSHABLE, "SELECT (registry_id IS NULL)::int FROM projects WHERE name = $1", 1),
    /* delivered at COMMIT to every berthd listening (sql/listen.c), never for a rolled-back change */
    BERTH_DB__STMT(BERTH_SQL_NOTIFY, "SELECT pg_notify('berth_invalidate', $1)", 1),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_EXPIRE,
                   "DELETE FROM upload_sessions WHERE updated_at < now() - make_interval(secs => $1::int) RETURNING id, "
                   "coalesce(state, '')",
                   1),
    BERTH_DB__STMT(BERTH_SQL_BLOB_IN_REPO,
                   "SELECT b.size FROM repositories r JOIN repository_blobs rb ON rb.repository_id = r.id "
                   "JOIN blobs b ON b.digest = rb.digest WHERE r.name = $1 AND rb.digest = $2",
                   2),
    /* DO UPDATE (a no-op change) locks an existing row: one GC is sweeping is waited for and, once gone, inserted
     * again, so the link below never meets a row deleted under it */
    BERTH_DB__STMT(BERTH_SQL_BLOB_INSERT,
                   "INSERT INTO blobs (digest, size) VALUES ($1, $2) ON CONFLICT (digest) DO UPDATE SET size = blobs.size", 2),
    BERTH_DB__STMT(BERTH_SQL_BLOB_LINK,
                   "INSERT INTO repository_blobs (repository_id, digest) VALUES ($1, $2) ON CONFLICT DO NOTHING", 2),
    BERTH_DB__STMT(
        BERTH_SQL_BLOB_UNLINK,
        "DELETE FROM repository_blobs rb USING repositories r WHERE r.id = rb.repository_id AND r.name = $1 AND rb.digest = $2", 2),
    BERTH_DB__STMT(
        BERTH_SQL_MANIFEST_INSERT,
        "INSERT INTO manifests (repository_id, digest, media_type, artifact_type, subject_digest, annotations, size, content) "
        "VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8) ON CONFLICT (repository_id, digest) DO NOTHING RETURNING id",
        8),
    /* locks the row like BERTH_SQL_MISSING_MANIFEST: a re-pushed manifest (or a subject) is not swept under the PUT */
    BERTH_DB__STMT(BERTH_SQL_MANIFEST_ID, "SELECT id FROM manifests WHERE repository_id = $1 AND digest = $2 FOR KEY SHARE", 2),
    /* every reference of a manifest in one statement: one round trip and one run of the quota trigger per push,
     * not one per layer (a layer listed twice is one row) */
    BERTH_DB__STMT(BERTH_SQL_REF_INSERT,
                   "INSERT INTO manifest_refs (manifest_id, digest, kind, size) SELECT $1::bigint, x.d, x.k, x.s FROM "
                   "unnest($2::text[], $3::smallint[], $4::bigint[]) AS x(d, k, s) ON CONFLICT DO NOTHING",
                   4),
    BERTH_DB__STMT(BERTH_SQL_TAG_UPSERT,
                   "INSERT INTO tags (repository_id, name, manifest_id) VALUES ($1, $2, $3) ON CONFLICT (repository_id, name) "
                   "DO UPDATE SET manifest_id = EXCLUDED.manifest_id, updated_at = now()",
                   3),
    /* The first referenced blob (child manifest) the repository lacks, locking FOR KEY SHARE those it has until the
     * PUT commits: GC sweeps a row only after locking it FOR UPDATE SKIP LOCKED, so a row locked here is never swept
     * under this PUT, and one GC locked first is gone (not returned) once GC commits. EXCEPT reads both sides whole. */
    BERTH_DB__STMT(BERTH_SQL_MISSING_BLOB,
                   "SELECT d FROM (SELECT unnest($2::text[]) AS d EXCEPT SELECT l.digest FROM (SELECT digest FROM repository_blobs "
                   "WHERE repository_id = $1 AND digest = ANY($2::text[]) ORDER BY digest FOR KEY SHARE) l) x WHERE NOT " PROXIED(
                       "$1") " LIMIT 1",
                   2),
    BERTH_DB__STMT(
        BERTH_SQL_MISSING_MANIFEST,
        "SELECT d FROM (SELECT unnest($2::text[]) AS d EXCEPT SELECT l.digest FROM (SELECT digest FROM manifests WHERE "
        "repository_id = $1 AND digest = ANY($2::text[]) ORDER BY digest FOR KEY SHARE) l) x WHERE NOT " PROXIED("$1") " LIMIT 1",
        2),
    /* held by an upload from placing the blob file until its row commits (sql/gc.c takes it exclusively) */
    BERTH_DB__STMT(BERTH_SQL_BLOB_FILE_LOCK,
                   "SELECT pg_advisory_xact_lock_shared(" BERTH_DB__BLOB_FILE_LOCK_CLASS ", hashtext($1::text))", 1),
    BERTH_DB__STMT(BERTH_SQL_MANIFEST_BY_TAG,
                   "SELECT m.digest, m.media_type, m.content FROM repositories r JOIN tags t ON t.repository_id = r.id "
                   "JOIN manifests m ON m.id = t.manifest_id WHERE r.name = $1 AND t.name = $2",
                   2),
    BERTH_DB__STMT(BERTH_SQL_MANIFEST_BY_DIGEST,
                   "SELECT m.digest, m.media_type, m.content FROM repositories r JOIN manifests m ON m.repository_id = r.id "
                   "WHERE r.name = $1 AND m.digest = $2",
                   2),
    BERTH_DB__STMT(BERTH_SQL_MANIFEST_DELETE,
                   "DELETE FROM manifests m USING repositories r WHERE r.id = m.repository_id AND r.name = $1 AND m.digest = $2",
                   2),
    BERTH_DB__STMT(BERTH_SQL_TAG_DELETE,
                   "DELETE FROM tags t USING repositories r WHERE r.id = t.repository_id AND r.name = $1 AND t.name = $2", 2),
    BERTH_DB__STMT(BERTH_SQL_TAGS_LIST, "SELECT name FROM tags WHERE repository_id = $1 AND name > $2 ORDER BY name LIMIT $3", 3),
    BERTH_DB__STMT(BERTH_SQL_CATALOG, "SELECT name FROM repositories WHERE name > $1 ORDER BY name LIMIT $2", 2),
    BERTH_DB__STMT(BERTH_SQL_REFERRERS,
                   "SELECT m.digest, m.media_type, m.artifact_type, m.size, m.annotations::text FROM repositories r "
                   "JOIN manifests m ON m.repository_id = r.id WHERE r.name = $1 AND m.subject_digest = $2 "
                   "AND ($3::text IS NULL OR m.artifact_type = $3) ORDER BY m.digest",
                   3),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_CREATE, "INSERT INTO upload_sessions (id, repository) VALUES ($1, $2)", 2),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_GET, "SELECT repository FROM upload_sessions WHERE id = $1", 1),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_DELETE, "DELETE FROM upload_sessions WHERE id = $1", 1),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_TOUCH, "UPDATE upload_sessions SET updated_at = now() WHERE id = $1", 1),
    /* one writer per session across instances: NOWAIT, a second writer is refused rather than queued */
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_LOCK,
                   "SELECT coalesce(state, ''), coalesce(hash_state, '') FROM upload_sessions WHERE id = $1 AND repository = $2 "
                   "FOR UPDATE NOWAIT",
                   2),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_SAVE,
                   "UPDATE upload_sessions SET state = $2, hash_state = nullif($3, ''), updated_at = now() WHERE id = $1", 3),
    BERTH_DB__STMT(BERTH_SQL_UPLOAD_STATE, "SELECT coalesce(state, '') FROM upload_sessions WHERE id = $1 AND repository = $2", 2),
    /* the end of a manifest PUT in one round trip: the repository touched, caches told (at commit), the push event
     * queued; $1 repository id, $2 repository, $3 actor, $4 digest, $5 tag or NULL */
    BERTH_DB__STMT(BERTH_SQL_PUSH_DONE,
                   "WITH t AS (UPDATE repositories SET updated_at = now() WHERE id = $1::bigint RETURNING id) SELECT "
                   "pg_notify('berth_invalidate', $2::text), berth_webhook_enqueue(NULL::text, 'PUSH_ARTIFACT', $3::text, "
                   "$2::text, $4::text, $5::text, NULL::jsonb), (SELECT count(*) FROM t)",
                   5),
    BERTH_DB__STMT(BERTH_SQL_REPO_DELETE, "DELETE FROM repositories WHERE name = $1", 1),
    /* the row locked FOR UPDATE and the GC's release ledger folded into it (0205_quota_releases.sql), so `used` is
       current but for releases committing meanwhile (they only lower it) */
    BERTH_DB__STMT(BERTH_SQL_QUOTA_LOCK, "SELECT quota_id, hard, used FROM berth_quota_enter($1::bigint)", 1),
    BERTH_DB__STMT(BERTH_SQL_QUOTA_ENSURE,
                   "SELECT berth_quota_lock(ARRAY(SELECT project_id FROM repositories WHERE id = $1::bigint))", 1),
    BERTH_DB__STMT(BERTH_SQL_QUOTA_USED, "SELECT used_storage FROM quotas WHERE id = $1::bigint", 1),
    /* a delete takes the quota lock before its rows, in the order a manifest PUT takes them */
    BERTH_DB__STMT(BERTH_SQL_QUOTA_LOCK_REPO, "SELECT berth_quota_lock(ARRAY(SELECT project_id FROM repositories WHERE name = $1))",
                   1),
};

static PGresult *run(berth_dbconn_t *c, berth_sql_id_t id, const char *const *values, berth_err_t *err)
{
    return berth_db__run(c, id, values, NULL, NULL, 0, err);
}

/* Run a statement that affects rows; returns the count or a negative code. */
static int run_count(berth_dbconn_t *c, berth_sql_id_t id, const char *const *values, berth_err_t *err)
{
    PGresult *res = run(c, id, values, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int n = (int)strtol(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return n;
}

/* First column of the first row as int64; BERTH_ENOTFOUND for no row. */
static int run_int64(berth_dbconn_t *c, berth_sql_id_t id, const char *const *values, int64_t *out, berth_err_t *err)
{
    PGresult *res = run(c, id, values, err);
    if (res == NULL)
        return err != NULL && err->code != 0 ? err->code : BERTH_ERROR; /* never 0: callers read *out on 0 */
    int rc = BERTH_ENOTFOUND;
    if (PQntuples(res) > 0) {
        *out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        rc = 0;
    }
    PQclear(res);
    return rc;
}

void berth_db_manifest_dispose(berth_db_manifest_t *m)
{
    free(m->media_type);
    free(m->content);
    memset(m, 0, sizeof(*m));
}

void berth_strlist_dispose(berth_strlist_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

void berth_db_referrers_free(berth_db_referrer_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].media_type);
        free(r[i].artifact_type);
        free(r[i].annotations);
    }
    free(r);
}

int berth_db_repo_exists(berth_dbconn_t *c, const char *repo, berth_err_t *err)
{
    int64_t id;
    const char *p[] = {repo};
    int rc = run_int64(c, BERTH_SQL_REPO_ID, p, &id, err);
    return rc == 0 ? 1 : rc == BERTH_ENOTFOUND ? 0 : rc;
}

int berth_db_blob_stat(berth_dbconn_t *c, const char *repo, const char *digest, int64_t *size_out, berth_err_t *err)
{
    const char *p[] = {repo, digest};
    int rc = run_int64(c, BERTH_SQL_BLOB_IN_REPO, p, size_out, err);
    if (rc == BERTH_ENOTFOUND)
        return berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, NULL);
    return rc;
}

/* projects.auto_create: set once at start, before any thread runs a push (Harbor refuses a push into a
 * project that does not exist; so does Berth unless the operator asks otherwise) */
static int projects_auto_create;
static char quota_default[24] = "-1"; /* quota.default_storage_limit of the projects auto-creation makes */

void berth_db_projects_auto_create(int on)
{
    projects_auto_create = on;
}

void berth_db_quota_default(int64_t limit)
{
    snprintf(quota_default, sizeof(quota_default), "%lld", (long long)limit);
}

/* The id of the project `repo` belongs to; a missing project is NAME_UNKNOWN unless auto-creation is on. */
static int project_of(berth_dbconn_t *c, const char *repo, int64_t *pid, berth_err_t *err)
{
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    memcpy(project, repo, plen);
    project[plen] = '\0';
    const char *pp[] = {project};
    int rc = run_int64(c, BERTH_SQL_PROJECT_ID, pp, pid, err);
    if (rc != BERTH_ENOTFOUND)
        return rc;
    if (projects_auto_create) {
        const char *ep[] = {project, quota_default};
        return run_int64(c, BERTH_SQL_PROJECT_ENSURE, ep, pid, err);
    }
    return berth_err_set(err, BERTH_OCI_NAME_UNKNOWN, "project %s not found: create it first (POST /api/v2.0/projects)", project);
}

int berth_db_project_check(berth_dbconn_t *c, const char *repo, berth_err_t *err)
{
    char project[BERTH_NAME_MAX + 1];
    size_t plen = berth_ref_project_len(repo, strlen(repo));
    memcpy(project, repo, plen);
    project[plen] = '\0';
    const char *pp[] = {project};
    int64_t pushable;
    int rc = run_int64(c, BERTH_SQL_PROJECT_PUSHABLE, pp, &pushable, err);
    if (rc == BERTH_ENOTFOUND)
        return projects_auto_create ? 0 : project_of(c, repo, &pushable, err); /* auto-created with the first write */
    if (rc == 0 && !pushable) /* Harbor: a proxy cache holds what its upstream has, nothing else */
        return berth_err_set(err, BERTH_OCI_DENIED, "project %s is a proxy cache: push is not allowed", project);
    return rc;
}

/* Inside a transaction: the repository id, creating the repository on first use (and the project when
 * projects.auto_create is on). The plain SELECT serves the common case without writing. */
static int ensure_repo(berth_dbconn_t *c, const char *repo, int64_t *id_out, char idbuf[24], berth_err_t *err)
{
    const char *rp0[] = {repo};
    int rc = run_int64(c, BERTH_SQL_REPO_ID, rp0, id_out, err);
    if (rc == BERTH_ENOTFOUND) {
        char pidbuf[24];
        int64_t pid;
        if ((rc = project_of(c, repo, &pid, err)) != 0)
            return rc;
        snprintf(pidbuf, sizeof(pidbuf), "%lld", (long long)pid);
        const char *rp[] = {pidbuf, repo};
        rc = run_int64(c, BERTH_SQL_REPO_ENSURE, rp, id_out, err);
    }
    if (rc != 0)
        return rc;
    snprintf(idbuf, 24, "%lld", (long long)*id_out);
    return 0;
}

int berth_db_blob_commit(berth_dbconn_t *c, const char *repo, const char *digest, int64_t size, const char *upload_id,
                         berth_db_place_fn place, void *place_arg, berth_err_t *err)
{
    int64_t rid;
    char ridbuf[24], sizebuf[24];
    snprintf(sizebuf, sizeof(sizebuf), "%lld", (long long)size);
    int rc;
    if ((rc = berth_db_begin(c, err)) != 0)
        return rc;
    /* the file is placed (or found in place) under the digest's file lock, and the lock is held until the row
     * commits: GC, which deletes the row first and unlinks the file later under the same lock taken exclusively,
     * then finds the row again and leaves the file */
    const char *fp[] = {digest};
    if (place != NULL && ((rc = run_count(c, BERTH_SQL_BLOB_FILE_LOCK, fp, err)) < 0 || (rc = place(place_arg, err)) != 0))
        goto Fail;
    const char *bp[] = {digest, sizebuf};
    if ((rc = ensure_repo(c, repo, &rid, ridbuf, err)) != 0 || (rc = run_count(c, BERTH_SQL_BLOB_INSERT, bp, err)) < 0)
        goto Fail;
    const char *lp[] = {ridbuf, digest};
    if ((rc = run_count(c, BERTH_SQL_BLOB_LINK, lp, err)) < 0)
        goto Fail;
    if (upload_id != NULL) {
        const char *up[] = {upload_id};
        if ((rc = run_count(c, BERTH_SQL_UPLOAD_DELETE, up, err)) < 0)
            goto Fail;
    }
    return berth_db_commit(c, err);
Fail:
    berth_db_rollback(c);
    return rc;
}

int berth_db_blob_mount(berth_dbconn_t *c, const char *repo, const char *from, const char *digest, int64_t *size_out,
                        berth_err_t *err)
{
    int rc;
    if ((rc = berth_db_begin(c, err)) != 0)
        return rc;
    const char *fp[] = {from, digest};
    if ((rc = run_int64(c, BERTH_SQL_BLOB_IN_REPO, fp, size_out, err)) != 0) {
        if (rc == BERTH_ENOTFOUND)
            berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, NULL);
        goto Fail;
    }
    int64_t rid;
    char ridbuf[24];
    const char *lp[] = {ridbuf, digest};
    if ((rc = ensure_repo(c, repo, &rid, ridbuf, err)) != 0 || (rc = run_count(c, BERTH_SQL_BLOB_LINK, lp, err)) < 0) {
        if (rc == BERTH_ECONFLICT) /* GC deleted the blob row meanwhile (the link's foreign key): upload it instead */
        {
            berth_err_set(err, BERTH_OCI_BLOB_UNKNOWN, NULL);
            rc = BERTH_ENOTFOUND;
        }
        goto Fail;
    }
    return berth_db_commit(c, err);
Fail:
    berth_db_rollback(c);
    return rc;
}

typedef int (*removable_fn)(berth_dbconn_t *c, const char *repo, const char *what, berth_err_t *err);

static int blob_removable(berth_dbconn_t *c, const char *repo, const char *what, berth_err_t *err)
{
    (void)c, (void)repo, (void)what, (void)err;
    return 0;
}

static int repo_removable(berth_dbconn_t *c, const char *repo, const char *what, berth_err_t *err)
{
    (void)what;
    return berth_db__repo_removable(c, repo, err);
}

/* What a delete announces to webhooks (in its own transaction: the outbox) */
typedef enum { HOOK_NONE, HOOK_DIGEST, HOOK_TAG } hook_t;

/* One row-deleting statement, the invalidation notice and the webhook event, in one transaction, after
 * `removable` (immutable tag rules) agreed in that transaction. */
static int delete_and_notify(berth_dbconn_t *c, berth_sql_id_t id, removable_fn removable, const char *repo, const char *what,
                             berth_err_t *err, berth_oci_t unknown, const char *msg, hook_t hook)
{
    int rc = berth_db_begin(c, err);
    if (rc != 0)
        return rc;
    const char *p[] = {repo, what}, *np[] = {repo};
    /* deleting manifests changes the project's quota usage (its triggers lock the quota row): take that lock
       first, as a manifest PUT does */
    if ((id == BERTH_SQL_MANIFEST_DELETE || id == BERTH_SQL_REPO_DELETE) &&
        (rc = run_count(c, BERTH_SQL_QUOTA_LOCK_REPO, np, err)) < 0) {
        berth_db_rollback(c);
        return rc;
    }
    if ((rc = removable(c, repo, what, err)) != 0) {
        berth_db_rollback(c);
        return rc;
    }
    int n = run_count(c, id, p, err);
    if (n < 0 || (n > 0 && (n = run_count(c, BERTH_SQL_NOTIFY, np, err)) < 0)) {
        berth_db_rollback(c);
        return n;
    }
    if (n > 0 && hook != HOOK_NONE &&
        (rc = berth_db_webhook_enqueue(c, NULL, "DELETE_ARTIFACT", repo, hook == HOOK_DIGEST ? what : NULL,
                                       hook == HOOK_TAG ? what : NULL, NULL, err)) != 0) {
        berth_db_rollback(c);
        return rc;
    }
    if (n == 0) {
        berth_db_rollback(c);
        return msg != NULL ? berth_err_set(err, unknown, "%s", msg) : berth_err_set(err, unknown, NULL);
    }
    return berth_db_commit(c, err);
}

int berth_db_blob_unlink(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err)
{
    return delete_and_notify(c, BERTH_SQL_BLOB_UNLINK, blob_removable, repo, digest, err, BERTH_OCI_BLOB_UNKNOWN, NULL, HOOK_NONE);
}

/* The three array literals of BERTH_SQL_REF_INSERT, aligned: digests, kinds and sizes of every reference.
 * Returns 0, or -1 when out of memory (nothing to free then). */
static int refs_arrays(const berth_manifest_info_t *info, char **digests, char **kinds, char **sizes)
{
    size_t dcap = 3 + info->nrefs * (BERTH_DIGEST_MAX + 1), kcap = 3 + info->nrefs * 2, scap = 3 + info->nrefs * 21;
    char *d = malloc(dcap), *k = malloc(kcap), *z = malloc(scap);
    if (d == NULL || k == NULL || z == NULL) {
        free(d);
        free(k);
        free(z);
        return -1;
    }
    size_t dn = 0, kn = 0, zn = 0;
    d[dn++] = k[kn++] = z[zn++] = '{';
    for (size_t i = 0; i < info->nrefs; i++) {
        const char *sep = i > 0 ? "," : "";
        dn += (size_t)snprintf(d + dn, dcap - dn, "%s%s", sep, info->refs[i].digest);
        kn += (size_t)snprintf(k + kn, kcap - kn, "%s%d", sep, (int)info->refs[i].kind);
        zn += (size_t)snprintf(z + zn, scap - zn, "%s%lld", sep, (long long)info->refs[i].size);
    }
    snprintf(d + dn, dcap - dn, "}");
    snprintf(k + kn, kcap - kn, "}");
    snprintf(z + zn, scap - zn, "}");
    *digests = d;
    *kinds = k;
    *sizes = z;
    return 0;
}

/* '{d1,d2}' array literal: digests are [a-z0-9:] only, so no quoting is needed. */
static char *digest_array(const berth_manifest_info_t *info, berth_ref_kind_t kind, size_t *count)
{
    size_t cap = 3 + info->nrefs * (BERTH_DIGEST_MAX + 1), n = 0;
    char *s = malloc(cap);
    s[n++] = '{';
    *count = 0;
    for (size_t i = 0; i < info->nrefs; i++) {
        if (info->refs[i].kind != kind)
            continue;
        if (*count > 0)
            s[n++] = ',';
        n += (size_t)snprintf(s + n, cap - n, "%s", info->refs[i].digest);
        (*count)++;
    }
    s[n++] = '}';
    s[n] = '\0';
    return s;
}

static int check_missing(berth_dbconn_t *c, const char *ridbuf, const berth_manifest_info_t *info, berth_ref_kind_t kind,
                         berth_err_t *err)
{
    size_t count;
    char *arr = digest_array(info, kind, &count);
    int rc = 0;
    if (count > 0) {
        const char *p[] = {ridbuf, arr};
        PGresult *res = run(c, kind == BERTH_REF_BLOB ? BERTH_SQL_MISSING_BLOB : BERTH_SQL_MISSING_MANIFEST, p, err);
        if (res == NULL)
            rc = err != NULL ? err->code : BERTH_ERROR;
        else if (PQntuples(res) > 0)
            rc = berth_err_set(err, BERTH_OCI_MANIFEST_BLOB_UNKNOWN, "%s %s is unknown to this repository",
                               kind == BERTH_REF_BLOB ? "blob" : "manifest", PQgetvalue(res, 0, 0));
        if (res != NULL)
            PQclear(res);
    }
    free(arr);
    return rc;
}

/* Quota step 1 of a manifest PUT: lock the project's quota row (created if missing) and read limit and usage. */
static int quota_lock(berth_dbconn_t *c, const char *ridbuf, char qidbuf[24], berth_db_quota_t *q, berth_err_t *err)
{
    const char *p[] = {ridbuf};
    for (int attempt = 0; attempt < 2; attempt++) {
        PGresult *res = run(c, BERTH_SQL_QUOTA_LOCK, p, err);
        if (res == NULL)
            return err != NULL && err->code != 0 ? err->code : BERTH_ERROR;
        int found = PQntuples(res) > 0;
        if (found) {
            snprintf(qidbuf, 24, "%s", PQgetvalue(res, 0, 0));
            q->hard = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
            q->before = q->after = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        }
        PQclear(res);
        if (found)
            return 0;
        int rc = run_count(c, BERTH_SQL_QUOTA_ENSURE, p, err); /* a project made before its quota row could be */
        if (rc < 0)
            return rc;
    }
    return berth_err_set(err, BERTH_OCI_INTERNAL, "no quota row for repository %s", ridbuf);
}

/* Quota step 2, after every row of the push is in: the triggers have charged what is new to the project; refuse
 * a push that adds bytes beyond the limit (Harbor's rule and sentence, with exact byte counts). */
static int quota_check(berth_dbconn_t *c, const char *qidbuf, berth_db_quota_t *q, berth_err_t *err)
{
    const char *p[] = {qidbuf};
    int rc = run_int64(c, BERTH_SQL_QUOTA_USED, p, &q->after, err);
    if (rc != 0)
        return rc;
    if (q->hard < 0 || q->after <= q->before || q->after <= q->hard)
        return 0;
    q->refused = 1;
    char add[BERTH_BYTES_HUMAN_MAX], used[BERTH_BYTES_HUMAN_MAX], hard[BERTH_BYTES_HUMAN_MAX];
    return berth_err_set(err, BERTH_OCI_DENIED,
                         "quota exceeded: adding %s (%lld bytes) of storage resource, which when updated to current usage of "
                         "%s (%lld bytes) will exceed the configured upper limit of %s (%lld bytes)",
                         berth_bytes_human(q->after - q->before, add), (long long)(q->after - q->before),
                         berth_bytes_human(q->before, used), (long long)q->before, berth_bytes_human(q->hard, hard),
                         (long long)q->hard);
}

int berth_db_manifest_put(berth_dbconn_t *c, const char *repo, const char *tag, const berth_digest_t *digest,
                          const berth_manifest_info_t *info, const char *body, size_t len, const char *isa_rows,
                          berth_db_quota_t *quota, berth_db_push_hook_fn hook, void *hook_arg, berth_err_t *err)
{
    int64_t rid = 0, mid = 0; /* set on every path that reaches their use; gcc -O2 cannot see it */
    char ridbuf[24], midbuf[24], sizebuf[24], qidbuf[24];
    berth_db_quota_t qbuf, *q = quota != NULL ? quota : &qbuf;
    memset(q, 0, sizeof(*q));
    int rc;
    if ((rc = berth_db_begin(c, err)) != 0)
        return rc;
    /* the quota row first: every writer of a project's manifests takes it before any manifest or blob row lock
       (deletes, GC sweeps), so none of them can wait on the other in reverse order */
    if ((rc = ensure_repo(c, repo, &rid, ridbuf, err)) != 0 || (rc = quota_lock(c, ridbuf, qidbuf, q, err)) != 0 ||
        (rc = check_missing(c, ridbuf, info, BERTH_REF_BLOB, err)) != 0 ||
        (rc = check_missing(c, ridbuf, info, BERTH_REF_MANIFEST, err)) != 0)
        goto Fail;
    if (info->subject != NULL) { /* a stored subject stays while its referrer is pushed (it may also be absent) */
        int64_t sid;
        const char *sp[] = {ridbuf, info->subject};
        if ((rc = run_int64(c, BERTH_SQL_MANIFEST_ID, sp, &sid, err)) != 0 && rc != BERTH_ENOTFOUND)
            goto Fail;
    }
    snprintf(sizebuf, sizeof(sizebuf), "%zu", len);
    const char *mp[] = {ridbuf,        digest->str,       info->media_type, info->artifact_type,
                        info->subject, info->annotations, sizebuf,          body};
    int lengths[8] = {0, 0, 0, 0, 0, 0, 0, (int)len}, formats[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    int inserted = 0;
    /* an existing manifest is locked (MANIFEST_ID); one GC deleted between the insert and that lock is inserted
     * again, so a PUT that succeeds always leaves its manifest stored */
    for (int attempt = 0;; attempt++) {
        PGresult *res = berth_db__run(c, BERTH_SQL_MANIFEST_INSERT, mp, lengths, formats, 0, err);
        if (res == NULL) {
            rc = err != NULL ? err->code : BERTH_ERROR;
            goto Fail;
        }
        inserted = PQntuples(res) > 0;
        if (inserted)
            mid = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        if (inserted)
            break;
        const char *ip[] = {ridbuf, digest->str};
        if ((rc = run_int64(c, BERTH_SQL_MANIFEST_ID, ip, &mid, err)) == 0)
            break;
        if (rc != BERTH_ENOTFOUND || attempt == 2) {
            if (rc == BERTH_ENOTFOUND)
                rc = berth_err_set(err, BERTH_OCI_INTERNAL, "manifest %s vanished during the push", digest->str);
            goto Fail;
        }
    }
    snprintf(midbuf, sizeof(midbuf), "%lld", (long long)mid);
    if (inserted && info->nrefs > 0) {
        char *ds, *ks, *ss;
        if (refs_arrays(info, &ds, &ks, &ss) != 0) {
            rc = berth_err_set(err, BERTH_OCI_INTERNAL, "out of memory");
            goto Fail;
        }
        const char *rp[] = {midbuf, ds, ks, ss};
        rc = run_count(c, BERTH_SQL_REF_INSERT, rp, err);
        free(ds);
        free(ks);
        free(ss);
        if (rc < 0)
            goto Fail;
    }
    if (inserted && isa_rows != NULL) {
        const char *ip[] = {midbuf, isa_rows};
        if ((rc = run_count(c, BERTH_SQL_ISA_INSERT, ip, err)) < 0)
            goto Fail;
    }
    if (tag != NULL && (rc = berth_db__tag_set(c, repo, ridbuf, tag, midbuf, digest->str, err)) != 0)
        goto Fail;
    const char *dp[] = {ridbuf, repo, c->actor, digest->str, tag};
    if ((rc = quota_check(c, qidbuf, q, err)) != 0 || (hook != NULL && (rc = hook(c, q, hook_arg, err)) != 0) ||
        (rc = run_count(c, BERTH_SQL_PUSH_DONE, dp, err)) < 0)
        goto Fail;
    return berth_db_commit(c, err);
Fail:
    berth_db_rollback(c);
    return rc;
}

int berth_db_manifest_get(berth_dbconn_t *c, const char *repo, const char *ref, int ref_is_digest, berth_db_manifest_t *out,
                          berth_err_t *err)
{
    const char *p[] = {repo, ref};
    /* binary results: the content arrives as raw bytes, not hex */
    PGresult *res =
        berth_db__run(c, ref_is_digest ? BERTH_SQL_MANIFEST_BY_DIGEST : BERTH_SQL_MANIFEST_BY_TAG, p, NULL, NULL, 1, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int rc = 0;
    if (PQntuples(res) == 0) {
        PQclear(res);
        int exists = berth_db_repo_exists(c, repo, err);
        if (exists < 0)
            return exists;
        return berth_err_set(err, exists ? BERTH_OCI_MANIFEST_UNKNOWN : BERTH_OCI_NAME_UNKNOWN, NULL);
    }
    snprintf(out->digest, sizeof(out->digest), "%.*s", PQgetlength(res, 0, 0), PQgetvalue(res, 0, 0));
    out->media_type = strndup(PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
    out->len = (size_t)PQgetlength(res, 0, 2);
    out->content = malloc(out->len + 1);
    memcpy(out->content, PQgetvalue(res, 0, 2), out->len);
    out->content[out->len] = '\0';
    PQclear(res);
    return rc;
}

int berth_db_manifest_delete(berth_dbconn_t *c, const char *repo, const char *digest, berth_err_t *err)
{
    return delete_and_notify(c, BERTH_SQL_MANIFEST_DELETE, berth_db__manifest_removable, repo, digest, err,
                             BERTH_OCI_MANIFEST_UNKNOWN, NULL, HOOK_DIGEST);
}

int berth_db_tag_delete(berth_dbconn_t *c, const char *repo, const char *tag, berth_err_t *err)
{
    return delete_and_notify(c, BERTH_SQL_TAG_DELETE, berth_db__tag_removable, repo, tag, err, BERTH_OCI_MANIFEST_UNKNOWN,
                             "tag unknown", HOOK_TAG);
}

int berth_db_repo_delete(berth_dbconn_t *c, const char *repo, berth_err_t *err)
{
    return delete_and_notify(c, BERTH_SQL_REPO_DELETE, repo_removable, repo, NULL, err, BERTH_OCI_NOT_FOUND, "repository not found",
                             HOOK_NONE);
}

static int collect(PGresult *res, berth_strlist_t *out)
{
    int rows = PQntuples(res);
    out->items = calloc((size_t)rows + 1, sizeof(char *));
    out->n = 0;
    for (int i = 0; i < rows; i++)
        out->items[out->n++] = strdup(PQgetvalue(res, i, 0));
    PQclear(res);
    return 0;
}

int berth_db_tags_list(berth_dbconn_t *c, const char *repo, const char *last, long n, berth_strlist_t *out, berth_err_t *err)
{
    int64_t rid = 0;
    const char *rp[] = {repo};
    int rc = run_int64(c, BERTH_SQL_REPO_ID, rp, &rid, err);
    if (rc == BERTH_ENOTFOUND)
        return berth_err_set(err, BERTH_OCI_NAME_UNKNOWN, NULL);
    if (rc != 0)
        return rc;
    char ridbuf[24], nbuf[24];
    snprintf(ridbuf, sizeof(ridbuf), "%lld", (long long)rid);
    snprintf(nbuf, sizeof(nbuf), "%ld", n);
    const char *p[] = {ridbuf, last != NULL ? last : "", nbuf};
    PGresult *res = run(c, BERTH_SQL_TAGS_LIST, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    return collect(res, out);
}

int berth_db_catalog(berth_dbconn_t *c, const char *last, long n, berth_strlist_t *out, berth_err_t *err)
{
    char nbuf[24];
    snprintf(nbuf, sizeof(nbuf), "%ld", n);
    const char *p[] = {last != NULL ? last : "", nbuf};
    PGresult *res = run(c, BERTH_SQL_CATALOG, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    return collect(res, out);
}

int berth_db_referrers(berth_dbconn_t *c, const char *repo, const char *digest, const char *artifact_type,
                       berth_db_referrer_t **out, size_t *n_out, berth_err_t *err)
{
    const char *p[] = {repo, digest, artifact_type};
    PGresult *res = run(c, BERTH_SQL_REFERRERS, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int rows = PQntuples(res);
    berth_db_referrer_t *r = calloc((size_t)rows + 1, sizeof(*r));
    for (int i = 0; i < rows; i++) {
        snprintf(r[i].digest, sizeof(r[i].digest), "%s", PQgetvalue(res, i, 0));
        r[i].media_type = strdup(PQgetvalue(res, i, 1));
        r[i].artifact_type = PQgetisnull(res, i, 2) ? NULL : strdup(PQgetvalue(res, i, 2));
        r[i].size = strtoll(PQgetvalue(res, i, 3), NULL, 10);
        r[i].annotations = PQgetisnull(res, i, 4) ? NULL : strdup(PQgetvalue(res, i, 4));
    }
    PQclear(res);
    *out = r;
    *n_out = (size_t)rows;
    return 0;
}

int berth_db_upload_create(berth_dbconn_t *c, const char *id, const char *repo, berth_err_t *err)
{
    const char *p[] = {id, repo};
    int n = run_count(c, BERTH_SQL_UPLOAD_CREATE, p, err);
    return n < 0 ? n : 0;
}

int berth_db_upload_check(berth_dbconn_t *c, const char *id, const char *repo, berth_err_t *err)
{
    const char *p[] = {id};
    PGresult *res = run(c, BERTH_SQL_UPLOAD_GET, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int ok = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), repo) == 0;
    PQclear(res);
    return ok ? 0 : berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
}

int berth_db_upload_touch(berth_dbconn_t *c, const char *id, berth_err_t *err)
{
    const char *p[] = {id};
    int n = run_count(c, BERTH_SQL_UPLOAD_TOUCH, p, err);
    return n < 0 ? n : 0;
}

int berth_db_upload_delete(berth_dbconn_t *c, const char *id, berth_err_t *err)
{
    const char *p[] = {id};
    int n = run_count(c, BERTH_SQL_UPLOAD_DELETE, p, err);
    return n < 0 ? n : 0;
}

int berth_db_upload_expire(berth_dbconn_t *c, long max_age_s, berth_strlist_t *out, berth_strlist_t *states, berth_err_t *err)
{
    char age[24];
    snprintf(age, sizeof(age), "%ld", max_age_s);
    const char *p[] = {age};
    memset(states, 0, sizeof(*states));
    PGresult *res = run(c, BERTH_SQL_UPLOAD_EXPIRE, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int n = PQntuples(res);
    states->items = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++)
        states->items[states->n++] = strdup(PQgetvalue(res, i, 1));
    return collect(res, out);
}

int berth_db_upload_lock(berth_dbconn_t *c, const char *id, const char *repo, char **state, char **hash_state, berth_err_t *err)
{
    const char *p[] = {id, repo};
    *state = *hash_state = NULL;
    PGresult *res = run(c, BERTH_SQL_UPLOAD_LOCK, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int n = PQntuples(res);
    if (n == 1) {
        *state = strdup(PQgetvalue(res, 0, 0));
        *hash_state = strdup(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return n == 1 ? 0 : berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
}

int berth_db_upload_save(berth_dbconn_t *c, const char *id, const char *state, const char *hash_state, berth_err_t *err)
{
    const char *p[] = {id, state, hash_state != NULL ? hash_state : ""};
    int n = run_count(c, BERTH_SQL_UPLOAD_SAVE, p, err);
    return n < 0 ? n : n == 1 ? 0 : berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
}

int berth_db_upload_state(berth_dbconn_t *c, const char *id, const char *repo, char **state, berth_err_t *err)
{
    const char *p[] = {id, repo};
    *state = NULL;
    PGresult *res = run(c, BERTH_SQL_UPLOAD_STATE, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int n = PQntuples(res);
    if (n == 1)
        *state = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n == 1 ? 0 : berth_err_set(err, BERTH_OCI_BLOB_UPLOAD_UNKNOWN, NULL);
}

int berth_db_upload_exists(berth_dbconn_t *c, const char *id, berth_err_t *err)
{
    const char *p[] = {id};
    PGresult *res = run(c, BERTH_SQL_UPLOAD_GET, p, err);
    if (res == NULL)
        return err != NULL ? err->code : BERTH_ERROR;
    int n = PQntuples(res);
    PQclear(res);
    return n > 0;
}
