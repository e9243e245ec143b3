package gateway

import "testing"

// A backfill waits on a partition whose stream is behind Postgres or not
// yet joined to the archive mark; a stream merely trimmed, fresh, or ahead
// of the archiver is served.
func TestUnfencedPartition(t *testing.T) {
	for _, c := range []struct {
		name                           string
		first, last, archived, written uint64
		want                           bool
	}{
		{"fresh installation", 1, 0, 0, 0, false},
		{"archiver behind the stream", 1, 500, 300, 480, false},
		{"trimmed up to the mark", 301, 500, 300, 500, false},
		{"emptied by the trimmer", 501, 500, 500, 500, false},
		{"lost a suffix: behind what the fanouts wrote", 1, 450, 300, 480, true},
		{"fenced, the mark not raised yet", 481, 480, 300, 480, true},
		{"fenced and the mark raised", 481, 480, 480, 480, false},
	} {
		if got := unfenced(c.first, c.last, c.archived, c.written); got != c.want {
			t.Errorf("%s: unfenced(first %d, last %d, archived %d, written %d) = %v, want %v",
				c.name, c.first, c.last, c.archived, c.written, got, c.want)
		}
	}
}
