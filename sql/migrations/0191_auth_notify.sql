-- Issue 19, many instances: every berthd remembers its gate decisions ("this credential may do that") for
-- auth.decision_ttl_seconds. A write that can take a right away — a membership or role, a project's visibility or
-- the project itself, a user's password, admin flag, state or the account, a robot's secret, state, expiry,
-- permissions or the robot — tells every instance to forget them, in the transaction that makes it: the NOTIFY is
-- delivered at commit to all listeners (sql/listen.c), this instance's included. Triggers, not the statements,
-- so no writer (the API, LDAP logins, an operator's psql) can forget to. Only real changes fire (row triggers
-- with WHEN): an LDAP login that finds the same groups, or a profile edit, keeps the decisions.
CREATE OR REPLACE FUNCTION berth_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_invalidate', '!auth'); -- folded into one per transaction by PostgreSQL
    RETURN NULL;
END
$$;

CREATE TRIGGER users_auth_changed AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.password_hash IS DISTINCT FROM NEW.password_hash OR OLD.sysadmin IS DISTINCT FROM NEW.sysadmin
          OR OLD.ldap_admin IS DISTINCT FROM NEW.ldap_admin OR OLD.disabled IS DISTINCT FROM NEW.disabled
          OR OLD.username IS DISTINCT FROM NEW.username OR OLD.ldap_dn IS DISTINCT FROM NEW.ldap_dn)
    EXECUTE FUNCTION berth_auth_changed();
CREATE TRIGGER users_auth_deleted AFTER DELETE ON users FOR EACH ROW EXECUTE FUNCTION berth_auth_changed();

CREATE TRIGGER robots_auth_changed AFTER UPDATE ON robots FOR EACH ROW
    WHEN (OLD.secret_sha256 IS DISTINCT FROM NEW.secret_sha256 OR OLD.disabled IS DISTINCT FROM NEW.disabled
          OR OLD.expires_at IS DISTINCT FROM NEW.expires_at OR OLD.name IS DISTINCT FROM NEW.name
          OR OLD.project_id IS DISTINCT FROM NEW.project_id)
    EXECUTE FUNCTION berth_auth_changed();
CREATE TRIGGER robots_auth_deleted AFTER DELETE ON robots FOR EACH ROW EXECUTE FUNCTION berth_auth_changed();
CREATE TRIGGER robot_permissions_auth_changed AFTER UPDATE OR DELETE ON robot_permissions FOR EACH ROW
    EXECUTE FUNCTION berth_auth_changed();

CREATE TRIGGER project_members_auth_changed AFTER UPDATE OR DELETE ON project_members FOR EACH ROW
    EXECUTE FUNCTION berth_auth_changed();
CREATE TRIGGER user_ldap_groups_auth_changed AFTER UPDATE OR DELETE ON user_ldap_groups FOR EACH ROW
    EXECUTE FUNCTION berth_auth_changed();

CREATE TRIGGER projects_auth_changed AFTER UPDATE ON projects FOR EACH ROW
    WHEN (OLD.public IS DISTINCT FROM NEW.public OR OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION berth_auth_changed();
CREATE TRIGGER projects_auth_deleted AFTER DELETE ON projects FOR EACH ROW EXECUTE FUNCTION berth_auth_changed();
