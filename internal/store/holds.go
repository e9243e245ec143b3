package store

import "context"

// LegalHoldsRecorded says whether this build records legal holds. Legal
// holds (a conversation's or the whole installation's) are recorded by the
// retention work of issue 15 (sql/007); this build has none of its
// tables, so nothing can be held yet, and HeldConversations says so. A
// user deletion reports the value in its progress (legal_holds), so an
// operator never mistakes "nothing held" for "holds checked".
const LegalHoldsRecorded = false

// HeldConversations returns which of convIDs are under a legal hold (the
// conversation's own, or the installation's: then every one of them).
// A user deletion keeps the bodies the user sent in held conversations;
// every other reader of holds (retention) asks the same function.
//
// Without recorded holds (LegalHoldsRecorded false) no conversation is
// held and the answer is empty. This function is the one place that reads
// holds: where they are recorded, it answers from those records.
func (s *Store) HeldConversations(ctx context.Context, convIDs []int64) (map[int64]bool, error) {
	return map[int64]bool{}, nil
}
