// Package streams turns the JSON definitions under jetstream/ into the
// streams and consumers of an installation and creates or updates them.
package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	defs "github.com/inboxd/inboxd/jetstream"
)

// Names and subjects. A user's inbox is the literal subject inbox.<p>.<uid>
// in stream INBOX_<p>; a send is send.<p>.<conv_id> in stream SEND, read by
// the durable consumer fanout_<p>.
const (
	SendStream        = "SEND"
	InboxStreamPrefix = "INBOX_"
	FanoutGroup       = "fanout"

	// metaPartitions records, on every INBOX stream, the partition count the
	// installation was created with; a service configured differently refuses
	// to start instead of writing users into the wrong partitions.
	metaPartitions     = "inboxd_partitions"
	metaSendPartitions = "inboxd_send_partitions"
)

// Layout is the partitioning of an installation. It is fixed at install.
type Layout struct {
	InboxPartitions int // N: INBOX_0 .. INBOX_<N-1>
	SendPartitions  int // S: fanout_0 .. fanout_<S-1>
}

// DefaultLayout is 16 inbox and 16 send partitions.
var DefaultLayout = Layout{InboxPartitions: 16, SendPartitions: 16}

// Validate checks the partition counts.
func (l Layout) Validate() error {
	if l.InboxPartitions < 1 || l.InboxPartitions > 1024 {
		return fmt.Errorf("streams: inbox partitions %d out of range 1..1024", l.InboxPartitions)
	}
	if l.SendPartitions < 1 || l.SendPartitions > 1024 {
		return fmt.Errorf("streams: send partitions %d out of range 1..1024", l.SendPartitions)
	}
	return nil
}

// InboxStream returns the stream name of inbox partition p.
func InboxStream(p int) string { return InboxStreamPrefix + strconv.Itoa(p) }

// InboxSubject returns the subject of uid's inbox in partition p.
func InboxSubject(p int, uid int64) string {
	return "inbox." + strconv.Itoa(p) + "." + strconv.FormatInt(uid, 10)
}

// SendSubject returns the subject of a send to conv in send partition p.
func SendSubject(p int, conv int64) string {
	return "send." + strconv.Itoa(p) + "." + strconv.FormatInt(conv, 10)
}

// FanoutConsumer returns the durable name of send partition p's consumer.
func FanoutConsumer(p int) string { return "fanout_" + strconv.Itoa(p) }

func decode(path string, v any) error {
	b, err := defs.FS.ReadFile(path)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("streams: %s: %w", path, err)
	}
	return nil
}

// SendStreamConfig returns the SEND stream as defined in jetstream/streams/SEND.json.
func SendStreamConfig() (jetstream.StreamConfig, error) {
	var c jetstream.StreamConfig
	err := decode("streams/SEND.json", &c)
	return c, err
}

// InboxStreamConfig returns INBOX_<p>, derived from jetstream/streams/INBOX.json.
func InboxStreamConfig(l Layout, p int) (jetstream.StreamConfig, error) {
	var c jetstream.StreamConfig
	if err := decode("streams/INBOX.json", &c); err != nil {
		return c, err
	}
	if c.Name != InboxStream(0) || len(c.Subjects) != 1 || c.Subjects[0] != "inbox.0.*" {
		return c, errors.New("streams: INBOX.json must define partition 0 (name INBOX_0, subject inbox.0.*)")
	}
	c.Name = InboxStream(p)
	c.Subjects = []string{"inbox." + strconv.Itoa(p) + ".*"}
	c.Description = strings.NewReplacer("partition 0", "partition "+strconv.Itoa(p), "inbox.0.", "inbox."+strconv.Itoa(p)+".").Replace(c.Description)
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	c.Metadata[metaPartitions] = strconv.Itoa(l.InboxPartitions)
	return c, nil
}

// FanoutConsumerConfig returns fanout_<p>, derived from
// jetstream/consumers/SEND_fanout.json.
func FanoutConsumerConfig(p int) (jetstream.ConsumerConfig, error) {
	var c jetstream.ConsumerConfig
	if err := decode("consumers/SEND_fanout.json", &c); err != nil {
		return c, err
	}
	if c.Durable != FanoutConsumer(0) || c.FilterSubject != "send.0.*" {
		return c, errors.New("streams: SEND_fanout.json must define partition 0 (durable fanout_0, filter send.0.*)")
	}
	c.Durable = FanoutConsumer(p)
	c.FilterSubject = "send." + strconv.Itoa(p) + ".*"
	c.Description = strings.NewReplacer("partition 0", "partition "+strconv.Itoa(p), "send.0.", "send."+strconv.Itoa(p)+".").Replace(c.Description)
	return c, nil
}

