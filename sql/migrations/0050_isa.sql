-- CPU-ISA variants (issue #4): the project's push policy and one row per ISA-relevant entry of an index,
-- written in the manifest PUT's transaction. Berth never rewrites pushed bytes: what it derives lives here.
ALTER TABLE projects ADD COLUMN isa_policy text NOT NULL DEFAULT 'warn' CHECK (isa_policy IN ('off', 'warn', 'strict'));
ALTER TABLE projects ADD COLUMN isa_require_scan_pass boolean NOT NULL DEFAULT false;

CREATE TABLE isa_variants (
    manifest_id bigint NOT NULL REFERENCES manifests (id) ON DELETE CASCADE, -- the index
    position int NOT NULL,                                                    -- order in the index
    digest text COLLATE "C" NOT NULL,                                         -- the variant manifest
    os text NOT NULL,
    architecture text NOT NULL,
    variant text NOT NULL,
    level text NOT NULL,
    features text NOT NULL DEFAULT '',                                        -- comma-joined, sorted
    target text NOT NULL DEFAULT '',
    priority int NOT NULL DEFAULT 0,
    PRIMARY KEY (manifest_id, position)
);
CREATE INDEX isa_variants_digest ON isa_variants (digest);

-- Scanner verdicts per variant manifest (filled by the scan job; 'pending' until it ran).
CREATE TABLE isa_scans (
    digest text COLLATE "C" PRIMARY KEY,
    declared_level text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'pass', 'warn', 'fail', 'error')),
    max_level text,
    report jsonb,
    scanned_at timestamptz
);

-- Derived single-variant indexes served under /v2/_isa/<view>/…: stored so a client can fetch them by digest.
-- They go with their source index and are never replicated.
CREATE TABLE isa_views (
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    source_manifest_id bigint NOT NULL REFERENCES manifests (id) ON DELETE CASCADE,
    content bytea NOT NULL,
    PRIMARY KEY (repository_id, digest)
);
