-- How far the syncer's archiver has copied each INBOX partition into
-- inbox_archive: every entry of partition p with seq <= archived_seq is there.
-- Catch-up reads older ranges from the archive up to this mark and only the
-- tail after it from JetStream.
CREATE TABLE archive_progress (
    partition    integer     PRIMARY KEY,
    archived_seq bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A consumer name belongs to one (uid, device): a hash collision between two
-- devices of a user would fail loudly here instead of sharing a cursor.
CREATE UNIQUE INDEX device_cursor_consumer ON device_cursor (consumer);

---- create above / drop below ----

DROP INDEX device_cursor_consumer;
DROP TABLE archive_progress;
