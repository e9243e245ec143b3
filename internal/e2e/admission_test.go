package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Login admission (internal/gateway/admission.go, docs/protocol.md "Login
// admission"): a node whose gateway admits one login a second, one at a
// time, so that refusals are certain.
func tinyLoginBudget(t *testing.T) *node.Node {
	t.Helper()
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.LoginConcurrency, cfg.LoginRate = 1, 1
	return testnode.StartNode(t, cfg, config.RoleAllInOne)
}

// A login over the gateway's budget is refused with a fatal UNAVAILABLE
// carrying retry_after_ms of at least 250 ms, and the client package does
// not dial again before that time: measured at a listener in front of the
// gateway, from the refusal frame passing it to the next connection.
func TestLoginOverBudgetGetsRetryHintAndClientWaits(t *testing.T) {
	n := tinyLoginBudget(t)
	p := startFrameProxy(t, n.Gateway.TCPAddr())
	var refusals atomic.Int32
	c := dialAdmitted(t, client.Options{URL: "tcp://" + p.Addr(), Token: testenv.Token(t, 1, "d"),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		OnError: func(err error) {
			var we *wire.Error
			if errors.As(err, &we) && we.Code == pb.ErrorCode_UNAVAILABLE {
				refusals.Add(1)
			}
		}})
	defer c.Close()

	// Cut the client's connection right after the rate bucket was
	// emptied: its reconnect is refused (the bucket refills in a second).
	// Again, should a stalled machine have let it back in.
	first := len(p.snapshot()) // the connections of the client package's own reconnects follow
	deadline := time.Now().Add(60 * time.Second)
	for refusals.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect of the client was refused")
		}
		drainLoginBucket(t, n)
		w := p.welcomed()
		p.Cut()
		waitUntil(t, 20*time.Second, "a reconnect", holds(func() bool { return refusals.Load() > 0 || p.welcomed() > w }))
	}

	// The client comes back after its hint: wait for a connection that
	// got its welcome after the refusals.
	waitUntil(t, 60*time.Second, "a welcome after the refusal", holds(p.welcomedAfterRefusal))
	conns := p.snapshot()
	checked := 0
	for i := first; i+1 < len(conns); i++ {
		pc := conns[i]
		e := pc.refusal
		if e == nil {
			continue
		}
		if e.GetCode() != pb.ErrorCode_UNAVAILABLE || !e.GetFatal() || e.GetRetryAfterMs() < 250 {
			t.Fatalf("refusal %+v: want a fatal UNAVAILABLE with retry_after_ms ≥ 250", e)
		}
		hint := time.Duration(e.GetRetryAfterMs()) * time.Millisecond
		next := conns[i+1].accepted
		if gap := next.Sub(pc.answered); gap < hint {
			t.Fatalf("the client dialled again %v after a refusal with retry_after_ms %d", gap, e.GetRetryAfterMs())
		}
		t.Logf("refused with retry_after_ms %d; dialled again after %v", e.GetRetryAfterMs(), next.Sub(pc.answered))
		checked++
	}
	if checked == 0 {
		t.Fatal("no refused connection of the client was followed by another")
	}
	if metric(t, n, "inboxd_gateway_logins_refused_total") == 0 {
		t.Fatal("inboxd_gateway_logins_refused_total stayed 0")
	}
}

// A connected device's live message from another connected device is
// delivered while the gateway refuses logins: live traffic and sends do
// not pass the login budget.
func TestLiveDeliveredWhileLoginsRefused(t *testing.T) {
	n := tinyLoginBudget(t)
	const alice, bob = 21, 22
	conv := createConv(t, n, false, alice, bob)
	got := make(chan client.Message, 16)
	recv := dialAdmitted(t, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, bob, "b"),
		Handler: func(m client.Message) error { got <- m; return nil }})
	defer recv.Close()
	snd := dialAdmitted(t, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, alice, "a")})
	defer snd.Close()

	// A storm of logins, refused but for one a second.
	var refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e, _ := rawHello(n.Gateway.TCPAddr(), testenv.Token(t, int64(100+w), "storm-"+strconv.Itoa(i)))
				if e != nil && e.GetCode() == pb.ErrorCode_UNAVAILABLE {
					refused.Add(1)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitUntil(t, 30*time.Second, "a refused login", holds(func() bool { return refused.Load() > 0 }))

	const msgs = 5
	before := refused.Load()
	ctx := ctxT(t, 60*time.Second)
	for i := range msgs {
		if _, err := snd.Send(ctx, conv, "live-"+strconv.Itoa(i), "live "+strconv.Itoa(i)); err != nil {
			t.Fatalf("send %d while logins are refused: %v", i, err)
		}
	}
	for i := range msgs {
		select {
		case m := <-got:
			if want := "live " + strconv.Itoa(i); m.Text != want {
				t.Fatalf("got %q, want %q", m.Text, want)
			}
		case <-ctx.Done():
			t.Fatalf("live message %d not delivered while logins were refused", i)
		}
	}
	if during := refused.Load() - before; during == 0 {
		t.Fatal("no login was refused while the live messages went through")
	} else {
		t.Logf("%d logins refused while %d live messages went through", during, msgs)
	}
}

