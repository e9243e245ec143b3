package streams

import "time"

// Lookup and SetTryTimeout open the retried look-up to streams_test, which
// a test inside the package could not reach (testenv imports streams).
var Lookup = lookup

func SetTryTimeout(d time.Duration) (restore func()) {
	old := tryTimeout
	tryTimeout = d
	return func() { tryTimeout = old }
}
