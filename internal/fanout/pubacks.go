package fanout

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/jsonscan"
)

// ackMux publishes inbox entries to JetStream and reads their
// acknowledgements. nats.go's PublishMsgAsync registers a future with two
// channels and a timer per message and decodes each acknowledgement with
// encoding/json under the publisher's one lock: 9 % of the all-in-one's
// CPU in `inboxbench fanout` (commit 836b404). Here a batch of
// publishes shares one channel; a reply subject carries the batch's id and the entry's index, and the
// acknowledgement is scanned for its three members (seq, error, stream).
type ackMux struct {
	nc     *nats.Conn
	prefix string // reply subjects: prefix + batch id + "." + index

	mu      sync.Mutex
	next    uint64
	batches map[uint64]*ackBatch
}

// ackResult is the acknowledgement of a batch's entry i: its stream
// sequence, or why it was not stored.
type ackResult struct {
	i   int
	seq uint64
	dup bool // deduplicated by its Nats-Msg-Id: seq is the first publish's
	err error
}

// ackBatch is one batch's publishes in flight. results holds room for
// every publish in flight (the caller keeps at most window of them), so
// the reply handler never blocks on it.
type ackBatch struct {
	m       *ackMux
	id      uint64
	reply   []byte // prefix + id + "."
	results chan ackResult
}

// newAckMux subscribes to the replies of the connection's own inbox prefix
// (a role's grants allow its own _INBOX prefix: internal/natsauth).
func newAckMux(nc *nats.Conn) (*ackMux, error) {
	m := &ackMux{nc: nc, prefix: nc.NewInbox() + ".", batches: map[uint64]*ackBatch{}}
	if _, err := nc.Subscribe(m.prefix+"*.*", m.handle); err != nil {
		return nil, fmt.Errorf("fanout: subscribe to publish acknowledgements: %w", err)
	}
	return m, nil
}

// batch returns a new batch with room for window publishes in flight; its
// done must be called when the caller is done with it.
func (m *ackMux) batch(window int) *ackBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	b := &ackBatch{m: m, id: m.next, results: make(chan ackResult, window)}
	b.reply = strconv.AppendUint([]byte(m.prefix), b.id, 10)
	b.reply = append(b.reply, '.')
	m.batches[b.id] = b
	return b
}

// done forgets the batch: late acknowledgements are dropped.
func (b *ackBatch) done() {
	b.m.mu.Lock()
	delete(b.m.batches, b.id)
	b.m.mu.Unlock()
}

// publish sends msg as the batch's entry i; its acknowledgement arrives
// on results.
func (b *ackBatch) publish(msg *nats.Msg, i int, buf []byte) ([]byte, error) {
	buf = strconv.AppendInt(append(buf[:0], b.reply...), int64(i), 10)
	msg.Reply = string(buf)
	return buf, b.m.nc.PublishMsg(msg)
}

// handle takes one acknowledgement (on the subscription's goroutine).
func (m *ackMux) handle(msg *nats.Msg) {
	id, i, ok := replyIDs(msg.Subject[len(m.prefix):])
	if !ok {
		return
	}
	m.mu.Lock()
	b := m.batches[id]
	m.mu.Unlock()
	if b == nil {
		return // its batch gave up (a timeout): nothing waits for it
	}
	seq, dup, err := parsePubAck(msg)
	select {
	case b.results <- ackResult{i: i, seq: seq, dup: dup, err: err}:
	default: // more answers than publishes: not JetStream's
	}
}

// replyIDs reads "<batch id>.<index>".
func replyIDs(s string) (uint64, int, bool) {
	batch, index, ok := strings.Cut(s, ".")
	if !ok {
		return 0, 0, false
	}
	id, err := strconv.ParseUint(batch, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 {
		return 0, 0, false
	}
	return id, i, true
}

// parsePubAck reads a JetStream publish acknowledgement:
// {"stream":"INBOX_3","seq":42} (with "duplicate":true for an entry
// deduplicated by its Nats-Msg-Id, whose seq is the first one's), or
// {"error":{"code":…,"err_code":…,"description":"…"}}. Its errors are the
// jetstream package's, as its own publish returns them: a 503 status (no
// stream took the publish) is jetstream.ErrNoStreamResponse, a refusal a
// *jetstream.APIError (errors.Is matches it against jetstream.ErrStreamNotFound
// and the like).
func parsePubAck(msg *nats.Msg) (seq uint64, dup bool, err error) {
	if len(msg.Data) == 0 {
		if msg.Header.Get("Status") == "503" {
			return 0, false, jetstream.ErrNoStreamResponse
		}
		return 0, false, errors.New("empty publish acknowledgement")
	}
	return parsePubAckData(msg.Data)
}

func parsePubAckData(data []byte) (seq uint64, dup bool, err error) {
	var stream, hasSeq bool
	var apiErr error
	err = jsonscan.EachMember(data, func(key, val []byte) error {
		switch string(key) {
		case "duplicate":
			dup = string(val) == "true"
		case "seq":
			n, ok := jsonscan.Uint(val)
			if !ok {
				return fmt.Errorf("seq %q", val)
			}
			seq, hasSeq = n, true
		case "stream":
			s, ok := jsonscan.Unquote(val)
			stream = ok && s != ""
		case "error":
			apiErr = parseAPIError(val)
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("publish acknowledgement %q: %w", truncate(data), err)
	case apiErr != nil:
		return 0, false, apiErr
	case !stream || !hasSeq:
		return 0, false, fmt.Errorf("publish acknowledgement without stream or seq: %q", truncate(data))
	}
	return seq, dup, nil
}

func parseAPIError(val []byte) error {
	if bytes.Equal(val, []byte("null")) {
		return nil
	}
	e := &jetstream.APIError{}
	err := jsonscan.EachMember(val, func(key, v []byte) error {
		switch string(key) {
		case "code":
			n, _ := jsonscan.Uint(v)
			e.Code = int(n)
		case "err_code":
			n, _ := jsonscan.Uint(v)
			e.ErrorCode = jetstream.ErrorCode(n)
		case "description":
			e.Description, _ = jsonscan.Unquote(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("publish acknowledgement error %q: %w", truncate(val), err)
	}
	return e
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
