package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A pull request on a device consumer, made with the core NATS client
// rather than through a jetstream.Consumer handle. The handle keeps the
// consumer's whole ConsumerInfo as decoded at login (its config, cluster
// and metadata maps): 1.1 KB of heap for every connected device, most of
// an idle connection's cost (commit 4a0dbc4), for
// a request that needs only the stream and consumer names. Its Fetch also
// starts a goroutine and two channels per call; this one collects the
// deliveries in the caller's goroutine.
//
// The protocol (ADR-13, nats-server's consumer.go processNextMsgRequest):
// a request to $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> with a reply
// inbox and {"batch":n,"expires":ns}; the server sends up to n deliveries
// to the inbox, each with its $JS.ACK reply subject, and ends a request it
// could not fill with a status message (408 when it expired). The status
// codes are mapped to the errors the jetstream package gives for them, so
// that the session's recovery (recover, lost) reads them as before.

// pulled is one delivery of a pull request.
type pulled struct {
	data        []byte
	subject     string
	reply       string // its $JS.ACK subject: acknowledging it acks everything up to it (AckPolicy all)
	streamSeq   uint64
	consumerSeq uint64
	pending     uint64 // NumPending after it
}

// pullExtra bounds how long a pull waits past its expiry for the server's
// answer before it gives up (nats.go's Fetch waits a second too).
const pullExtra = time.Second

// pull asks the consumer for up to n deliveries and waits up to wait for
// them. It returns what came; err is nil when the request was filled or
// expired (the server's 408), otherwise why it ended. Deliveries that came
// before an error are returned with it.
func (dc *deviceConsumer) pull(ctx context.Context, n int, wait time.Duration) ([]pulled, error) {
	inbox := dc.nc.NewInbox()
	// Room for n deliveries and the closing status: the server sends no
	// more on one request, so the subscription never drops a message.
	ch := make(chan *nats.Msg, n+2)
	sub, err := dc.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d}`, n, wait.Nanoseconds())
	if err := dc.nc.PublishRequest(pullSubject(dc.stream, dc.name), inbox, req); err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait + pullExtra)
	defer timer.Stop()
	out := make([]pulled, 0, n)
	for len(out) < n {
		select {
		case m := <-ch:
			if isStatus, ends, err := pullStatus(m); isStatus {
				if !ends {
					continue // a heartbeat (none is asked for)
				}
				return out, err
			}
			d, err := parseDelivery(m)
			if err != nil {
				return out, err
			}
			out = append(out, d)
		case <-timer.C:
			return out, nil // unanswered past its expiry: what came is all
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// pullSubject is the request subject of a pull on stream's consumer.
func pullSubject(stream, consumer string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer
}

// ackBody acknowledges a delivery (and, AckPolicy all, those before it).
var ackBody = []byte("+ACK")

// ack acknowledges the delivery whose $JS.ACK subject is reply.
func (dc *deviceConsumer) ack(reply string) error {
	return dc.nc.Publish(reply, ackBody)
}

// pullStatus reports whether m is a status message rather than a
// delivery, whether it ends the pull, and with what error: none for an
// expired request (408) or one the server found nothing for (404), the
// jetstream package's error for the others; a heartbeat (100) does not end
// it.
func pullStatus(m *nats.Msg) (isStatus, ends bool, err error) {
	if len(m.Data) > 0 || len(m.Header) == 0 {
		return false, false, nil
	}
	code := m.Header.Get("Status")
	if code == "" {
		return false, false, nil
	}
	descr := m.Header.Get("Description")
	switch code {
	case "404", "408":
		return true, true, nil
	case "100":
		return true, false, nil
	case "503":
		return true, true, nats.ErrNoResponders
	case "400":
		return true, true, jetstream.ErrBadRequest
	case "409":
		d := strings.ToLower(descr)
		switch {
		case strings.Contains(d, "consumer deleted"):
			return true, true, jetstream.ErrConsumerDeleted
		case strings.Contains(d, "leadership change"):
			return true, true, jetstream.ErrConsumerLeadershipChanged
		case strings.Contains(d, "server shutdown"):
			return true, true, jetstream.ErrServerShutdown
		}
	}
	return true, true, fmt.Errorf("pull request: status %s %s", code, descr)
}

// parseDelivery reads a delivery's sequences from its $JS.ACK reply
// subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>,
// or on newer servers with <domain>.<account hash> after $JS.ACK and a
// token at the end (ADR-15; at least 11 tokens, the last one optional).
func parseDelivery(m *nats.Msg) (pulled, error) {
	rest, ok := strings.CutPrefix(m.Reply, "$JS.ACK.")
	if !ok {
		return pulled{}, fmt.Errorf("pull request: a delivery without an ack subject (reply %q)", m.Reply)
	}
	var tok [10]string
	k := 0
	for k < len(tok) {
		var more bool
		tok[k], rest, more = strings.Cut(rest, ".")
		k++
		if !more {
			break
		}
	}
	var t []string
	switch {
	case k == 7 && rest == "": // v1: stream consumer delivered sseq cseq ts pending
		t = tok[:7]
	case k >= 9: // v2: domain hash stream consumer delivered sseq cseq ts pending [token]
		t = tok[2:9]
	default:
		return pulled{}, fmt.Errorf("pull request: a malformed ack subject %q", m.Reply)
	}
	sseq, err1 := strconv.ParseUint(t[3], 10, 64)
	cseq, err2 := strconv.ParseUint(t[4], 10, 64)
	pending, err3 := strconv.ParseUint(t[6], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return pulled{}, fmt.Errorf("pull request: a malformed ack subject %q: %w", m.Reply, err)
	}
	return pulled{data: m.Data, subject: m.Subject, reply: m.Reply, streamSeq: sseq, consumerSeq: cseq, pending: pending}, nil
}
