-- Registry core (issue 6): projects, repositories, content-addressed blobs and their per-repository links,
-- manifests (bytes kept here so a manifest and its tag commit in one transaction), references, tags, uploads.
-- Names use COLLATE "C" so ORDER BY matches the byte order the distribution-spec asks for tag and catalog lists.
CREATE TABLE projects (
    id bigserial PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    public boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE repositories (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repositories_project ON repositories (project_id);

CREATE TABLE blobs (
    digest text COLLATE "C" PRIMARY KEY,
    size bigint NOT NULL CHECK (size >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE repository_blobs (
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL REFERENCES blobs (digest),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository_id, digest)
);
CREATE INDEX repository_blobs_digest ON repository_blobs (digest);

CREATE TABLE manifests (
    id bigserial PRIMARY KEY,
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    media_type text NOT NULL,
    artifact_type text,
    subject_digest text COLLATE "C",
    annotations jsonb,
    size bigint NOT NULL,
    content bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (repository_id, digest)
);
CREATE INDEX manifests_subject ON manifests (repository_id, subject_digest) WHERE subject_digest IS NOT NULL;

-- What a manifest needs to exist: blobs (kind 0) and child manifests (kind 1). GC and delete checks read this.
CREATE TABLE manifest_refs (
    manifest_id bigint NOT NULL REFERENCES manifests (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    kind smallint NOT NULL,
    size bigint NOT NULL,
    PRIMARY KEY (manifest_id, digest)
);
CREATE INDEX manifest_refs_digest ON manifest_refs (digest);

-- The primary key (repository_id, name) serves tags/list pagination as an index range scan.
CREATE TABLE tags (
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    name text COLLATE "C" NOT NULL,
    manifest_id bigint NOT NULL REFERENCES manifests (id) ON DELETE CASCADE,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository_id, name)
);
CREATE INDEX tags_manifest ON tags (manifest_id);

-- Upload sessions: the bytes live in <storage>/uploads/<id>; its length is the offset, so any berthd sharing
-- the database and storage continues a session after a restart.
CREATE TABLE upload_sessions (
    id text COLLATE "C" PRIMARY KEY,
    repository text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upload_sessions_updated ON upload_sessions (updated_at);
