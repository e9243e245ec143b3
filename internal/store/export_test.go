package store

// The queries whose plans the tests check.
var (
	SQLVisible         = sqlVisible
	SQLPullAfter       = sqlPullAfter
	SQLPullBefore      = sqlPullBefore
	SQLReadCount       = sqlReadCount
	SQLTraceRecipients = sqlTraceRecipients
)

// SetAfterHorizons makes ExpireRange call f between recording the
// horizons and looking up the holds.
func SetAfterHorizons(s *Store, f func()) { s.afterHorizons = f }
