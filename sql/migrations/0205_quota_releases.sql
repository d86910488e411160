-- Issue 13 (GC at scale): a GC sweep no longer holds the project's quota row.
--
-- Before, every change of a charged set (0110_quotas.sql) locked the project's quota row first, a GC manifest batch
-- included, and held it until commit: a manifest PUT in that project waited for the whole batch (its DELETE and the
-- release trigger's work, 150-330 ms at 100 manifests; docs/benchmarks.md). Now:
--
-- * Serialization per charge, not per project, between a sweep and everybody else: a charger locks the existing
--   quota_blobs row of every (project, digest) it charges (INSERT ... ON CONFLICT DO UPDATE ... WHERE false locks
--   the row it does not change); a release outside GC locks every quota_blobs row of the digests it re-checks
--   (FOR UPDATE, then re-checks in a later statement); a GC batch locks the rows of every charge its manifests
--   hold FOR UPDATE SKIP LOCKED before deleting anything, deletes only the manifests all of whose charges it got
--   (sql/gc.c BERTH_Q_GC_LOCK_MANIFESTS), and its release deletes only rows it can lock without waiting. So a
--   sweep and a PUT of the same blob in the same project serialize on that row, one of them wins cleanly, and a
--   sweep never waits on anybody (no deadlock with a PUT holding the quota row).
-- * Usage a sweep releases goes to a ledger instead of the quota row: quota_releases holds bytes released and not
--   yet folded into quotas.used_storage; a project's usage is used_storage minus its ledger (berth_quota_used),
--   still changed in the transaction of the change and still equal to berth_quota_recount. Whoever takes the
--   quota row (every PUT, delete, the end of a GC manifest sweep) folds the ledger into it. Releases only lower
--   usage, so a PUT that has not seen a release committing meanwhile checks its limit against a usage that is at
--   most too high: concurrent pushes still cannot overshoot (PUTs still serialize on the quota row).
-- No foreign key to projects: a sweep inserting here must not wait on a project delete that waits on the sweep's
-- manifest rows (the fold drops the rows of projects that are gone).
CREATE TABLE quota_releases (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL,
    bytes bigint NOT NULL
);
CREATE INDEX quota_releases_project ON quota_releases (project_id);

CREATE FUNCTION berth_quota_used(p bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT q.used_storage - coalesce((SELECT sum(r.bytes) FROM quota_releases r WHERE r.project_id = p), 0)::bigint
    FROM quotas q WHERE q.project_id = p
$$;

-- The caller holds these projects' quota rows: move their ledger into them. A statement of its own (a function
-- statement after the lock), so it sees every release committed before the lock; one that commits later stays in
-- the ledger, where berth_quota_used still counts it.
CREATE FUNCTION berth_quota__fold(pids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH f AS (DELETE FROM quota_releases r WHERE r.project_id = ANY (pids) RETURNING r.project_id, r.bytes),
    s AS (SELECT project_id, sum(bytes)::bigint AS n FROM f GROUP BY project_id)
    UPDATE quotas q SET used_storage = q.used_storage - s.n, updated_at = now() FROM s WHERE q.project_id = s.project_id;
END
$$;

CREATE OR REPLACE FUNCTION berth_quota_lock(pids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO quotas (project_id) SELECT DISTINCT x FROM unnest(pids) x
        WHERE x IS NOT NULL AND EXISTS (SELECT 1 FROM projects WHERE id = x) ON CONFLICT (project_id) DO NOTHING;
    PERFORM 1 FROM quotas WHERE project_id = ANY (pids) ORDER BY project_id FOR UPDATE;
    PERFORM berth_quota__fold(pids);
END
$$;

-- The manifest PUT's first step: the quota row of the repository's project, locked, with the ledger folded in (no
-- row: nothing; the caller creates it and asks again).
CREATE FUNCTION berth_quota_enter(rid bigint) RETURNS TABLE (quota_id bigint, hard bigint, used bigint)
LANGUAGE plpgsql AS $$
DECLARE
    p bigint;
BEGIN
    SELECT q.project_id INTO p FROM quotas q JOIN repositories r ON r.project_id = q.project_id WHERE r.id = rid
        FOR UPDATE OF q;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM berth_quota__fold(ARRAY[p]);
    RETURN QUERY SELECT q.id, q.hard_storage, q.used_storage FROM quotas q WHERE q.project_id = p;
END
$$;

-- The end of a GC manifest sweep: the ledgers into their quota rows, those another transaction holds skipped (their
-- holder folds them; a sweep waits for nobody); rows of projects that are gone are dropped. Returns the projects
-- folded.
CREATE FUNCTION berth_quota_settle() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    got bigint[];
BEGIN
    DELETE FROM quota_releases r WHERE NOT EXISTS (SELECT 1 FROM quotas q WHERE q.project_id = r.project_id);
    got := ARRAY(SELECT q.project_id FROM quotas q WHERE q.project_id IN (SELECT r.project_id FROM quota_releases r)
                 ORDER BY q.project_id FOR UPDATE SKIP LOCKED);
    PERFORM berth_quota__fold(got);
    RETURN cardinality(got);
END
$$;

-- A charge locks the rows it finds already there (WHERE false: nothing changes, the row is locked all the same), so
-- a GC batch holding one of them makes it wait, and a GC batch coming later skips the manifests that hold it.
CREATE OR REPLACE FUNCTION berth_quota__charge(p bigint[], d text[], s bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM berth_quota_lock(ARRAY(SELECT DISTINCT x FROM unnest(p) x));
    WITH ins AS (
        INSERT INTO quota_blobs AS qb (project_id, digest, size)
        SELECT DISTINCT ON (t.p, t.d) t.p, t.d, t.s FROM unnest(p, d, s) AS t(p, d, s) WHERE t.p IS NOT NULL
        ORDER BY t.p, t.d, t.s DESC
        ON CONFLICT (project_id, digest) DO UPDATE SET size = qb.size WHERE false RETURNING qb.project_id, qb.size),
    sums AS (SELECT project_id, sum(size)::bigint AS n FROM ins GROUP BY project_id)
    UPDATE quotas q SET used_storage = q.used_storage + sums.n, updated_at = now() FROM sums
        WHERE q.project_id = sums.project_id;
END
$$;

-- These digests lost a reference somewhere: drop them from every charged set that no longer holds them.
-- Outside GC: the quota rows, then every quota_blobs row of these digests (a GC batch holding one makes this wait
-- for its commit), then the re-check and delete in a later statement, so with a snapshot that sees what every
-- concurrent, now committed change did. In a GC sweep (berth.gc on): the batch already holds the rows of its
-- manifests' charges (BERTH_Q_GC_LOCK_MANIFESTS); only rows no longer charged that can be locked without waiting go
-- (another holder is a charger about to use the row, or a release that re-checks it after this commit), and the
-- bytes go to the ledger, not the quota row. The re-check is berth_quota_charged() written out as anti-joins: a
-- function with sub-selects is not inlined, and a call per row was half of a 100-manifest batch's time.
CREATE OR REPLACE FUNCTION berth_quota__release(d text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('berth.gc', true) = 'on' THEN
        WITH c AS MATERIALIZED (
            SELECT qb.project_id, qb.digest FROM quota_blobs qb
            WHERE qb.digest = ANY (d) AND NOT EXISTS (SELECT 1 FROM manifests m JOIN repositories r ON r.id = m.repository_id
                                                      WHERE m.digest = qb.digest AND r.project_id = qb.project_id)
              AND NOT EXISTS (SELECT 1 FROM manifest_refs mr JOIN manifests m ON m.id = mr.manifest_id
                              JOIN repositories r ON r.id = m.repository_id
                              WHERE mr.digest = qb.digest AND mr.kind = 0 AND r.project_id = qb.project_id)
            FOR UPDATE OF qb SKIP LOCKED),
        del AS (
            DELETE FROM quota_blobs qb USING c WHERE qb.project_id = c.project_id AND qb.digest = c.digest
            RETURNING qb.project_id, qb.size)
        INSERT INTO quota_releases (project_id, bytes) SELECT project_id, sum(size)::bigint FROM del GROUP BY project_id;
        RETURN;
    END IF;
    PERFORM berth_quota_lock(ARRAY(SELECT DISTINCT qb.project_id FROM quota_blobs qb WHERE qb.digest = ANY (d)));
    PERFORM 1 FROM quota_blobs qb WHERE qb.digest = ANY (d) ORDER BY qb.project_id, qb.digest FOR UPDATE;
    WITH del AS (
        DELETE FROM quota_blobs qb WHERE qb.digest = ANY (d) AND NOT berth_quota_charged(qb.project_id, qb.digest)
        RETURNING project_id, size),
    sums AS (SELECT project_id, sum(size)::bigint AS n FROM del GROUP BY project_id)
    UPDATE quotas q SET used_storage = q.used_storage - sums.n, updated_at = now() FROM sums
        WHERE q.project_id = sums.project_id;
END
$$;
