-- Replication (issue #5): endpoints, policies, executions and tasks. Tasks are the queue: a restarted berthd
-- takes Pending and InProgress tasks up again, and a task's destination upload session is kept so a blob
-- interrupted mid-transfer resumes from the destination's offset instead of starting over.
CREATE TABLE registries (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    type text NOT NULL CHECK (type IN ('berth', 'docker-registry')),
    url text NOT NULL,
    access_key text NOT NULL DEFAULT '',
    access_secret bytea, -- AES-256-GCM (nonce || ciphertext || tag) under replication.secret_key
    insecure boolean NOT NULL DEFAULT false,
    ca_file text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE replication_policies (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    description text NOT NULL DEFAULT '',
    src_registry_id bigint REFERENCES registries (id) ON DELETE RESTRICT, -- NULL: this Berth (push-based)
    dest_registry_id bigint REFERENCES registries (id) ON DELETE RESTRICT, -- NULL: this Berth (pull-based)
    dest_namespace text NOT NULL DEFAULT '',
    dest_namespace_replace_count int NOT NULL DEFAULT -1,
    filters jsonb NOT NULL DEFAULT '[]',
    trigger jsonb NOT NULL DEFAULT '{"type":"manual"}',
    override boolean NOT NULL DEFAULT true,
    enabled boolean NOT NULL DEFAULT true,
    replicate_deletion boolean NOT NULL DEFAULT false,
    speed_kib int NOT NULL DEFAULT 0, -- per task, 0: unlimited
    project_scope text, -- delegated to that project's admins (beyond Harbor)
    creator text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (src_registry_id IS NULL OR dest_registry_id IS NULL)
);

CREATE TABLE replication_executions (
    id bigserial PRIMARY KEY,
    policy_id bigint NOT NULL REFERENCES replication_policies (id) ON DELETE CASCADE,
    status text NOT NULL DEFAULT 'InProgress',
    trigger text NOT NULL,
    status_text text NOT NULL DEFAULT '',
    start_time timestamptz NOT NULL DEFAULT now(),
    end_time timestamptz
);
CREATE INDEX replication_executions_policy ON replication_executions (policy_id, id DESC);

CREATE TABLE replication_tasks (
    id bigserial PRIMARY KEY,
    execution_id bigint NOT NULL REFERENCES replication_executions (id) ON DELETE CASCADE,
    resource_type text NOT NULL DEFAULT 'artifact',
    src_resource text NOT NULL, -- repo:tag or repo@digest at the source
    dst_resource text NOT NULL,
    operation text NOT NULL DEFAULT 'copy' CHECK (operation IN ('copy', 'deletion')),
    status text NOT NULL DEFAULT 'Pending',
    attempts int NOT NULL DEFAULT 0,
    bytes_sent bigint NOT NULL DEFAULT 0,  -- bytes put on the wire toward the destination
    bytes_total bigint NOT NULL DEFAULT 0, -- bytes of the blobs copied (uncompressed)
    start_time timestamptz,
    end_time timestamptz,
    not_before timestamptz NOT NULL DEFAULT now(), -- retry back-off
    log text NOT NULL DEFAULT ''
);
CREATE INDEX replication_tasks_execution ON replication_tasks (execution_id);
CREATE INDEX replication_tasks_queue ON replication_tasks (not_before) WHERE status IN ('Pending', 'InProgress');

-- A blob upload a task started at the destination: its session URL, to resume after a failure.
CREATE TABLE replication_uploads (
    task_id bigint NOT NULL REFERENCES replication_tasks (id) ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    location text NOT NULL,
    PRIMARY KEY (task_id, digest)
);
