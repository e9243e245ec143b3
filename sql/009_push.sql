-- Offline push (internal/push, the syncer): one row per user who was ever
-- sent a push event. covered_seq is the highest inbox seq of the user
-- covered by an event (an entry redelivered at or below it was handled
-- already), last_push_at opens the user's collapse window, events counts
-- the user's events (the event id is "<uid>:<events>", its Nats-Msg-Id and
-- the relay's idempotency key). pending holds the newest event from the
-- commit that decided it until JetStream acknowledged its publish: a syncer
-- that died in between publishes it again at start, under the same id.
-- It is cleared then, so no event (nor a body with --push-body) stays here.
CREATE TABLE push_state (
    uid          bigint      PRIMARY KEY,
    covered_seq  bigint      NOT NULL DEFAULT 0,
    last_push_at timestamptz NOT NULL,
    events       bigint      NOT NULL DEFAULT 0,
    pending      text
);
CREATE INDEX push_state_pending ON push_state (uid) WHERE pending IS NOT NULL;

---- create above / drop below ----

DROP TABLE push_state;
