-- Per-user events ride the inbox like messages (read_sync, receipts): the
-- archive keeps their type and peer; msg_id is 0 for them.
ALTER TABLE inbox_archive ADD COLUMN event smallint NOT NULL DEFAULT 0;
ALTER TABLE inbox_archive ADD COLUMN peer_uid bigint NOT NULL DEFAULT 0;

-- inboxctl trace finds a message's inbox entries by msg_id.
CREATE INDEX inbox_archive_by_msg ON inbox_archive (msg_id) WHERE msg_id <> 0;

-- When a device was last connected (refreshed by its gateway every 30 s
-- while it is): inboxctl audit looks for devices that were connected and
-- still did not confirm a message.
ALTER TABLE device_cursor ADD COLUMN last_seen_at timestamptz NOT NULL DEFAULT now();

---- create above / drop below ----

ALTER TABLE device_cursor DROP COLUMN last_seen_at;
DROP INDEX inbox_archive_by_msg;
ALTER TABLE inbox_archive DROP COLUMN peer_uid;
ALTER TABLE inbox_archive DROP COLUMN event;