// EnsureStreams creates or updates SEND and every INBOX partition with
// replicas copies, recording hotWindow on the INBOX streams. It refuses to
// touch an installation created with a different inbox partition count,
// recording another hot window (ErrHotWindowMismatch: ChangeHotWindow
// changes it) or whose streams have another replica count
// (ErrReplicasMismatch: ChangeReplicas changes it), and it changes
// nothing before it checked every stream.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, l Layout, hotWindow time.Duration, replicas int) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := ValidateHotWindow(hotWindow); err != nil {
		return err
	}
	if err := ValidateReplicas(replicas); err != nil {
		return err
	}
	if err := checkLayout(ctx, js, l); err != nil {
		return err
	}
	if err := checkReplicas(ctx, js, l, replicas); err != nil {
		return err
	}
	for p := 0; p < l.InboxPartitions; p++ {
		s, err := lookup(ctx, js, InboxStream(p))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("streams: look up %s: %w", InboxStream(p), err)
		}
		if err := checkHotWindow(s.CachedInfo().Config, hotWindow); err != nil {
			return err
		}
	}
	send, err := SendStreamConfig()
	if err != nil {
		return err
	}
	if send.Metadata == nil {
		send.Metadata = map[string]string{}
	}
	send.Metadata[metaSendPartitions] = strconv.Itoa(l.SendPartitions)
	send.Replicas = replicas
	if err := ensureStream(ctx, js, send); err != nil {
		return fmt.Errorf("streams: ensure %s%s: %w", send.Name, replicasHint(replicas, err), err)
	}
	for p := 0; p < l.InboxPartitions; p++ {
		c, err := InboxStreamConfig(l, p)
		if err != nil {
			return err
		}
		SetHotWindow(&c, hotWindow)
		c.Replicas = replicas
		if err := ensureStream(ctx, js, c); err != nil {
			return fmt.Errorf("streams: ensure %s%s: %w", c.Name, replicasHint(replicas, err), err)
		}
	}
	return nil
}

// ensureStream creates or updates one stream, retrying while a cluster
// is not ready for it (a syncer started with the NATS nodes).
func ensureStream(ctx context.Context, js jetstream.JetStream, c jetstream.StreamConfig) error {
	return withRetry(ctx, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, c)
		return err
	})
}

// ErrStreamsMissing says a stream of the installation does not exist yet.
var ErrStreamsMissing = errors.New("streams: not created yet")

// CheckStreams reports whether SEND and every INBOX partition exist, with
// the installation's partition counts: what a service that may not create
// streams (the gateway, the fanout) checks before it starts. A missing
// stream is ErrStreamsMissing.
func CheckStreams(ctx context.Context, js jetstream.JetStream, l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := checkLayout(ctx, js, l); err != nil {
		return err
	}
	names := []string{SendStream}
	for p := 0; p < l.InboxPartitions; p++ {
		names = append(names, InboxStream(p))
	}
	for _, name := range names {
		_, err := lookup(ctx, js, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s", ErrStreamsMissing, name)
		}
		if err != nil {
			return fmt.Errorf("streams: look up %s: %w", name, err)
		}
	}
	return nil
}

func checkLayout(ctx context.Context, js jetstream.JetStream, l Layout) error {
	for _, c := range []struct {
		stream, key string
		want        int
	}{
		{InboxStream(0), metaPartitions, l.InboxPartitions},
		{SendStream, metaSendPartitions, l.SendPartitions},
	} {
		s, err := lookup(ctx, js, c.stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // a new installation
		}
		if err != nil {
			return fmt.Errorf("streams: look up %s: %w", c.stream, err)
		}
		have := s.CachedInfo().Config.Metadata[c.key]
		if have != "" && have != strconv.Itoa(c.want) {
			return fmt.Errorf("streams: stream %s was created with %s=%s, configured %d: partition counts are fixed at install", c.stream, c.key, have, c.want)
		}
	}
	return nil
}

// EnsureFanoutConsumers creates or updates fanout_<p> for every send partition.
// It returns the consumers that kept file storage (KeptStorage).
func EnsureFanoutConsumers(ctx context.Context, js jetstream.JetStream, l Layout) ([]string, error) {
	var kept []string
	for p := 0; p < l.SendPartitions; p++ {
		k, err := EnsureFanoutConsumer(ctx, js, p)
		if err != nil {
			return kept, err
		}
		if k {
			kept = append(kept, FanoutConsumer(p))
		}
	}
	return kept, nil
}

// EnsureFanoutConsumer creates or updates fanout_<p>; true: it kept the
// file storage of an older installation (EnsureConsumer).
func EnsureFanoutConsumer(ctx context.Context, js jetstream.JetStream, p int) (bool, error) {
	c, err := FanoutConsumerConfig(p)
	if err != nil {
		return false, err
	}
	_, kept, err := EnsureConsumer(ctx, js, SendStream, c)
	if err != nil {
		return false, fmt.Errorf("streams: ensure consumer %s: %w", c.Durable, err)
	}
	return kept, nil
}

// ConsumerLost says whether an error of a Consume means its consumer is
// gone (deleted, not found) or unreachable long enough that it may be (its
// heartbeats stopped): the fanout and the archiver then create it again.
func ConsumerLost(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrNoHeartbeat)
}

// EnsureConsumer creates or updates the durable consumer cfg on stream.
//
// The fanout's and the archiver's consumers keep their state in memory
// (mem_storage in their JSON files): their position is not theirs to keep.
// SEND is a work queue (what is not acknowledged stays in it), and the
// archiver starts from its Postgres mark; a lost consumer is created again.
// On file storage each of them rewrote a state file up to ten times a
// second while it moved, 8 % of the all-in-one's CPU under live traffic
// (commit ae2f691).
//
// JetStream cannot change a consumer's storage type. A consumer of an
// older installation on the other storage keeps it (kept is true: the
// caller says so in its log; docs/operations.md, "Upgrading: the consumers' storage", moves it
// with one nats consumer rm) rather than failing the start or being
// deleted by a service that may not delete (least privilege: only admin
// deletes a SEND consumer).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, kept bool, err error) {
	cons, err = js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err == nil {
		return cons, false, nil
	}
	have, lerr := js.Consumer(ctx, stream, cfg.Durable)
	if lerr != nil || have.CachedInfo().Config.MemoryStorage == cfg.MemoryStorage {
		return nil, false, err
	}
	cfg.MemoryStorage = have.CachedInfo().Config.MemoryStorage
	if cons, err = js.CreateOrUpdateConsumer(ctx, stream, cfg); err != nil {
		return nil, false, err
	}
	return cons, true, nil
}
