package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/lease"
)

// The msg_id node id of a fanout is a lease in the leases bucket (key
// node.<id>), so that running fanouts have distinct node ids whatever
// their configuration says: an automatic one takes the lowest free id, an
// override (--node-id N) takes exactly N, and a second fanout with the same
// override waits for it and, if the holder is alive, refuses to start.
// A fanout issues ids only while its lease is valid (lease package: it
// stops Margin before another fanout can take the id); while it holds none
// (NATS cut off for longer than the lease's validity) its batches fail and
// are retried, and it takes a node id again (the same or another free one)
// when NATS is back. Each new generator starts above the largest msg_id
// stored and above every id this process issued, so a node id that changed
// hands never reissues an id (the msg_content primary key would refuse
// one anyway: the lease keeps that from happening, it does not stand alone).

// AutoNodeID asks for a node id leased automatically (Options.NodeID).
const AutoNodeID = -1

// NodeIDKey is a node id's key in the leases bucket.
func NodeIDKey(node int) string { return "node." + strconv.Itoa(node) }

// errNoNodeID fails a batch while the fanout holds no valid node id.
var errNoNodeID = errors.New("fanout: no valid msg_id node id lease (NATS unreachable?); the batch is retried")

// idSource issues msg_ids under the node id lease.
type idSource struct {
	f     *Fanout
	mu    sync.Mutex
	gen   *ids.Generator // nil while no node id is held
	lease *lease.Lease   // nil: a fixed node id without leases (Options.Leases nil)
	node  int
	last  int64 // the largest id issued by this process

	nodeGauge prometheus.Gauge
	losses    prometheus.Counter
}

func newIDSource(f *Fanout, reg prometheus.Registerer) *idSource {
	p := promauto.With(reg)
	s := &idSource{f: f,
		nodeGauge: p.NewGauge(prometheus.GaugeOpts{Name: "inboxd_fanout_node_id",
			Help: "The msg_id node id this fanout holds (leased in the inboxd_leases KV bucket); -1 while it holds none."}),
		losses: p.NewCounter(prometheus.CounterOpts{Name: "inboxd_fanout_node_id_lost_total",
			Help: "Times this fanout lost its node id lease (it issues no msg_id until it takes one again)."}),
	}
	s.nodeGauge.Set(-1)
	return s
}

// next returns a new msg_id, or errNoNodeID.
func (s *idSource) next() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil || (s.lease != nil && !s.lease.Valid()) {
		return 0, errNoNodeID
	}
	id := s.gen.Next()
	s.last = max(s.last, id)
	return id, nil
}

// Node returns the node id held (-1: none).
func (f *Fanout) Node() int {
	s := f.ids
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == nil || (s.lease != nil && !s.lease.Valid()) {
		return -1
	}
	return s.node
}

// use starts issuing ids as node under l (nil: no lease).
func (s *idSource) use(ctx context.Context, node int, l *lease.Lease) error {
	gen, err := ids.NewGenerator(node)
	if err != nil {
		return fmt.Errorf("fanout: node id %d: %w", node, err)
	}
	maxID, err := s.f.st.MaxMsgID(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gen.Observe(max(maxID, s.last))
	s.gen, s.lease, s.node = gen, l, node
	s.nodeGauge.Set(float64(node))
	return nil
}

// lastNode is the node id used last.
func (s *idSource) lastNode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// stop ends issuing ids under l (lost or released).
func (s *idSource) stop(l *lease.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == l {
		s.gen, s.lease = nil, nil
		s.nodeGauge.Set(-1)
	}
}

// TakeNodeID takes the fanout's node id before Run (Run does it otherwise):
// a start with an --node-id override that another running fanout holds
// fails here, after waiting up to a lease's TTL for a holder that died.
func (f *Fanout) TakeNodeID(ctx context.Context) error {
	if f.ids.gen != nil {
		return nil
	}
	if f.opts.Leases == nil {
		return f.ids.use(ctx, max(f.opts.NodeID, 0), nil)
	}
	wait := f.opts.LeaseTiming.TTL + f.opts.LeaseTiming.Renew
	if f.opts.NodeID == AutoNodeID {
		wait = 0 // another free id will do
	}
	deadline := time.Now().Add(wait)
	// The leases bucket's stream may not serve yet: on a cluster a stream
	// just created answers "no response from stream" until its leader is
	// elected (TestStreamsSetScalesReplicas saw it at a fresh cluster's
	// first start). Nothing was stored then, so taking the id again is safe.
	notServingUntil := time.Now().Add(leasesNotServingWait)
	for {
		l, node, holder, err := f.acquireNodeID(ctx)
		if err == nil {
			f.held = l
			f.log.Info("msg_id node id leased", zap.Int("node_id", node), zap.String("lease", NodeIDKey(node)))
			return f.ids.use(ctx, node, l)
		}
		if leasesNotServing(err) && time.Now().Before(notServingUntil) {
			f.log.Warn("the leases bucket does not answer yet; taking the msg_id node id again", zap.Error(err))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		if !errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			if errors.Is(err, lease.ErrHeld) && f.opts.NodeID != AutoNodeID {
				return fmt.Errorf("fanout: --node-id %d is held by the running fanout %q (lease %s in KV bucket %s): "+
					"two fanouts with the same --node-id must not both run; give each its own or leave --node-id unset (automatic): %w",
					f.opts.NodeID, holder, NodeIDKey(f.opts.NodeID), lease.Bucket, err)
			}
			return err
		}
		f.log.Warn("msg_id node id is leased by another fanout; waiting for its lease to run out",
			zap.Int("node_id", f.opts.NodeID), zap.String("holder", holder))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.opts.LeaseTiming.Renew):
		}
	}
}

