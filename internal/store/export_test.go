package store

// The queries whose plans the tests check.
var (
	SQLVisible         = sqlVisible
	SQLPullAfter       = sqlPullAfter
	SQLPullBefore      = sqlPullBefore
	SQLReadCount       = sqlReadCount
	SQLTraceRecipients = sqlTraceRecipients
)
