package streams_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

func TestValidateReplicas(t *testing.T) {
	for n, ok := range map[int]bool{-1: false, 0: false, 1: true, 2: false, 3: true, 4: false, 5: true, 6: false} {
		if err := streams.ValidateReplicas(n); (err == nil) != ok {
			t.Errorf("ValidateReplicas(%d) = %v, want ok %v", n, err, ok)
		}
	}
}

// replicasOf returns the replica count of every stream of l, by name.
func replicasOf(t *testing.T, js jetstream.JetStream, l streams.Layout) map[string]int {
	t.Helper()
	out := map[string]int{}
	names := []string{streams.SendStream}
	for p := 0; p < l.InboxPartitions; p++ {
		names = append(names, streams.InboxStream(p))
	}
	for _, name := range names {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = max(s.CachedInfo().Config.Replicas, 1)
	}
	return out
}

func allEqual(m map[string]int, n int) bool {
	for _, v := range m {
		if v != n {
			return false
		}
	}
	return true
}

// On a real 3-node cluster: a start configured with another replica count
// than the streams have is refused, naming the setting, the streams and the
// commands, and changes nothing; a `nats stream edit` of one stream is
// named as such; ChangeReplicas (inboxctl streams set --replicas) scales
// every stream R1 -> R3 (the fanout consumers follow, a device consumer
// stays R1), after which the data survives the loss of the stream leader;
// and it scales back R3 -> R1.
func TestReplicasMismatchRefusedUntilChanged(t *testing.T) {
	c := testenv.StartCluster(t, 3)
	js, err := jetstream.New(c.Connect(natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := streams.Layout{InboxPartitions: 3, SendPartitions: 2}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.EnsureFanoutConsumers(ctx, js, l); err != nil {
		t.Fatal(err)
	}
	dc, err := streams.DeviceConsumerConfig(0, 7, "phone", 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, streams.InboxStream(0), dc); err != nil {
		t.Fatal(err)
	}

	err = streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 3)
	for _, want := range []string{"--replicas 3", "INBOXD_REPLICAS", "SEND R1", "INBOX_2 R1", "inboxctl streams set --replicas 3", "nats stream edit --replicas 3", "start with --replicas 1"} {
		if !errors.Is(err, streams.ErrReplicasMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("start with --replicas 3 on R1 streams: %v; want ErrReplicasMismatch naming %q", err, want)
		}
	}
	if r := replicasOf(t, js, l); !allEqual(r, 1) {
		t.Fatalf("replicas after a refused start: %v", r)
	}

	// The stock way, one stream: `nats stream edit SEND --replicas 3`.
	s, err := js.Stream(ctx, streams.SendStream)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.Replicas = 3
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	err = streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 3)
	if !errors.Is(err, streams.ErrReplicasMismatch) || strings.Contains(err.Error(), "SEND") || !strings.Contains(err.Error(), "INBOX_0 R1, INBOX_1 R1, INBOX_2 R1") {
		t.Fatalf("start with --replicas 3 after SEND alone was edited: %v", err)
	}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 1); !errors.Is(err, streams.ErrReplicasMismatch) || !strings.Contains(err.Error(), "SEND R3") {
		t.Fatalf("start with --replicas 1 after SEND was edited to R3: %v", err)
	}

	changed, err := streams.ChangeReplicas(ctx, js, 3)
	if err != nil || !slices.Equal(changed, []string{"INBOX_0", "INBOX_1", "INBOX_2"}) {
		t.Fatalf("ChangeReplicas(3) = %v, %v; want the three INBOX streams (SEND was R3 already)", changed, err)
	}
	if again, err := streams.ChangeReplicas(ctx, js, 3); err != nil || len(again) != 0 {
		t.Fatalf("ChangeReplicas(3) again = %v, %v; want nothing changed", again, err)
	}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 3); err != nil {
		t.Fatalf("start with --replicas 3 after the change: %v", err)
	}
	if _, err := streams.EnsureFanoutConsumers(ctx, js, l); err != nil {
		t.Fatal(err)
	}
	if r := replicasOf(t, js, l); !allEqual(r, 3) {
		t.Fatalf("replicas after the change: %v", r)
	}
	waitFor(t, "every stream and fanout consumer with two current followers", func(ctx context.Context) error {
		for name := range replicasOf(t, js, l) {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return err
			}
			if err := current(s.CachedInfo().Cluster, 2); err != nil {
				return errors.New(name + ": " + err.Error())
			}
		}
		for p := 0; p < l.SendPartitions; p++ {
			ci, err := js.Consumer(ctx, streams.SendStream, streams.FanoutConsumer(p))
			if err != nil {
				return err
			}
			if err := current(ci.CachedInfo().Cluster, 2); err != nil {
				return errors.New(streams.FanoutConsumer(p) + ": " + err.Error())
			}
		}
		return nil
	})
	dci, err := js.Consumer(ctx, streams.InboxStream(0), dc.Durable)
	if err != nil {
		t.Fatal(err)
	}
	if n := dci.CachedInfo().Config.Replicas; n != 1 {
		t.Fatalf("device consumer has %d replicas after the rescale, want 1 (docs/operations.md, Device cursors on a cluster)", n)
	}

	// R3 is what it says: an entry survives the loss of its stream's leader.
	ack, err := js.Publish(ctx, streams.InboxSubject(1, 42), []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	leader := c.WaitStreamLeader(streams.InboxStream(1))
	c.Stop(leader)
	waitFor(t, "INBOX_1 to serve the entry after its leader stopped", func(ctx context.Context) error {
		s, err := js.Stream(ctx, streams.InboxStream(1))
		if err != nil {
			return err
		}
		m, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			return err
		}
		if string(m.Data) != "kept" {
			return errors.New("got " + string(m.Data))
		}
		return nil
	})
	c.Restart(leader)

	back, err := streams.ChangeReplicas(ctx, js, 1)
	if err != nil || len(back) != 1+l.InboxPartitions {
		t.Fatalf("ChangeReplicas(1) = %v, %v; want every stream", back, err)
	}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, 1); err != nil {
		t.Fatalf("start with --replicas 1 after scaling back: %v", err)
	}
	if r := replicasOf(t, js, l); !allEqual(r, 1) {
		t.Fatalf("replicas after scaling back: %v", r)
	}
}

