-- Several berthd may share one database: a task records which instance runs it and when it last made progress,
-- so a starting instance takes back only its own tasks and those an instance left silent for five minutes.
ALTER TABLE replication_tasks ADD COLUMN claimed_by text NOT NULL DEFAULT '';
ALTER TABLE replication_tasks ADD COLUMN heartbeat timestamptz;
