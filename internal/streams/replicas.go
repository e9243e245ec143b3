package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/nats-io/nats.go/jetstream"
)

// The replica count of SEND and every INBOX_<p> is an install setting
// (--replicas, env INBOXD_REPLICAS): 1 on a single NATS server, 3 on a
// NATS cluster. The streams' own num_replicas is the record, so the stock
// `nats stream edit --replicas` and ChangeReplicas (inboxctl streams set
// --replicas) change the same thing the syncer checks. A service start
// never changes it: a syncer configured with another count than the
// streams have refuses to start (ErrReplicasMismatch).
//
// The JSON definitions under jetstream/ keep num_replicas 1 as the
// template; the code sets the configured count. Consumers: the fanout and
// archiver consumers leave num_replicas unset and follow their stream
// (JetStream rescales them with it); the device consumers are R1 on
// purpose (docs/operations.md, "Device cursors on a cluster").
const (
	// DefaultReplicas is 1: a single NATS server.
	DefaultReplicas = 1
	// MaxReplicas is JetStream's own limit.
	MaxReplicas = 5
)

// ValidateReplicas checks a replica count: 1, 3 or 5. JetStream accepts
// 1..5, but an even count buys nothing: R2 needs both copies for a quorum
// (it survives no loss, as R1, and stalls when either server is down) and
// R4 survives one loss, as R3 does, with a fourth copy to write.
func ValidateReplicas(n int) error {
	if n < 1 || n > MaxReplicas || n%2 == 0 {
		return fmt.Errorf("streams: replicas %d: want 1 (one NATS server), 3 or 5 (a NATS cluster of at least that many servers)", n)
	}
	return nil
}

// ErrReplicasMismatch says streams of the installation have another
// replica count than the configured one.
var ErrReplicasMismatch = errors.New("streams: replica count differs from the installation's")

// installationStreams returns SEND and every INBOX partition of l.
func installationStreams(l Layout) []string {
	names := []string{SendStream}
	for p := 0; p < l.InboxPartitions; p++ {
		names = append(names, InboxStream(p))
	}
	return names
}

// checkReplicas refuses existing streams whose replica count is not want,
// naming all of them, the setting and the way to change it. Missing
// streams are not checked (EnsureStreams creates them with want).
func checkReplicas(ctx context.Context, js jetstream.JetStream, l Layout, want int) error {
	var differ []string
	var have []int
	for _, name := range installationStreams(l) {
		s, err := lookup(ctx, js, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("streams: look up %s: %w", name, err)
		}
		if r := replicasOf(s.CachedInfo().Config); r != want {
			differ = append(differ, name+" R"+strconv.Itoa(r))
			have = append(have, r)
		}
	}
	if len(differ) == 0 {
		return nil
	}
	return fmt.Errorf("%w: configured --replicas %d (env INBOXD_REPLICAS), but %s: a start never rescales the streams; "+
		"to change the installation run `inboxctl streams set --replicas %d` (or `nats stream edit --replicas %d` on each stream), "+
		"or start with --replicas %d (docs/operations.md, \"Replicas\")",
		ErrReplicasMismatch, want, summarize(differ), want, want, have[0])
}

// summarize keeps a list of offending streams readable: 17 streams at most
// by default, but an installation may have 1024 partitions.
func summarize(s []string) string {
	const show = 4
	if len(s) <= show {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:show], ", ") + " and " + strconv.Itoa(len(s)-show) + " more"
}

// replicasHint names the setting in a failed creation of a replicated
// stream: on a single server or a cluster of too few JetStream servers the
// server's own error ("replicas > 1 not supported in non-clustered mode",
// "insufficient resources") does not say where the count came from.
func replicasHint(n int, err error) string {
	var apiErr *jetstream.APIError
	if n == 1 || !errors.As(err, &apiErr) {
		return "" // a timeout, a lost connection: not the count's fault
	}
	return " with --replicas " + strconv.Itoa(n) + " (needs a NATS cluster of at least " + strconv.Itoa(n) + " JetStream servers)"
}

