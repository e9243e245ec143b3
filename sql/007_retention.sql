-- Retention (issue 15): msg_content and inbox_archive become partitioned by
-- time ranges of a msg_id-shaped key, so that retention removes a whole
-- range by detaching and dropping its partitions, never by a long DELETE.
--
-- msg_content is partitioned by msg_id itself (a snowflake whose top bits
-- are milliseconds since 2025-01-01, internal/ids): its primary key stays.
-- inbox_archive gets tkey, the msg_id of the entry's message, or for an
-- event (msg_id 0) the smallest msg_id of the event's time, so an entry
-- lives in the same range as its message and events age like messages.
--
-- A partitioned table's unique constraints must contain the partition key:
-- UNIQUE (sender_uid, client_msg_id) and UNIQUE (conv_id, conv_seq) become
-- per-partition unique indexes. conv_seq stays unique through the single
-- writer per conversation (the fanout, under the conversation's row lock);
-- a retried send is still found by its key in every partition (the
-- fanout's lookup reads them all), and the per-partition index refuses a
-- concurrent duplicate within one range.
--
-- The data of an existing installation stays where it is: the old tables
-- become the "legacy" partitions, covering every key below the cutover
-- (the migration's time); attaching them scans them once. New rows go to a
-- default partition until the syncer creates the first ranges: it then
-- moves them into its first range and drops the default partition
-- (DETACH ... CONCURRENTLY, which retention uses, is refused while one
-- exists).

-- One row per range: its partitions are msg_content_<name> and
-- inbox_archive_<name> (suffix _h<gen> after gen rebuilds that kept held
-- conversations' rows: those of kept), covering keys lo <= key < hi.
CREATE TABLE data_range (
    name       text        PRIMARY KEY,
    lo         bigint      NOT NULL UNIQUE,
    hi         bigint      NOT NULL,
    gen        integer     NOT NULL DEFAULT 0,
    kept       bigint[],
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (lo < hi)
);

-- The retention horizon per conversation: its messages up to expired_seq
-- were removed (recorded before their range is dropped, so a read never
-- meets a missing body it cannot explain). expired_msg_id is the largest
-- msg_id removed: the login summary orders a conversation whose last
-- message is gone by it.
CREATE TABLE conv_expiry (
    conv_id        bigint      PRIMARY KEY,
    expired_seq    bigint      NOT NULL,
    expired_msg_id bigint      NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Conversations under legal hold: retention keeps their messages and inbox
-- entries however old (inboxctl conv hold).
CREATE TABLE conv_hold (
    conv_id bigint      PRIMARY KEY REFERENCES conversation (conv_id),
    held_at timestamptz NOT NULL DEFAULT now()
);

-- msg_content.
ALTER TABLE msg_content RENAME TO msg_content_legacy;
ALTER TABLE msg_content_legacy RENAME CONSTRAINT msg_content_pkey TO msg_content_legacy_pkey;
ALTER TABLE msg_content_legacy RENAME CONSTRAINT msg_content_sender_uid_client_msg_id_key TO msg_content_legacy_send_key;
ALTER TABLE msg_content_legacy RENAME CONSTRAINT msg_content_conv_id_conv_seq_key TO msg_content_legacy_conv_seq;
CREATE TABLE msg_content (LIKE msg_content_legacy INCLUDING DEFAULTS, PRIMARY KEY (msg_id))
    PARTITION BY RANGE (msg_id);
CREATE TABLE msg_content_default PARTITION OF msg_content DEFAULT;
CREATE UNIQUE INDEX msg_content_default_send_key ON msg_content_default (sender_uid, client_msg_id);
CREATE UNIQUE INDEX msg_content_default_conv_seq ON msg_content_default (conv_id, conv_seq);

-- inbox_archive: the new key column costs no rewrite (a constant default);
-- the legacy rows all have tkey 0, inside the legacy range.
ALTER TABLE inbox_archive RENAME TO inbox_archive_legacy;
ALTER INDEX inbox_archive_by_msg RENAME TO inbox_archive_legacy_by_msg;
ALTER TABLE inbox_archive_legacy ADD COLUMN tkey bigint NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX inbox_archive_legacy_key ON inbox_archive_legacy (uid, seq, tkey);
ALTER TABLE inbox_archive_legacy DROP CONSTRAINT inbox_archive_pkey;
CREATE TABLE inbox_archive (LIKE inbox_archive_legacy INCLUDING DEFAULTS, PRIMARY KEY (uid, seq, tkey))
    PARTITION BY RANGE (tkey);
ALTER TABLE inbox_archive ALTER COLUMN tkey DROP DEFAULT; -- every new row names its key
CREATE INDEX inbox_archive_by_msg ON inbox_archive (msg_id) WHERE msg_id <> 0;
CREATE TABLE inbox_archive_default PARTITION OF inbox_archive DEFAULT;

DO $$
DECLARE
    -- The smallest msg_id of now (internal/ids: ms since 2025-01-01 << 22),
    -- and above every stored one.
    cutover bigint := GREATEST(
        (SELECT coalesce(max(msg_id), 0) + 1 FROM msg_content_legacy),
        (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1735689600000) << 22);
BEGIN
    EXECUTE format('ALTER TABLE msg_content ATTACH PARTITION msg_content_legacy FOR VALUES FROM (MINVALUE) TO (%s)', cutover);
    EXECUTE format('ALTER TABLE inbox_archive ATTACH PARTITION inbox_archive_legacy FOR VALUES FROM (MINVALUE) TO (%s)', cutover);
    INSERT INTO data_range (name, lo, hi) VALUES ('legacy', -9223372036854775808, cutover);
END $$;
COMMENT ON TABLE msg_content_legacy IS 'inboxd range';
COMMENT ON TABLE inbox_archive_legacy IS 'inboxd range';

---- create above / drop below ----

-- Back to plain tables (copies every row).
CREATE TABLE msg_content_plain (LIKE msg_content INCLUDING DEFAULTS, PRIMARY KEY (msg_id),
    UNIQUE (sender_uid, client_msg_id), UNIQUE (conv_id, conv_seq));
INSERT INTO msg_content_plain SELECT * FROM msg_content;
DROP TABLE msg_content;
ALTER TABLE msg_content_plain RENAME TO msg_content;
ALTER TABLE msg_content RENAME CONSTRAINT msg_content_plain_pkey TO msg_content_pkey;
ALTER TABLE msg_content RENAME CONSTRAINT msg_content_plain_sender_uid_client_msg_id_key TO msg_content_sender_uid_client_msg_id_key;
ALTER TABLE msg_content RENAME CONSTRAINT msg_content_plain_conv_id_conv_seq_key TO msg_content_conv_id_conv_seq_key;

CREATE TABLE inbox_archive_plain (LIKE inbox_archive INCLUDING DEFAULTS, PRIMARY KEY (uid, seq));
INSERT INTO inbox_archive_plain SELECT * FROM inbox_archive ON CONFLICT DO NOTHING;
DROP TABLE inbox_archive;
ALTER TABLE inbox_archive_plain DROP COLUMN tkey;
ALTER TABLE inbox_archive_plain RENAME TO inbox_archive;
ALTER TABLE inbox_archive RENAME CONSTRAINT inbox_archive_plain_pkey TO inbox_archive_pkey;
CREATE INDEX inbox_archive_by_msg ON inbox_archive (msg_id) WHERE msg_id <> 0;

DROP TABLE conv_hold;
DROP TABLE conv_expiry;
DROP TABLE data_range;
