package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Offline push (internal/push): the syncer publishes a push event on
// push.<uid> into the PUSH stream, and the push bridge (cmd/pushbridge)
// reads them from the durable consumer pushbridge. The syncer decides from
// the INBOX partitions, through the pinned consumer push of each.
const (
	PushStream = "PUSH"
	// PushBridgeConsumer is the bridge's durable consumer of PUSH.
	PushBridgeConsumer = "pushbridge"
	// PusherConsumer is the syncer's consumer on every INBOX partition,
	// PusherGroup its pinned priority group.
	PusherConsumer = "push"
	PusherGroup    = "push"
)

// PushSubject is the subject of uid's push events.
func PushSubject(uid int64) string { return "push." + strconv.FormatInt(uid, 10) }

// PushStreamConfig returns PUSH as defined in jetstream/streams/PUSH.json.
func PushStreamConfig() (jetstream.StreamConfig, error) {
	var c jetstream.StreamConfig
	if err := decode("streams/PUSH.json", &c); err != nil {
		return c, err
	}
	if c.Name != PushStream || len(c.Subjects) != 1 || c.Subjects[0] != "push.*" {
		return c, errors.New("streams: PUSH.json must define stream PUSH on push.*")
	}
	// Bounded whatever reads it: an installation without a bridge keeps a
	// day of events at most, and never more than max_bytes.
	if c.MaxAge <= 0 || c.MaxBytes <= 0 || c.Discard != jetstream.DiscardOld {
		return c, errors.New("streams: PUSH.json must bound the stream (max_age, max_bytes, discard old)")
	}
	return c, nil
}

// PushBridgeConsumerConfig returns the bridge's consumer, from
// jetstream/consumers/PUSH_pushbridge.json.
func PushBridgeConsumerConfig() (jetstream.ConsumerConfig, error) {
	var c jetstream.ConsumerConfig
	if err := decode("consumers/PUSH_pushbridge.json", &c); err != nil {
		return c, err
	}
	if c.Durable != PushBridgeConsumer {
		return c, fmt.Errorf("streams: PUSH_pushbridge.json must define durable %s", PushBridgeConsumer)
	}
	return c, nil
}

// PusherConsumerConfig returns the syncer's push consumer of an INBOX
// partition, from jetstream/consumers/INBOX_push.json, starting at start
// and with its ack_wait raised to at least hold. Push is not retroactive:
// the consumer starts when push was first turned on (the syncer keeps the
// start of an existing consumer), and by start time rather than "new" so
// that it can be reset to an earlier entry (a redelivery). The pusher
// holds an entry unacknowledged from its delivery until it decided
// (--push-after, then up to --push-collapse in a fold), and a redelivery
// meanwhile would only be skipped.
func PusherConsumerConfig(start time.Time, hold time.Duration) (jetstream.ConsumerConfig, error) {
	var c jetstream.ConsumerConfig
	if err := decode("consumers/INBOX_push.json", &c); err != nil {
		return c, err
	}
	if c.Durable != PusherConsumer || len(c.PriorityGroups) != 1 || c.PriorityGroups[0] != PusherGroup || c.DeliverPolicy != jetstream.DeliverByStartTimePolicy {
		return c, fmt.Errorf("streams: INBOX_push.json must define durable %s in priority group %s, delivering by start time", PusherConsumer, PusherGroup)
	}
	c.AckWait = max(c.AckWait, hold)
	c.OptStartTime = &start
	return c, nil
}

// EnsurePush creates or updates the PUSH stream and the bridge's consumer.
// A new PUSH stream gets replicas (--replicas); an existing one keeps its
// count, which `inboxctl streams set --replicas` changes with the others.
func EnsurePush(ctx context.Context, js jetstream.JetStream, replicas int) error {
	s, err := PushStreamConfig()
	if err != nil {
		return err
	}
	s.Replicas = replicas
	if have, err := lookup(ctx, js, PushStream); err == nil {
		s.Replicas = replicasOf(have.CachedInfo().Config)
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("streams: look up %s: %w", PushStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
		return fmt.Errorf("streams: ensure %s: %w", s.Name, err)
	}
	c, err := PushBridgeConsumerConfig()
	if err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, PushStream, c); err != nil {
		return fmt.Errorf("streams: ensure consumer %s on %s: %w", c.Durable, PushStream, err)
	}
	return nil
}
