-- Inbox entries the archiver could not decode (a stream entry that is not
-- a valid pb.InboxEntry, or a subject without a uid). They are kept here
-- with their raw bytes instead of being skipped, so that nothing the
-- archive misses goes without a trace: archive_progress now means every
-- entry of partition p with seq <= archived_seq is in inbox_archive or, if
-- undecodable, here. The archiver writes a row in the same transaction as
-- the progress mark that passes it.
CREATE TABLE inbox_quarantine (
    partition integer     NOT NULL,
    seq       bigint      NOT NULL,
    subject   text        NOT NULL,
    raw       bytea       NOT NULL,
    error     text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition, seq)
);

---- create above / drop below ----

DROP TABLE inbox_quarantine;
