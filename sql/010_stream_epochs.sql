-- Stream epochs (docs/operations.md "Restore and stream epochs"). An INBOX_<p>
-- stream recreated empty (a lost disk, `nats stream rm`, a restored backup)
-- would number its entries from 1 again, below the device cursors and the
-- archive mark. The syncer recreates or renumbers such a stream so that its
-- sequences start above everything seen before (epoch_start), and records
-- here which stream the mark belongs to: stream_epoch is the stream's
-- creation time in ns (StreamInfo.Created), 0 before the syncer recorded one.
ALTER TABLE archive_progress ADD COLUMN stream_epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE archive_progress ADD COLUMN epoch_start bigint NOT NULL DEFAULT 0;

-- The stream epoch a mirrored device cursor was confirmed in (0: written
-- before epochs were recorded). A cursor of an older epoch is trusted in a
-- newer stream only up to that stream's epoch_start - 1.
ALTER TABLE device_cursor ADD COLUMN epoch bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE device_cursor DROP COLUMN epoch;
ALTER TABLE archive_progress DROP COLUMN epoch_start;
ALTER TABLE archive_progress DROP COLUMN stream_epoch;
