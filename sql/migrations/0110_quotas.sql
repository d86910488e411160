-- Issue 13 (quotas): per-project storage quotas counted the way Harbor counts, kept by the database itself.
--
-- What counts (the project's "charged set"): every distinct digest that the project's manifests hold — the
-- manifests themselves (their stored bytes) and the blobs they reference as layers or config (manifest_refs kind
-- 0) — each counted once per project however many repositories or manifests share it. Child manifests of an
-- index count as manifests of the project; uploaded blobs no manifest references yet do not count (a manifest PUT
-- is where blobs become the project's, and where the limit is enforced); tags cost nothing.
--
-- quota_blobs is that set, materialised (Harbor's project_blob); quotas.used_storage is the sum of its sizes.
-- Statement-level triggers on manifests and manifest_refs keep both in the transaction of every change —
-- manifest PUT, manifest/artifact/repository delete, cascades, GC sweeps — so no caller can forget them, and
-- used_storage always equals berth_quota_recount(project). The project's quota row is locked (FOR UPDATE) before
-- the set is changed, and the set is re-read after the lock, so concurrent changes of one project serialize.
CREATE TABLE quotas (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL UNIQUE REFERENCES projects (id) ON DELETE CASCADE,
    hard_storage bigint NOT NULL DEFAULT -1 CHECK (hard_storage >= -1), -- bytes; -1 unlimited
    used_storage bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE quota_blobs (
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    size bigint NOT NULL,
    PRIMARY KEY (project_id, digest)
);
CREATE INDEX quota_blobs_digest ON quota_blobs (digest);
-- "is this digest still a manifest of the project": the release check looks manifests up by digest
CREATE INDEX manifests_digest ON manifests (digest);

-- The charged set of project p, computed from scratch (tests and the backfill compare against it).
CREATE FUNCTION berth_quota_items(p bigint) RETURNS TABLE (digest text, size bigint)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (x.digest) x.digest, x.size FROM (
        SELECT m.digest, m.size FROM manifests m JOIN repositories r ON r.id = m.repository_id WHERE r.project_id = p
        UNION ALL
        SELECT mr.digest, mr.size FROM manifest_refs mr JOIN manifests m ON m.id = mr.manifest_id
        JOIN repositories r ON r.id = m.repository_id WHERE r.project_id = p AND mr.kind = 0) x
    ORDER BY x.digest, x.size DESC
$$;

CREATE FUNCTION berth_quota_recount(p bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT coalesce(sum(size), 0)::bigint FROM berth_quota_items(p) $$;

-- Does project p still hold digest d (as a manifest, or as a blob one of its manifests references)?
CREATE FUNCTION berth_quota_charged(p bigint, d text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM manifests m JOIN repositories r ON r.id = m.repository_id
                   WHERE m.digest = d AND r.project_id = p)
        OR EXISTS (SELECT 1 FROM manifest_refs mr JOIN manifests m ON m.id = mr.manifest_id
                   JOIN repositories r ON r.id = m.repository_id WHERE mr.digest = d AND mr.kind = 0 AND r.project_id = p)
$$;

-- Lock the quota rows of these projects (creating a missing row as unlimited), in id order so that two
-- transactions locking several projects cannot deadlock each other. Every change of a charged set calls it
-- first; a caller that deletes manifests may call it before its DELETE to take the lock in the same order as a
-- manifest PUT does (quota row, then rows).
CREATE FUNCTION berth_quota_lock(pids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO quotas (project_id) SELECT DISTINCT x FROM unnest(pids) x
        WHERE x IS NOT NULL AND EXISTS (SELECT 1 FROM projects WHERE id = x) ON CONFLICT (project_id) DO NOTHING;
    PERFORM 1 FROM quotas WHERE project_id = ANY (pids) ORDER BY project_id FOR UPDATE;
END
$$;

-- Add (project, digest, size) rows to the charged sets; what is already charged costs nothing.
CREATE FUNCTION berth_quota__charge(p bigint[], d text[], s bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM berth_quota_lock(ARRAY(SELECT DISTINCT x FROM unnest(p) x));
    WITH ins AS (
        INSERT INTO quota_blobs (project_id, digest, size)
        SELECT DISTINCT ON (t.p, t.d) t.p, t.d, t.s FROM unnest(p, d, s) AS t(p, d, s) WHERE t.p IS NOT NULL
        ORDER BY t.p, t.d, t.s DESC
        ON CONFLICT (project_id, digest) DO NOTHING RETURNING project_id, size),
    sums AS (SELECT project_id, sum(size)::bigint AS n FROM ins GROUP BY project_id)
    UPDATE quotas q SET used_storage = q.used_storage + sums.n, updated_at = now() FROM sums
        WHERE q.project_id = sums.project_id;
END
$$;

-- These digests lost a reference somewhere: drop them from every charged set that no longer holds them. The
-- DELETE runs after the lock, so it sees every reference a concurrent, now committed change added.
CREATE FUNCTION berth_quota__release(d text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM berth_quota_lock(ARRAY(SELECT DISTINCT qb.project_id FROM quota_blobs qb WHERE qb.digest = ANY (d)));
    WITH del AS (
        DELETE FROM quota_blobs qb WHERE qb.digest = ANY (d) AND NOT berth_quota_charged(qb.project_id, qb.digest)
        RETURNING project_id, size),
    sums AS (SELECT project_id, sum(size)::bigint AS n FROM del GROUP BY project_id)
    UPDATE quotas q SET used_storage = q.used_storage - sums.n, updated_at = now() FROM sums
        WHERE q.project_id = sums.project_id;
END
$$;

CREATE FUNCTION berth_quota_manifests_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM berth_quota__charge(ARRAY(SELECT r.project_id FROM added a JOIN repositories r ON r.id = a.repository_id ORDER BY a.id),
                                ARRAY(SELECT a.digest::text FROM added a JOIN repositories r ON r.id = a.repository_id ORDER BY a.id),
                                ARRAY(SELECT a.size FROM added a JOIN repositories r ON r.id = a.repository_id ORDER BY a.id));
    RETURN NULL;
END
$$;

CREATE FUNCTION berth_quota_refs_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM added WHERE kind = 0) THEN
        RETURN NULL;
    END IF;
    PERFORM berth_quota__charge(
        ARRAY(SELECT r.project_id FROM added a JOIN manifests m ON m.id = a.manifest_id JOIN repositories r ON r.id = m.repository_id
              WHERE a.kind = 0 ORDER BY a.manifest_id, a.digest),
        ARRAY(SELECT a.digest::text FROM added a JOIN manifests m ON m.id = a.manifest_id JOIN repositories r ON r.id = m.repository_id
              WHERE a.kind = 0 ORDER BY a.manifest_id, a.digest),
        ARRAY(SELECT a.size FROM added a JOIN manifests m ON m.id = a.manifest_id JOIN repositories r ON r.id = m.repository_id
              WHERE a.kind = 0 ORDER BY a.manifest_id, a.digest));
    RETURN NULL;
END
$$;

-- The deleted rows' repositories may already be gone (a repository delete cascades), so the release goes by
-- digest: quota_blobs says which projects were charged for it.
CREATE FUNCTION berth_quota_manifests_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM berth_quota__release(ARRAY(SELECT DISTINCT r.digest::text FROM removed r));
    RETURN NULL;
END
$$;

CREATE FUNCTION berth_quota_refs_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM removed WHERE kind = 0) THEN
        PERFORM berth_quota__release(ARRAY(SELECT DISTINCT r.digest::text FROM removed r WHERE r.kind = 0));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER quota_manifests_added AFTER INSERT ON manifests REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION berth_quota_manifests_added();
CREATE TRIGGER quota_manifests_removed AFTER DELETE ON manifests REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION berth_quota_manifests_removed();
CREATE TRIGGER quota_refs_added AFTER INSERT ON manifest_refs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION berth_quota_refs_added();
CREATE TRIGGER quota_refs_removed AFTER DELETE ON manifest_refs REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION berth_quota_refs_removed();

-- Existing projects: unlimited, usage by recount.
INSERT INTO quotas (project_id) SELECT id FROM projects ON CONFLICT (project_id) DO NOTHING;
INSERT INTO quota_blobs (project_id, digest, size) SELECT p.id, i.digest, i.size FROM projects p, berth_quota_items(p.id) i;
UPDATE quotas q SET used_storage = berth_quota_recount(q.project_id);

-- Every project has its quota row from the start (unlimited unless whoever creates the project inserts its
-- row first with the limit it wants: POST /api/v2.0/projects and projects.auto_create use quota.default_storage_limit).
CREATE FUNCTION berth_quota_project_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO quotas (project_id) VALUES (NEW.id) ON CONFLICT (project_id) DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER quota_project_added AFTER INSERT ON projects FOR EACH ROW EXECUTE FUNCTION berth_quota_project_added();
