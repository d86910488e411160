-- Issue #11: berthd's own system user (`berth-replication`, through which replication reaches this site's edge)
-- is marked, so the REST API can refuse to delete or change it (doing so broke replication) and the web UI can
-- hide those controls. Only berthd sets the flag (sql/users.c S_INTERNAL_USER); no API writes it.
ALTER TABLE users ADD COLUMN internal boolean NOT NULL DEFAULT false;
UPDATE users SET internal = true WHERE username = 'berth-replication' AND comment = 'internal: replication';
