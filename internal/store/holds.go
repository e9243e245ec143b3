package store

import "context"

// LegalHoldsRecorded says whether this build records conversations' legal
// holds. They are recorded by the retention work of issue 15 (sql/007,
// table conv_hold; the installation-wide hold is a setting of the syncer,
// lifecycle.Options.LegalHold); this build has no such table, so no
// conversation can be held yet and HeldConversations says so. A user
// deletion reports the value in its progress (legal_holds), so an
// operator never mistakes "nothing held" for "holds checked".
const LegalHoldsRecorded = false

// HeldConversations returns which of convIDs are under their own legal
// hold. A user deletion keeps the bodies the user sent in held
// conversations; this function is the one place it reads holds from.
//
// Without recorded holds (LegalHoldsRecorded false) the answer is empty.
// Where conv_hold exists, it is
// `SELECT conv_id FROM conv_hold WHERE conv_id = ANY($1::bigint[])`.
func (s *Store) HeldConversations(ctx context.Context, convIDs []int64) (map[int64]bool, error) {
	return map[int64]bool{}, nil
}
