-- Online garbage collection (issue 13): runs (Harbor's GC history, claimed by one berthd at a time through a
-- lease), the schedule, the marks of a run (so a stopped or crashed run resumes where it stopped), and release
-- times, from which the grace window is measured: a blob link or manifest is collected only when nothing has
-- referenced it for gc.grace_seconds (README "Garbage collection").
CREATE TABLE IF NOT EXISTS gc_runs (
    id bigserial PRIMARY KEY,
    kind text NOT NULL DEFAULT 'MANUAL' CHECK (kind IN ('MANUAL', 'SCHEDULE')),
    status text NOT NULL DEFAULT 'Pending' CHECK (status IN ('Pending', 'Running', 'Stopping', 'Stopped', 'Success', 'Error')),
    delete_untagged boolean NOT NULL DEFAULT false,
    dry_run boolean NOT NULL DEFAULT false,
    workers int NOT NULL DEFAULT 1 CHECK (workers BETWEEN 1 AND 5),
    grace_seconds int,            -- fixed when first claimed, so a resumed run applies the same window
    marks_id bigint,              -- whose marks it works through: its own, or those of the stopped run it resumes
    resumed_from bigint,
    phase smallint NOT NULL DEFAULT 0,
    cursor_id bigint NOT NULL DEFAULT 0,   -- the last mark processed in the current sweep phase
    processed bigint NOT NULL DEFAULT 0,   -- marks processed in the current phase (progress)
    manifests_marked bigint NOT NULL DEFAULT 0,
    manifests_deleted bigint NOT NULL DEFAULT 0,
    links_marked bigint NOT NULL DEFAULT 0,
    links_deleted bigint NOT NULL DEFAULT 0,
    blobs_marked bigint NOT NULL DEFAULT 0,
    bytes_marked bigint NOT NULL DEFAULT 0,
    blobs_deleted bigint NOT NULL DEFAULT 0,
    bytes_freed bigint NOT NULL DEFAULT 0,
    orphans_found bigint NOT NULL DEFAULT 0,
    orphan_bytes bigint NOT NULL DEFAULT 0,
    lease_owner text,
    lease_until timestamptz,
    log text NOT NULL DEFAULT '',
    error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);
-- one run at a time, whichever berthd is asked
CREATE UNIQUE INDEX IF NOT EXISTS gc_runs_one_active ON gc_runs ((true)) WHERE status IN ('Pending', 'Running', 'Stopping');

CREATE TABLE IF NOT EXISTS gc_schedule (
    id int PRIMARY KEY CHECK (id = 1),
    type text NOT NULL DEFAULT 'None',
    cron text NOT NULL DEFAULT '',
    delete_untagged boolean NOT NULL DEFAULT false,
    dry_run boolean NOT NULL DEFAULT false,
    workers int NOT NULL DEFAULT 1,
    last_fired timestamptz, -- the minute a scheduled run was last created (one per minute across berthds)
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- kind 1 manifest (repository_id, digest), 2 blob link (repository_id, digest), 3 blob (digest; repository_id 0)
CREATE TABLE IF NOT EXISTS gc_marks (
    id bigserial PRIMARY KEY,
    run_id bigint NOT NULL REFERENCES gc_runs (id) ON DELETE CASCADE,
    kind smallint NOT NULL,
    repository_id bigint NOT NULL,
    digest text COLLATE "C" NOT NULL,
    size bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS gc_marks_run ON gc_marks (run_id, kind, id);
CREATE INDEX IF NOT EXISTS gc_marks_ref ON gc_marks (run_id, kind, repository_id, digest); -- dry runs: "is it marked"

-- When a reference to (repository, digest) went away: a manifest deleted (its blobs and child manifests) or a
-- tag moved or deleted (its manifest). Written by triggers, so every path that deletes (the /v2 API, the REST
-- API, retention, a repository delete, GC itself) is covered; GC prunes rows older than its window.
CREATE TABLE IF NOT EXISTS gc_releases (
    repository_id bigint NOT NULL,
    digest text COLLATE "C" NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS gc_releases_ref ON gc_releases (repository_id, digest, at);
CREATE INDEX IF NOT EXISTS gc_releases_at ON gc_releases (at);

-- BEFORE DELETE: the manifest's references are still there to read (they go with it by cascade)
CREATE OR REPLACE FUNCTION berth_gc_manifest_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the collector's own deletions remove garbage: what only garbage referenced is not "just released"
    IF current_setting('berth.gc', true) = 'on' THEN
        RETURN OLD;
    END IF;
    INSERT INTO gc_releases (repository_id, digest)
        SELECT OLD.repository_id, r.digest FROM manifest_refs r WHERE r.manifest_id = OLD.id;
    RETURN OLD;
END $$;
DROP TRIGGER IF EXISTS manifests_gc_release ON manifests;
CREATE TRIGGER manifests_gc_release BEFORE DELETE ON manifests FOR EACH ROW EXECUTE FUNCTION berth_gc_manifest_released();

CREATE OR REPLACE FUNCTION berth_gc_tag_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.manifest_id <> OLD.manifest_id THEN
        INSERT INTO gc_releases (repository_id, digest)
            SELECT m.repository_id, m.digest FROM manifests m WHERE m.id = OLD.manifest_id;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS tags_gc_release ON tags;
CREATE TRIGGER tags_gc_release AFTER UPDATE OF manifest_id OR DELETE ON tags FOR EACH ROW EXECUTE FUNCTION berth_gc_tag_released();

-- the sweep of a blob row asks "does any manifest anywhere still list this blob": by digest (manifest_refs_digest)
