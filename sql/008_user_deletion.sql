-- User deletions (inboxctl user delete, inboxd.admin.user.delete): one row
-- per user whose data was asked to be deleted. A syncer runs the job step
-- by step; every step is idempotent and the row records the step to run
-- next and what the steps removed so far, so a job cut short by a crash
-- resumes where it stopped. A finished job keeps its row (state 'done'),
-- which holds no data of the user but its uid: asking again answers at
-- once, and the row is the record that the deletion happened.
CREATE TABLE user_deletion (
    uid          bigint      PRIMARY KEY,
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done')),
    step         text        NOT NULL DEFAULT '',   -- the next step ('' before the first)
    progress     jsonb       NOT NULL DEFAULT '{}', -- what each step removed, its resume point
    runs         integer     NOT NULL DEFAULT 0,    -- how often a syncer started or resumed it
    error        text        NOT NULL DEFAULT '',   -- the last error of a step (the job retries it)
    requested_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_deletion_unfinished ON user_deletion (requested_at) WHERE state <> 'done';

-- Housekeeping removes send_reject rows past --reject-horizon, oldest
-- first, in small batches. The table is insert-only, so the index costs a
-- send nothing but its own entry. (device_cursor gets no index on
-- last_seen_at: its rows are updated every few seconds while devices are
-- connected, and an index on the updated column would make every one of
-- those updates a non-HOT update; housekeeping scans it instead, rarely.)
CREATE INDEX send_reject_by_time ON send_reject (created_at);

-- A deletion finds every membership of the user, former ones included:
-- conv_member_by_uid covers the current ones, this the former ones (a row
-- moves from one to the other when a member leaves; read_seq updates,
-- the frequent ones, touch neither).
CREATE INDEX conv_member_former_by_uid ON conv_member (uid, conv_id) WHERE left_seq IS NOT NULL;

---- create above / drop below ----

DROP INDEX conv_member_former_by_uid;
DROP INDEX send_reject_by_time;
DROP TABLE user_deletion;
