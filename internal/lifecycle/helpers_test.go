package lifecycle_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// stoppable is a node a test may close itself (a crash of its syncer) and
// that is closed at the end otherwise.
type stoppable struct {
	*node.Node
	once sync.Once
}

func (s *stoppable) close() { s.once.Do(s.Node.Close) }

func startNode(t testing.TB, cfg config.Config) *stoppable {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, config.RoleAllInOne, testenv.Logger(t))
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	s := &stoppable{Node: n}
	t.Cleanup(s.close)
	return s
}

func adminOf(t testing.TB, n *node.Node) *admin.Client {
	return &admin.Client{NC: testnode.Admin(t, n)}
}

func createConv(t testing.TB, n *node.Node, group bool, members ...int64) int64 {
	t.Helper()
	r, err := adminOf(t, n).CreateConv(ctxT(t, 10*time.Second), admin.CreateConvRequest{Members: members, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	return r.ConvID
}

// sendN sends count messages from uid to conv and returns their msg_ids.
func sendN(t testing.TB, n *node.Node, uid, conv int64, count int, prefix string) []int64 {
	t.Helper()
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, uid, "sender-"+prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t, 2*time.Minute)
	var pending []*client.PendingSend
	for i := 0; i < count; i++ {
		pending = append(pending, c.SendAsync(conv, prefix+"-"+strconv.Itoa(i), prefix+" message "+strconv.Itoa(i)))
	}
	ids := make([]int64, 0, count)
	for _, p := range pending {
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MsgID)
	}
	return ids
}

// device stores what its client hands over.
type device struct {
	t    testing.TB
	c    *client.Client
	mu   sync.Mutex
	got  []client.Message
	cond chan struct{}
}

func connectDevice(t testing.TB, n *node.Node, uid int64, name string) *device {
	t.Helper()
	d := &device{t: t, cond: make(chan struct{}, 1)}
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{
		URL: n.Gateway.WSURL(), Token: testenv.Token(t, uid, name), Handler: d.handle,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("connect %d/%s: %v", uid, name, err)
	}
	d.c = c
	t.Cleanup(func() { c.Close() })
	return d
}

func (d *device) handle(m client.Message) error {
	d.mu.Lock()
	d.got = append(d.got, m)
	d.mu.Unlock()
	select {
	case d.cond <- struct{}{}:
	default:
	}
	return nil
}

func (d *device) messages() []client.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]client.Message(nil), d.got...)
}

// waitFor waits until the device holds n messages.
func (d *device) waitFor(n int, within time.Duration) []client.Message {
	d.t.Helper()
	deadline := time.After(within)
	for len(d.messages()) < n {
		select {
		case <-d.cond:
		case <-deadline:
			d.t.Fatalf("device has %d of %d messages after %s", len(d.messages()), n, within)
		}
	}
	return d.messages()
}

func count(t testing.TB, n *node.Node, sql string, args ...any) int {
	t.Helper()
	var c int
	if err := n.Store.Pool.QueryRow(context.Background(), sql, args...).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDone waits until uid's deletion is done and returns it.
func waitDone(t testing.TB, n *node.Node, uid int64, within time.Duration) store.UserDeletion {
	t.Helper()
	ac := adminOf(t, n)
	var d store.UserDeletion
	waitFor(t, within, "deletion done", func() bool {
		var err error
		d, err = ac.Deletion(ctxT(t, 10*time.Second), uid)
		if err != nil {
			t.Fatal(err)
		}
		return d.State == store.DeletionDone
	})
	return d
}
