-- HPC image gateway (issue 15): a project may have each image flattened once into a squashfs, on push or on the
-- first request for it, optionally only for tags matching a doublestar pattern ({a,b} for several). sqfs_jobs is the
-- work queue (claimed FOR UPDATE SKIP LOCKED with a lease, so several berthd on one database each convert a
-- manifest once and a killed one's job is taken up again) and the record of the result, one row per manifest.
ALTER TABLE projects ADD COLUMN IF NOT EXISTS hpc_squashfs text NOT NULL DEFAULT 'off'
    CHECK (hpc_squashfs IN ('off', 'push', 'pull'));
ALTER TABLE projects ADD COLUMN IF NOT EXISTS hpc_squashfs_tags text NOT NULL DEFAULT '';

CREATE TABLE IF NOT EXISTS sqfs_jobs (
    id bigserial PRIMARY KEY,
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,               -- the source manifest
    status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    attempts int NOT NULL DEFAULT 0,
    reason text NOT NULL DEFAULT '',
    progress real NOT NULL DEFAULT 0,               -- 0..1 of the file contents written
    claimed_by text NOT NULL DEFAULT '',
    lease_until timestamptz,
    not_before timestamptz NOT NULL DEFAULT now(),
    artifact_digest text COLLATE "C",               -- the referrer manifest holding the squashfs
    blob_digest text COLLATE "C",
    size bigint,
    content_bytes bigint,
    compression text,
    isa_level text,
    published_path text,
    seconds real,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (repository_id, digest)
);
CREATE INDEX IF NOT EXISTS sqfs_jobs_runnable ON sqfs_jobs (id) WHERE status IN ('queued', 'running');
