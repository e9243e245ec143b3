-- Postgres is the store of record of the inbox index: the fanout writes
-- every message entry's row into inbox_archive, with the inbox seq its
-- PubAck gave, in the transaction that marks the message fanned out, before
-- the sender sees STORED. The INBOX streams are the hot copy. A stream that
-- comes back below what Postgres knows (a power cut lost its unsynced
-- suffix, a backup was restored) is fenced above it by the syncer, and what
-- it lost is served from the archive (docs/design.md, "The inbox index").
--
-- inbox_written keeps, per SEND partition (one fanout writes a row at a
-- time, so fanouts never wait for each other's rows), the highest inbox seq
-- it was acknowledged in each INBOX partition: highs[p+1] for INBOX_<p>.
-- The fence of INBOX_<p> is the greatest of these, the archive mark and the
-- mirrored device cursors.
CREATE TABLE inbox_written (
    send_partition integer  PRIMARY KEY,
    highs          bigint[] NOT NULL
);

---- create above / drop below ----

DROP TABLE inbox_written;