// replicasOf is a stream config's replica count (0 means 1).
func replicasOf(c jetstream.StreamConfig) int {
	return max(c.Replicas, 1)
}

// ChangeReplicas sets replica count n on SEND, every INBOX partition of
// the installation (their count is INBOX_0's record), PUSH and the leases bucket, and returns the
// streams it changed; running it again changes nothing. JetStream copies
// the data to the new peers in the background (`nats stream report` shows
// the replicas catching up); the streams' fanout and archiver consumers
// follow, the device consumers stay R1. Scaling up needs a cluster of at
// least n JetStream servers: JetStream refuses otherwise and the error
// says so. Syncers then start only with --replicas n.
func ChangeReplicas(ctx context.Context, js jetstream.JetStream, n int) (changed []string, err error) {
	if err := ValidateReplicas(n); err != nil {
		return nil, err
	}
	s, err := lookup(ctx, js, InboxStream(0))
	if err != nil {
		return nil, fmt.Errorf("streams: look up %s: %w", InboxStream(0), err)
	}
	parts, err := strconv.Atoi(s.CachedInfo().Config.Metadata[metaPartitions])
	if err != nil || parts < 1 {
		return nil, fmt.Errorf("streams: %s records no partition count (%s): not an inboxd installation", InboxStream(0), metaPartitions)
	}
	// The streams that exist only in some installations follow too: PUSH
	// (with --push) and the leases bucket (internal/lease), so that no
	// part of an R3 installation stays on one server.
	names := installationStreams(Layout{InboxPartitions: parts})
	required := len(names)
	for i, name := range append(names, optionalStreams...) {
		s, err := lookup(ctx, js, name)
		if i >= required && errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return changed, fmt.Errorf("streams: look up %s: %w", name, err)
		}
		c := s.CachedInfo().Config
		if replicasOf(c) == n {
			continue
		}
		c.Replicas = n
		if err := updateWithRetry(ctx, js, c); err != nil {
			return changed, fmt.Errorf("streams: set --replicas %d on %s: %w", n, name, err)
		}
		changed = append(changed, name)
	}
	return changed, nil
}

// optionalStreams are the streams ChangeReplicas scales when they exist:
// PUSH and the stream of the leases bucket (lease.Bucket).
var optionalStreams = []string{PushStream, "KV_inboxd_leases"}

// updateWithRetry updates a stream, retrying while the cluster is busy
// (see retryable).
func updateWithRetry(ctx context.Context, js jetstream.JetStream, c jetstream.StreamConfig) error {
	return withRetry(ctx, func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, c)
		return err
	})
}

// lookup is js.Stream retried like an update: right after a rescale a
// stream may be between leaders, and its STREAM.INFO request then goes
// unanswered (a CI run once waited out the command's 5 minutes on one).
// A stream that does not exist is ErrStreamNotFound at once.
func lookup(ctx context.Context, js jetstream.JetStream, name string) (s jetstream.Stream, err error) {
	err = withRetry(ctx, func(ctx context.Context) error {
		s, err = js.Stream(ctx, name)
		return err
	})
	return s, err
}

// tryTimeout bounds one JetStream API request of withRetry: an unanswered
// one (sent while its server stopped, or to a stream electing a leader) is
// sent again instead of waiting for all of the caller's deadline. An update
// still applying when it expires is applied again, which changes nothing.
var tryTimeout = 10 * time.Second // a var for a test

// withRetry calls f, each time with its own tryTimeout, until it succeeds,
// fails for good or ctx ends.
func withRetry(ctx context.Context, f func(ctx context.Context) error) error {
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 4*time.Second) {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout)
		err := f(tctx)
		cancel()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// retryable reports whether a stream create or update failed for a
// moment: a timeout or no responder (the meta leader moving peers, a
// burst of rescales), the cluster without a meta leader yet (10008), or a
// peer not yet seen by the meta leader at a cluster's start ("no suitable
// peers for placement, peer offline"). Not: too few servers for the
// count, a single server (non-clustered), a bad config.
func retryable(err error) bool {
	if natsconn.Unanswered(err) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == 10008 || strings.Contains(apiErr.Description, "peer offline")
}
