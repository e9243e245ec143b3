package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Postgres is the store of record of the inbox index (docs/design.md, "The
// inbox index"): every entry a fanout publishes is recorded there, with its
// inbox seq, before the sender sees STORED. An INBOX stream can come back
// below that record: a power cut loses what its server had not fsynced, a
// restored backup is older. Publishing into such a stream would hand out
// again seqs that devices, cursors and the archive already hold for other
// entries. So before it publishes into a partition, after every start and
// every reconnect of its NATS connection (a server that restarted may have
// lost a suffix), the fanout checks that the stream's last seq is at or
// above the partition's floor in Postgres. A stream below it is waited out:
// the syncer fences it (moves its first seq above the floor, internal/
// archive/fence.go), and the batch is retried until then.

// errInboxBehind: an INBOX stream's last seq is below what Postgres records
// of its partition: the syncer has not fenced it yet.
var errInboxBehind = errors.New("fanout: INBOX stream is behind what Postgres records (it lost entries): waiting for the syncer to fence it")

// inboxFence tracks which INBOX partitions were checked since the NATS
// connection last (re)connected, and the dedupe-id epoch of each.
type inboxFence struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	st    *store.Store
	parts int

	mu      sync.Mutex
	gen     uint64   // nc's reconnect count when checked[] was filled
	checked []bool   // per INBOX partition: checked in gen
	start   []uint64 // per INBOX partition: the epoch start recorded when checked
}

func newInboxFence(nc *nats.Conn, js jetstream.JetStream, st *store.Store, parts int) *inboxFence {
	return &inboxFence{nc: nc, js: js, st: st, parts: parts, checked: make([]bool, parts), start: make([]uint64, parts)}
}

// generation is the connection's reconnect count: a batch whose publishes
// span a reconnect may have written into a stream that came back shorter.
func (fc *inboxFence) generation() uint64 { return fc.nc.Stats().Reconnects }

// ready checks the INBOX partitions in need (those of the batch) that were
// not checked since the last reconnect. It returns the generation the
// batch publishes in and each partition's epoch start (for the dedupe
// ids), or errInboxBehind.
func (fc *inboxFence) ready(ctx context.Context, need []bool) (uint64, []uint64, error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	gen := fc.generation()
	if gen != fc.gen {
		clear(fc.checked)
		fc.gen = gen
	}
	var todo []int
	for p, n := range need {
		if n && !fc.checked[p] {
			todo = append(todo, p)
		}
	}
	if len(todo) > 0 {
		floor, recs, err := fc.st.InboxFloor(ctx, fc.parts)
		if err != nil {
			return 0, nil, err
		}
		for _, p := range todo {
			s, err := fc.js.Stream(ctx, streams.InboxStream(p))
			if err != nil {
				return 0, nil, fmt.Errorf("fanout: check %s: %w", streams.InboxStream(p), err)
			}
			last := s.CachedInfo().State.LastSeq
			if last < floor[p] {
				return 0, nil, fmt.Errorf("%s last seq %d, Postgres records %d: %w", streams.InboxStream(p), last, floor[p], errInboxBehind)
			}
			fc.checked[p], fc.start[p] = true, recs[p].Start
		}
	}
	return gen, fc.start, nil
}

// still reports whether the connection has not reconnected since gen.
func (fc *inboxFence) still(gen uint64) bool { return fc.generation() == gen }
