-- Scheduled replication with several berthd on one database (issue 19): each checks the cron every minute, and
-- the one that moves last_fired to that minute first starts the execution; the others see it moved and do not.
ALTER TABLE replication_policies ADD COLUMN IF NOT EXISTS last_fired timestamptz;