// dialAdmitted dials with opts, coming back after the retry hint while
// the gateway refuses the login for its budget.
func dialAdmitted(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	for attempt := 0; ; attempt++ {
		c, err := client.Dial(ctxT(t, 20*time.Second), opts)
		if err == nil {
			return c
		}
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != pb.ErrorCode_UNAVAILABLE || attempt == 100 {
			t.Fatalf("dial: %v", err)
		}
		time.Sleep(time.Duration(we.RetryAfterMs) * time.Millisecond)
	}
}

// drainLoginBucket sends hellos until one is refused for the rate: the
// bucket is empty then.
func drainLoginBucket(t *testing.T, n *node.Node) {
	t.Helper()
	for i := 0; i < 100; i++ {
		e, err := rawHello(n.Gateway.TCPAddr(), testenv.Token(t, 99, "drain-"+strconv.Itoa(i)))
		if err == nil && e != nil && e.GetCode() == pb.ErrorCode_UNAVAILABLE {
			return
		}
	}
	t.Fatal("100 hellos in a row were admitted at a login rate of 1/s")
}

// rawHello logs in over raw TCP and returns the error the gateway
// answered with (nil for a welcome), then hangs up.
func rawHello(addr, token string) (*pb.Error, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	f, err := wire.AppendFrame(nil, &pb.Hello{Token: token})
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)); err != nil {
		return nil, err
	}
	frame, err := wire.ReadTCPFrame(bufio.NewReader(nc), nil, 1<<20)
	if err != nil {
		return nil, err
	}
	_, m, err := wire.Decode(frame)
	if err != nil {
		return nil, err
	}
	switch m := m.(type) {
	case *pb.Error:
		return m, nil
	case *pb.Welcome:
		return nil, nil
	}
	return nil, fmt.Errorf("first frame %T", m)
}

// holds is cond for waitUntil.
func holds(cond func() bool) func() (bool, string) {
	return func() (bool, string) { return cond(), "" }
}

// frameProxy forwards TCP connections to a gateway (testenv.Proxy) and
// notes, per connection, when it was accepted and when the gateway's
// first frame passed, and whether that frame was a welcome or an error.
type frameProxy struct {
	*testenv.Proxy
	mu    sync.Mutex
	conns []*proxiedConn
}

type proxiedConn struct {
	accepted, answered time.Time
	welcome            bool
	refusal            *pb.Error
}

func startFrameProxy(t *testing.T, target string) *frameProxy {
	t.Helper()
	p := &frameProxy{}
	p.Proxy = testenv.StartProxyFunc(t, target, p.back)
	return p
}

// back copies the gateway's bytes to the client, reading its first frame
// on the way.
func (p *frameProxy) back(accepted time.Time, client, server net.Conn) {
	pc := &proxiedConn{accepted: accepted}
	p.mu.Lock()
	p.conns = append(p.conns, pc)
	p.mu.Unlock()
	r := bufio.NewReader(server)
	frame, err := wire.ReadTCPFrame(r, nil, 1<<24)
	if err != nil {
		return
	}
	now := time.Now()
	_, m, _ := wire.Decode(frame)
	p.mu.Lock()
	pc.answered = now
	switch m := m.(type) {
	case *pb.Welcome:
		pc.welcome = true
	case *pb.Error:
		pc.refusal = m
	}
	p.mu.Unlock()
	if _, err := client.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
		return
	}
	_, _ = io.Copy(client, r)
}

// welcomed is how many connections got a welcome.
func (p *frameProxy) welcomed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pc := range p.conns {
		if pc.welcome {
			n++
		}
	}
	return n
}

// welcomedAfterRefusal: a connection got its welcome after one was refused.
func (p *frameProxy) welcomedAfterRefusal() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	refused := false
	for _, pc := range p.conns {
		refused = refused || pc.refusal != nil
		if refused && pc.welcome {
			return true
		}
	}
	return false
}

func (p *frameProxy) snapshot() []proxiedConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]proxiedConn, len(p.conns))
	for i, pc := range p.conns {
		out[i] = *pc
	}
	// In the order they were accepted (back runs on a goroutine each).
	slices.SortStableFunc(out, func(a, b proxiedConn) int { return a.accepted.Compare(b.accepted) })
	return out
}
