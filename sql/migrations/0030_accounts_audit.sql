-- Issue #2, second part: project ownership, user profiles, robot accounts, browser sessions, OAuth2 refresh
-- tokens and the audit log.
ALTER TABLE projects ADD COLUMN owner_id bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE projects ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE repositories ADD COLUMN pull_count bigint NOT NULL DEFAULT 0;
ALTER TABLE manifests ADD COLUMN pull_time timestamptz;

ALTER TABLE users ADD COLUMN email text NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN realname text NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN comment text NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

-- Robot accounts. `name` is the full login name (robot$<project>+<name> or robot$<name>). The secret is 32 random
-- bytes shown once; only its SHA-256 is kept (a fast hash is right for a high-entropy secret, and keeps robot
-- logins off argon2's memory budget).
CREATE TABLE robots (
    id bigserial PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    description text NOT NULL DEFAULT '',
    level text NOT NULL CHECK (level IN ('system', 'project')),
    project_id bigint REFERENCES projects (id) ON DELETE CASCADE,
    secret_sha256 bytea NOT NULL,
    disabled boolean NOT NULL DEFAULT false,
    expires_at timestamptz, -- NULL: never
    creator text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((level = 'project') = (project_id IS NOT NULL))
);
CREATE INDEX robots_project ON robots (project_id);

-- A robot's grants: namespace is a project name or '*' (system robots, every project).
CREATE TABLE robot_permissions (
    robot_id bigint NOT NULL REFERENCES robots (id) ON DELETE CASCADE,
    namespace text COLLATE "C" NOT NULL,
    resource text NOT NULL,
    action text NOT NULL,
    PRIMARY KEY (robot_id, namespace, resource, action)
);

-- Browser sessions: the cookie carries a random id; only its SHA-256 is stored.
CREATE TABLE sessions (
    id_sha256 bytea PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- OAuth2 refresh tokens (POST /service/token, offline tokens): opaque, stored as SHA-256.
CREATE TABLE refresh_tokens (
    token_sha256 bytea PRIMARY KEY,
    principal text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX refresh_tokens_principal ON refresh_tokens (principal);

-- The audit log outlives what it names: no foreign keys, the project is kept by id and name.
CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    op_time timestamptz NOT NULL DEFAULT now(),
    username text NOT NULL,
    remote text NOT NULL DEFAULT '',
    operation text NOT NULL,
    resource_type text NOT NULL,
    resource text NOT NULL,
    project_id bigint,
    result text NOT NULL,
    detail text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_time ON audit_log (id DESC);
CREATE INDEX audit_log_project ON audit_log (project_id, id DESC);

-- Members get an id of their own (Harbor's member id); LDAP group members (issue #3) will share the table.
ALTER TABLE project_members ADD COLUMN id bigserial UNIQUE;
