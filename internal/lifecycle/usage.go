package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// StreamUsage is what one stream holds (JetStream's stream state).
type StreamUsage struct {
	Name      string     `json:"name"`
	Entries   uint64     `json:"entries"`
	Bytes     uint64     `json:"bytes"`
	FirstSeq  uint64     `json:"first_seq"`
	LastSeq   uint64     `json:"last_seq"`
	Oldest    *time.Time `json:"oldest,omitempty"` // the first entry's time (none when empty)
	Deleted   int        `json:"deleted"`          // sequences removed inside the range (purged subjects)
	Consumers int        `json:"consumers"`
}

// Usage is where the disk goes: every stream of the installation and
// every table.
type Usage struct {
	Streams []StreamUsage      `json:"streams"`
	Tables  []store.TableUsage `json:"tables"`
}

// Usage reads the state of every stream (SEND, INBOX_0 …) and every table.
func (l *Lifecycle) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	names := []string{streams.SendStream}
	for p := 0; p < l.opts.Layout.InboxPartitions; p++ {
		names = append(names, streams.InboxStream(p))
	}
	for _, name := range names {
		s, err := l.js.Stream(ctx, name)
		if err != nil {
			return u, fmt.Errorf("usage: stream %s: %w", name, err)
		}
		st := s.CachedInfo().State
		su := StreamUsage{Name: name, Entries: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
			Deleted: st.NumDeleted, Consumers: st.Consumers}
		if st.Msgs > 0 {
			t := st.FirstTime
			su.Oldest = &t
		}
		u.Streams = append(u.Streams, su)
	}
	tables, err := l.st.TablesUsage(ctx)
	if err != nil {
		return u, err
	}
	u.Tables = tables
	return u, nil
}