// A single NATS server cannot hold R3 streams: the error names the setting.
func TestReplicasNeedACluster(t *testing.T) {
	js := testJS(t)
	err := streams.EnsureStreams(context.Background(), js, streams.Layout{InboxPartitions: 1, SendPartitions: 1}, streams.DefaultHotWindow, 3)
	if err == nil || !strings.Contains(err.Error(), "--replicas 3") || !strings.Contains(err.Error(), "NATS cluster") {
		t.Fatalf("R3 on one server: %v; want an error naming --replicas and the cluster", err)
	}
	if err := streams.EnsureStreams(context.Background(), js, streams.Layout{InboxPartitions: 1, SendPartitions: 1}, streams.DefaultHotWindow, 2); err == nil || !strings.Contains(err.Error(), "replicas 2") {
		t.Fatalf("R2: %v; want refused", err)
	}
}

// current checks that a clustered object has want replicas besides its
// leader, all current.
func current(ci *jetstream.ClusterInfo, want int) error {
	if ci == nil || ci.Leader == "" {
		return errors.New("no leader")
	}
	n := 0
	for _, r := range ci.Replicas {
		if r.Current {
			n++
		}
	}
	if n != want {
		return errors.New("current followers " + strings.Repeat("+", n))
	}
	return nil
}

// waitFor polls fn until it returns nil, failing with its last error after 30s.
//
// Each try has its own 5 s context: a JetStream API request sent while the
// connection moves to another server (the test just stopped one) may never
// be answered, and under the test's own context it would wait for all of
// what is left of it (a CI run once spent its whole 3 minutes there).
func waitFor(t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
