-- The conv_seqs a member received in earlier memberships of a conversation.
-- A former member added again gets a new joined_seq (and left_seq NULL);
-- the span it had before, (joined_seq, left_seq], moves here, so "who was a
-- member at conv_seq s" stays answerable for every s: the member's current
-- span (joined_seq, left_seq] or past_seqs contains s. The fanout asks it
-- when it publishes a stored message again (after a crash): the recipients
-- of a message are the members at its conv_seq, whatever changed since.
ALTER TABLE conv_member ADD COLUMN past_seqs int8multirange NOT NULL DEFAULT '{}';

---- create above / drop below ----

ALTER TABLE conv_member DROP COLUMN past_seqs;
