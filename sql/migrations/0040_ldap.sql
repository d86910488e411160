-- LDAP users and groups (issue #3). LDAP users carry no password hash but the DN they were found at; their
-- admin flag from the group admin DN is refreshed at every login (ldap_admin), apart from a local sysadmin flag.
ALTER TABLE users ADD COLUMN ldap_dn text;
ALTER TABLE users ADD COLUMN ldap_admin boolean NOT NULL DEFAULT false;

-- Groups that can be project members (Harbor's user groups; type 1 = LDAP). DNs are stored normalized
-- (lowercase, no spaces around separators), as auth/ldap.c compares them.
CREATE TABLE user_groups (
    id bigserial PRIMARY KEY,
    group_name text NOT NULL,
    group_type smallint NOT NULL DEFAULT 1,
    ldap_group_dn text COLLATE "C" NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The groups a user was in at the last login: replaced as a whole by each login (one LDAP search, one statement).
CREATE TABLE user_ldap_groups (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_dn text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, group_dn)
);
CREATE INDEX user_ldap_groups_dn ON user_ldap_groups (group_dn);

-- A member is a user or a group.
ALTER TABLE project_members DROP CONSTRAINT project_members_pkey;
ALTER TABLE project_members ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE project_members ADD COLUMN group_id bigint REFERENCES user_groups (id) ON DELETE CASCADE;
ALTER TABLE project_members ADD CONSTRAINT project_members_one_entity CHECK ((user_id IS NULL) <> (group_id IS NULL));
CREATE UNIQUE INDEX project_members_user_unique ON project_members (project_id, user_id) WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX project_members_group_unique ON project_members (project_id, group_id) WHERE group_id IS NOT NULL;
CREATE INDEX project_members_group ON project_members (group_id);

-- A user's role in a project: the highest of the direct grant and the grants of the groups the user was in at
-- the last login. Harbor's order: projectAdmin (1) > maintainer (4) > developer (2) > guest (3) > limitedGuest (5).
CREATE FUNCTION berth_member_role(project bigint, uid bigint) RETURNS smallint LANGUAGE sql STABLE AS $$
    SELECT m.role FROM project_members m
    WHERE m.project_id = project
      AND (m.user_id = uid OR m.group_id IN (SELECT g.id FROM user_groups g
                                             JOIN user_ldap_groups l ON l.group_dn = g.ldap_group_dn
                                             WHERE l.user_id = uid))
    ORDER BY CASE m.role WHEN 1 THEN 0 WHEN 4 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 3 ELSE 4 END
    LIMIT 1
$$;
