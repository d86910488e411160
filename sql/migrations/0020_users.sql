-- Users and project membership (issue #2). Local users carry an argon2id hash; LDAP users (issue #3) will
-- carry none. Roles follow Harbor: 1 projectAdmin, 2 developer, 3 guest, 4 maintainer, 5 limitedGuest.
CREATE TABLE users (
    id bigserial PRIMARY KEY,
    username text COLLATE "C" NOT NULL UNIQUE,
    password_hash text,
    sysadmin boolean NOT NULL DEFAULT false,
    disabled boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE project_members (
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role smallint NOT NULL CHECK (role BETWEEN 1 AND 5),
    PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user ON project_members (user_id);
