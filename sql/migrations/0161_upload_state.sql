-- Upload sessions on a driver whose bytes are not a local file (s3, issue 19): the driver's state (multipart
-- upload id, part ETags, offset, where the tail bytes are) and the running sha256 state live in the row, so any
-- berthd continues the session. A request appending to a session holds the row locked (FOR UPDATE NOWAIT) for
-- its duration: a second writer is refused with 416, and a berthd that dies releases the lock with its connection.
ALTER TABLE upload_sessions ADD COLUMN IF NOT EXISTS state text, ADD COLUMN IF NOT EXISTS hash_state text;
