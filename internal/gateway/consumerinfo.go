package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/jsonscan"
)

// A device consumer's state read with the core NATS client rather than
// through jetstream.Consumer (as pulls are, pull.go). A login and the
// tail's NumPending need five numbers of the consumer's info; the
// jetstream package decodes the whole ConsumerInfo (its config with a
// time.Duration per field, the cluster and its replicas, the metadata
// map, three timestamps) and wraps it in a handle with a mutex, which in
// a wave of returning devices was 12 % of the gateway's CPU
// (commit 745df1c). The request is
// the same ($JS.API.CONSUMER.INFO.<stream>.<consumer>, no body), and its
// errors are the jetstream package's: ErrConsumerNotFound for a consumer
// that is not there, the server's *jetstream.APIError for the others (an
// offline consumer's among them: offline), the NATS client's for a
// request nobody answered (natsconn.Unanswered).

// consumerState is what the gateway reads of a consumer's info: the
// fields of jetstream.ConsumerInfo of the same names.
type consumerState struct {
	Delivered     seqPair
	AckFloor      seqPair
	NumAckPending int
	NumPending    uint64
}

// seqPair is jetstream.SequenceInfo without its last_active time.
type seqPair struct {
	Consumer, Stream uint64
}

// stateOf is the consumerState of a ConsumerInfo the jetstream package
// returned (a created or reset consumer).
func stateOf(ci *jetstream.ConsumerInfo) consumerState {
	return consumerState{
		Delivered:     seqPair{ci.Delivered.Consumer, ci.Delivered.Stream},
		AckFloor:      seqPair{ci.AckFloor.Consumer, ci.AckFloor.Stream},
		NumAckPending: ci.NumAckPending,
		NumPending:    ci.NumPending,
	}
}

// consumerInfoSubject is the request subject of stream's consumer's info.
func consumerInfoSubject(stream, consumer string) string {
	return "$JS.API.CONSUMER.INFO." + stream + "." + consumer
}

// apiTimeout bounds a JetStream API request made with the core client
// when its context has no deadline (a session's has none): the jetstream
// package's default. A request that reached the server answering for the
// consumer just before that server was killed is answered by nobody, and
// without a bound it would hold its caller (a session's backfill) until
// the session ends.
const apiTimeout = 5 * time.Second

// request makes a JetStream API request with the core client, bounded by
// apiTimeout when ctx has no deadline: every such request of a device
// consumer goes through here.
func (dc *deviceConsumer) request(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeout)
		defer cancel()
	}
	return dc.nc.RequestWithContext(ctx, subject, data)
}

// state reads the consumer's state from its server.
func (dc *deviceConsumer) state(ctx context.Context) (consumerState, error) {
	m, err := dc.request(ctx, consumerInfoSubject(dc.stream, dc.name), nil)
	if err != nil {
		return consumerState{}, err
	}
	return parseConsumerInfo(m.Data)
}

// reset resets the consumer with the core client, as the jetstream
// package's ResetConsumer (seq 0: to its ack floor, unacknowledged
// deliveries come back at once) and ResetConsumerToSequence (seq: it
// delivers seq next, everything below it acknowledged) do, and returns
// its state after the reset and the sequence it was reset to. The answer
// carries the consumer's whole info; the jetstream package decodes all of
// it with encoding/json, which was 4.5 % of the all-in-one's CPU in a
// 3,000-device login storm (a reset per device where the catch-up moves
// from the archive to the consumer); it is read here like an info answer.
func (dc *deviceConsumer) reset(ctx context.Context, seq uint64) (consumerState, uint64, error) {
	req := []byte("{}")
	if seq > 0 {
		req = strconv.AppendUint([]byte(`{"seq":`), seq, 10)
		req = append(req, '}')
	}
	m, err := dc.request(ctx, consumerResetSubject(dc.stream, dc.name), req)
	if err != nil {
		return consumerState{}, 0, err
	}
	return parseConsumerAnswer(m.Data, consumerResetType)
}

// consumerResetSubject is the request subject of stream's consumer's reset.
func consumerResetSubject(stream, consumer string) string {
	return "$JS.API.CONSUMER.RESET." + stream + "." + consumer
}

// consumerResetType is the type of a CONSUMER.RESET answer (nats-server's
// JSApiConsumerResetResponseType): a consumer info and reset_seq.
const consumerResetType = "io.nats.jetstream.api.v1.consumer_reset_response"

// parseConsumerInfo reads a CONSUMER.INFO answer.
func parseConsumerInfo(data []byte) (consumerState, error) {
	st, _, err := parseConsumerAnswer(data, consumerInfoType)
	return st, err
}

