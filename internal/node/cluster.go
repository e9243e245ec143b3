package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/natsconn"
)

// Cluster roles (docs/operations.md, "Cluster roles"). Every role may run
// on every node of an installation at once:
//
//   - gateway: stateless; a device's consumer is pinned to the gateway it
//     is connected to, a second login anywhere replaces the first (the
//     kick subject), live entries reach every gateway of the user.
//   - fanout: SEND partitions are pinned consumers (one fanout processes a
//     partition at a time; failover after the consumer's PinnedTTL); each
//     running fanout leases its own msg_id node id (fanout/nodeid.go).
//   - syncer: the archiver's partitions are pinned consumers too; stream
//     and bucket creation is idempotent (every syncer does it at start);
//     retention, housekeeping and user deletions take Postgres advisory
//     locks (one runs a round or a user at a time); the trimmer and the
//     early cleanup run on the holder of the syncer.leader lease
//     (singletonJobs), which fails over when it is lost.

// leaderKey is the lease of the syncer's singleton jobs.
const leaderKey = "syncer.leader"

// holderName names this process in its leases: server name (or host)
// and pid, for `nats kv get inboxd_leases <key>`.
func holderName(cfg config.Config) string {
	name := cfg.NodeName
	if name == "" {
		name, _ = os.Hostname()
	}
	return name + ":" + strconv.Itoa(os.Getpid())
}

// ensureLeases creates the leases bucket (the syncer, at start) with the
// streams' replica count.
func ensureLeases(ctx context.Context, js jetstream.JetStream, replicas int, log *zap.Logger) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retryCluster(ctx, log, "create the leases bucket "+lease.Bucket, replicas, func(ctx context.Context) error {
		var err error
		kv, err = lease.EnsureBucket(ctx, js, replicas, lease.DefaultTiming)
		return err
	})
	return kv, err
}

// waitLeases waits for the leases bucket (a fanout alone: the syncer
// creates it), logging now and then, until ctx ends.
func waitLeases(ctx context.Context, js jetstream.JetStream, log *zap.Logger) (jetstream.KeyValue, error) {
	logged := time.Time{}
	for {
		kv, err := js.KeyValue(ctx, lease.Bucket)
		if err == nil {
			return kv, nil
		}
		if time.Since(logged) > 10*time.Second {
			log.Warn("waiting for the leases bucket: a syncer creates it", zap.String("bucket", lease.Bucket), zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("KV bucket %s (a syncer creates it): %w (gave up: %v)", lease.Bucket, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// retryCluster runs f until it succeeds, an error that waiting does not
// mend, or ctx ends. A clustered JetStream answers "insufficient
// resources" or "no suitable peers" to an R3 create until three servers
// have joined, "temporarily unavailable" or nothing at all while it has no
// meta leader: a node of a cluster that starts before its peers waits for
// them instead of failing.
func retryCluster(ctx context.Context, log *zap.Logger, what string, replicas int, f func(context.Context) error) error {
	delay, logged, start := 250*time.Millisecond, time.Time{}, time.Now()
	for {
		// Short attempts: the meta leader answers nothing to a request
		// that races another server's create of the same stream (every
		// syncer of a cluster starting at once), and a request sent
		// before there is a meta leader is lost; what an attempt did
		// create stays, the next one goes on from there.
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := f(actx)
		cancel()
		if err == nil || !clusterForming(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%s: %w (gave up after %s: %v)", what, err, time.Since(start).Round(time.Second), ctx.Err())
			}
			return err
		}
		if time.Since(logged) > 5*time.Second {
			log.Warn("waiting for the NATS cluster: JetStream cannot place the data yet (fewer servers than --replicas have joined, or no meta leader); retrying",
				zap.String("what", what), zap.Int("replicas", replicas), zap.Duration("waited", time.Since(start).Round(time.Second)), zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// clusterForming reports whether err is what a forming JetStream cluster
// answers (see retryCluster).
func clusterForming(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10023, // insufficient resources
			10005, // no suitable peers for placement
			10008, // JetStream system temporarily unavailable
			10009: // JetStream cluster can not handle request
			return true
		}
		return false
	}
	return natsconn.Unanswered(err) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// singletonJobs runs jobs on one syncer of the installation at a time:
// on the holder of the syncer.leader lease, failing over to another syncer
// when the holder dies (the lease's TTL) or is cut off (its validity).
// Each job's context ends when the lease is lost.
func (n *Node) singletonJobs(run context.Context, kv jetstream.KeyValue, holder string, jobs map[string]func(context.Context) error) {
	n.runLoop(run, "syncer leader", func(ctx context.Context) error {
		return lease.Hold(ctx, kv, leaderKey, holder, lease.DefaultTiming, n.log.Named("leader"), func(ctx context.Context) error {
			done := make(chan error, len(jobs))
			for what, job := range jobs {
				go func() {
					err := job(ctx)
					if err != nil && ctx.Err() == nil {
						n.log.Error(what+" stopped", zap.Error(err))
					}
					done <- err
				}()
			}
			var first error
			for range jobs {
				if err := <-done; first == nil && ctx.Err() == nil {
					first = err
				}
			}
			return first
		})
	})
}

// openLeases opens the leases bucket: a syncer creates it (with the
// streams' replicas), a fanout alone waits for it.
func (n *Node) openLeases(ctx context.Context, cfg config.Config, roles config.Role, js jetstream.JetStream) error {
	var err error
	switch {
	case roles&config.RoleSyncer != 0:
		n.leases, err = ensureLeases(ctx, js, cfg.Replicas, n.log)
	case roles&config.RoleFanout != 0:
		n.leases, err = waitLeases(ctx, js, n.log)
	}
	return err
}

// clusterTLS is the routes' mutual TLS (--cluster-tls-cert, -key, -ca),
// nil when none is set.
func clusterTLS(cfg config.Config) (*tls.Config, error) {
	set := 0
	for _, v := range []string{cfg.ClusterTLSCert, cfg.ClusterTLSKey, cfg.ClusterTLSCA} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return nil, nil
	case set < 3:
		return nil, fmt.Errorf("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together (mutual TLS on the routes): set all three or none")
	case cfg.ClusterListen == "":
		return nil, fmt.Errorf("--cluster-tls-cert: the routes' TLS needs --cluster-listen")
	}
	c, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.ClusterTLSCert, KeyFile: cfg.ClusterTLSKey, CaFile: cfg.ClusterTLSCA, Verify: true})
	if err != nil {
		return nil, fmt.Errorf("--cluster-tls-cert/--cluster-tls-key/--cluster-tls-ca: %w", err)
	}
	// A route server is the client of its peers too: the CA verifies
	// both ends (as nats-server's cluster { tls } does).
	c.RootCAs = c.ClientCAs
	return c, nil
}