// leasesNotServingWait bounds how long TakeNodeID retries a leases bucket
// whose stream does not answer yet.
const leasesNotServingWait = 15 * time.Second

// leasesNotServing reports an error of a request no stream server took:
// nothing was stored, so it can be made again.
func leasesNotServing(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// acquireNodeID takes the configured node id, or the lowest free one.
func (f *Fanout) acquireNodeID(ctx context.Context) (*lease.Lease, int, string, error) {
	try := func(node int) (*lease.Lease, string, error) {
		l, err := lease.Acquire(ctx, f.opts.Leases, NodeIDKey(node), f.opts.Holder, f.opts.LeaseTiming)
		if errors.Is(err, lease.ErrHeld) {
			h, _ := lease.Holder(ctx, f.opts.Leases, NodeIDKey(node))
			return nil, h, err
		}
		return l, "", err
	}
	if f.opts.NodeID != AutoNodeID {
		l, h, err := try(f.opts.NodeID)
		return l, f.opts.NodeID, h, err
	}
	for node := 0; node <= ids.MaxNode; node++ {
		l, _, err := try(node)
		if errors.Is(err, lease.ErrHeld) {
			continue
		}
		return l, node, "", err
	}
	return nil, 0, "", fmt.Errorf("fanout: every msg_id node id 0..%d is leased: %w", ids.MaxNode, lease.ErrHeld)
}

// keepNodeID renews the node id lease until ctx ends; after a loss it
// takes a node id again, retrying until ctx ends.
func (f *Fanout) keepNodeID(ctx context.Context) {
	if f.opts.Leases == nil {
		return
	}
	for {
		l := f.held
		err := l.Keep(ctx)
		f.ids.stop(l)
		if ctx.Err() != nil {
			return
		}
		f.ids.losses.Inc()
		f.log.Error("msg_id node id lease lost: no sends are stored until one is taken again", zap.String("lease", l.Key()), zap.Error(err))
		for {
			if err := f.takeNodeIDAgain(ctx, l); err == nil {
				break
			} else if ctx.Err() != nil {
				return
			} else {
				f.log.Warn("take a msg_id node id again", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.opts.LeaseTiming.Renew):
			}
		}
	}
}

// takeNodeIDAgain takes a node id after the loss of lost: the same one
// if nobody took it meanwhile, else the configured one (waiting for it as
// long as it takes) or any free one.
func (f *Fanout) takeNodeIDAgain(ctx context.Context, lost *lease.Lease) error {
	l, err := lease.Resume(ctx, lost)
	node := f.ids.lastNode()
	if err != nil {
		if l, node, _, err = f.acquireNodeID(ctx); err != nil {
			return err
		}
	}
	f.held = l
	f.log.Info("msg_id node id leased again", zap.Int("node_id", node))
	return f.ids.use(ctx, node, l)
}