// parseConsumerAnswer reads a CONSUMER.INFO or CONSUMER.RESET answer (of
// type want; reset_seq is the latter's): its top-level members
// are walked and only the five numbers, the type and the error are read;
// the rest (about 1 KB: the config echoed, the cluster) is skipped
// without being decoded. encoding/json, even into a struct of the five
// fields, validates and walks the whole answer with its reflection: it
// was still 13 % of the gateway's CPU in a login wave, this is a tenth
// of it (BenchmarkConsumerInfoAnswer). Every valid JSON answer is read
// as encoding/json reads it into those fields, an error where it gives
// one (FuzzParseConsumerInfo); an invalid one is an error or read as
// best it can be, never a panic.
func parseConsumerAnswer(data []byte, want string) (consumerState, uint64, error) {
	// The members' values first (of a key given twice, the last, as
	// encoding/json keeps it), then read.
	var typ, apiErr, delivered, ackFloor, ackPending, pending, resetSeq []byte
	err := jsonscan.EachMember(data, func(key, val []byte) error {
		switch string(key) {
		case "type":
			typ = val
		case "error":
			apiErr = val
		case "delivered":
			delivered = val
		case "ack_floor":
			ackFloor = val
		case "num_ack_pending":
			ackPending = val
		case "num_pending":
			pending = val
		case "reset_seq":
			resetSeq = val
		}
		return nil
	})
	var st consumerState
	var errs [5]error
	var reset uint64
	st.Delivered, errs[0] = parseSeqPair(delivered)
	st.AckFloor, errs[1] = parseSeqPair(ackFloor)
	st.NumAckPending, errs[2] = parseInt(ackPending)
	st.NumPending, errs[3] = parseCount(pending)
	reset, errs[4] = parseCount(resetSeq)
	if err := errors.Join(err, errs[0], errs[1], errs[2], errs[3], errs[4]); err != nil {
		return consumerState{}, 0, fmt.Errorf("consumer info: %w", err)
	}
	if apiErr != nil && string(apiErr) != "null" {
		var e jetstream.APIError
		if err := json.Unmarshal(apiErr, &e); err != nil {
			return consumerState{}, 0, fmt.Errorf("consumer info: error: %w", err)
		}
		if e.ErrorCode == jetstream.JSErrCodeConsumerNotFound {
			return consumerState{}, 0, jetstream.ErrConsumerNotFound
		}
		// Any other API error as it came: errors.Is matches it against
		// the jetstream package's errors by its code (APIError.Is), a
		// refused reset against ErrConsumerInvalidReset too.
		return consumerState{}, 0, &e
	}
	if t, ok := jsonscan.Unquote(typ); !ok || t != want {
		return consumerState{}, 0, fmt.Errorf("consumer info: an answer of type %.60s", typ)
	}
	return st, reset, nil
}

// consumerInfoType is the type of a CONSUMER.INFO answer (nats-server's
// JSApiConsumerInfoResponseType).
const consumerInfoType = "io.nats.jetstream.api.v1.consumer_info_response"

// parseSeqPair reads a SequenceInfo object's two sequences (null or
// absent: none).
func parseSeqPair(val []byte) (seqPair, error) {
	if val == nil || string(val) == "null" {
		return seqPair{}, nil
	}
	var c, st []byte
	err := jsonscan.EachMember(val, func(key, v []byte) error {
		switch string(key) {
		case "consumer_seq":
			c = v
		case "stream_seq":
			st = v
		}
		return nil
	})
	var p seqPair
	var errC, errS error
	p.Consumer, errC = parseCount(c)
	p.Stream, errS = parseCount(st)
	return p, errors.Join(err, errC, errS)
}

// parseCount reads a JSON number that is a non-negative integer (null or
// absent: 0).
func parseCount(val []byte) (uint64, error) {
	if val == nil || string(val) == "null" {
		return 0, nil
	}
	n, ok := jsonscan.Uint(val)
	if !ok {
		return 0, fmt.Errorf("not a count: %.24q", val)
	}
	return n, nil
}

// parseInt reads a JSON number that is an integer (null or absent: 0).
func parseInt(val []byte) (int, error) {
	neg := len(val) > 0 && val[0] == '-'
	if neg {
		val = val[1:]
		if string(val) == "null" {
			return 0, errors.New("not an integer: -null")
		}
	}
	u, err := parseCount(val)
	switch {
	case err != nil:
		return 0, err
	case !neg && u > math.MaxInt:
		return 0, fmt.Errorf("%s: too big", val)
	case neg && u > math.MaxInt+1:
		return 0, fmt.Errorf("-%s: too small", val)
	case neg:
		return int(-u), nil
	}
	return int(u), nil
}
