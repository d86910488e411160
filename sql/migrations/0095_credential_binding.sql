-- Issues #10 and #17: every credential Berth issues dies with the credential it came from.
--
-- Refresh tokens were bound to a principal *name*: a deleted and re-created `bob` inherited the old tokens, and
-- a password change, a robot secret refresh or a disabled account did not end them. They now belong to an
-- account id (deleting the account deletes them) and carry a fingerprint of the credential that obtained them
-- (the password hash and LDAP DN of a user, the secret hash of a robot); a token whose fingerprint no longer
-- matches is refused. Tokens issued before this migration name no account and no credential: they end here
-- (their holders log in again once).
DELETE FROM refresh_tokens;
DROP INDEX IF EXISTS refresh_tokens_principal;
ALTER TABLE refresh_tokens DROP COLUMN principal;
ALTER TABLE refresh_tokens ADD COLUMN user_id bigint REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE refresh_tokens ADD COLUMN robot_id bigint REFERENCES robots (id) ON DELETE CASCADE;
ALTER TABLE refresh_tokens ADD COLUMN credential bytea NOT NULL;
ALTER TABLE refresh_tokens ADD CONSTRAINT refresh_tokens_one_account CHECK ((user_id IS NULL) <> (robot_id IS NULL));
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);
CREATE INDEX refresh_tokens_robot ON refresh_tokens (robot_id);

-- A user's credential fingerprint: what a refresh token must still match. LDAP users have no local hash; their
-- DN stands in (and the directory itself is asked again at every refresh).
CREATE FUNCTION berth_user_credential(password_hash text, ldap_dn text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(convert_to(coalesce(password_hash, '') || chr(10) || coalesce(ldap_dn, ''), 'UTF8'))
$$;

-- An LDAP-backed account never has a local password: the directory is the only source of truth for it. An
-- admin could set one before (PUT /users/{id}/password answered 200); such hashes are removed here, so those
-- accounts log in through the directory again.
UPDATE users SET password_hash = NULL WHERE ldap_dn IS NOT NULL AND password_hash IS NOT NULL;
ALTER TABLE users ADD CONSTRAINT users_ldap_no_password CHECK (ldap_dn IS NULL OR password_hash IS NULL);

-- LDAP names are compared the way the directory compares them (case-insensitively): finding an account by a
-- folded name needs this index. Existing rows that differ only by case are left as they are (nothing is merged
-- or deleted); logins reach the row spelled as the directory spells the name.
CREATE INDEX users_username_folded ON users (lower(username));

-- Browser sessions of LDAP users are re-checked against the directory every ldap.session_recheck_seconds.
ALTER TABLE sessions ADD COLUMN checked_at timestamptz NOT NULL DEFAULT now();
