package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/push/bridge"
	"github.com/inboxd/inboxd/internal/streams"
)

// A bridge killed (SIGKILL) while its request to the relay is in flight
// loses nothing: the event was not acknowledged, so the restarted bridge
// gets it again after the consumer's ack_wait and delivers it. Delivery is
// at least once: the relay saw the event twice under one Idempotency-Key
// (attempt 1 cut short, attempt 2 accepted). Neither run prints the
// webhook secret.
func TestPushBridgeKilledMidDeliveryDeliversAfterRestart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pushbridge")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pushbridge").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	e := startPushEnv(t, time.Second, 0)
	// A short ack_wait (an operator's `nats consumer edit`), so that the
	// test does not wait the default minute for the redelivery.
	cc, err := streams.PushBridgeConsumerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cc.AckWait = 2 * time.Second
	if _, err := e.ajs.CreateOrUpdateConsumer(ctxT(t, 10*time.Second), streams.PushStream, cc); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan struct{})
	rl := newRelay(t, func(n int, r *http.Request) int {
		if n == 1 {
			close(inFlight)
			<-r.Context().Done() // hangs until the bridge is gone
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	env := append(os.Environ(), "INBOXD_NATS="+e.base.NATSURL, "INBOXD_WEBHOOK_URL="+rl.srv.URL,
		"INBOXD_WEBHOOK_SECRET="+testWebhookSecret, "INBOXD_HTTP=127.0.0.1:0", "INBOXD_LOG_LEVEL=debug",
		"INBOXD_RETRY_MIN=100ms", "INBOXD_RETRY_MAX=500ms", "INBOXD_DRAIN_DELAY=0s")
	var logs []*lockedBuffer
	start := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = env
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		logs = append(logs, out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := start()
	conv := e.conv(false, 1, 2)
	ids := e.send(1, conv, 1, "kill")
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatalf("the relay got no request; bridge output:\n%s", logs[0].String())
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	start()
	acc := rl.waitAccepted(t, 1, 30*time.Second)
	reqs, _ := rl.got()
	if acc[0].ev.MsgID != ids[0] || len(reqs) != 2 || reqs[0].ev.ID != acc[0].ev.ID ||
		reqs[0].header.Get(bridge.HeaderIdempotencyKey) != reqs[1].header.Get(bridge.HeaderIdempotencyKey) {
		t.Fatalf("relay got %d requests (%s, then %s), accepted the event of msg_id %d; want the one event twice under one key, of msg_id %d",
			len(reqs), reqs[0].ev.ID, acc[0].ev.ID, acc[0].ev.MsgID, ids[0])
	}
	if a := reqs[1].header.Get(bridge.HeaderAttempt); a != "2" {
		t.Fatalf("the delivery after the restart is attempt %q, want 2", a)
	}
	checkFor(t, 10*time.Second, func() error { return bridgeAcked(e, 1) })
	for i, l := range logs {
		if s := l.String(); strings.Contains(s, testWebhookSecret) {
			t.Fatalf("bridge run %d printed the webhook secret:\n%s", i+1, s)
		} else if !strings.Contains(s, "push bridge bound") {
			t.Fatalf("bridge run %d did not bind its consumer:\n%s", i+1, s)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The push bridge's NATS user may read its consumer of PUSH and ack, and
// nothing else: no inbox (no consumer, pull, direct get or subscription on
// INBOX), no send, no forged push event, no other consumer of PUSH. The
// syncer may publish push events and pull its push consumers; the gateway
// may do neither.
func TestPushBridgeUserHasLeastPrivilege(t *testing.T) {
	e := startPushEnv(t, time.Second, 0)
	url := e.base.NATSURL
	const pb, sy, gw = natsauth.PushBridge, natsauth.Syncer, natsauth.Gateway
	next := map[string]any{"batch": 1, "no_wait": true}
	pushCfg, err := streams.PushStreamConfig()
	if err != nil {
		t.Fatal(err)
	}
	calls := []natsCall{
		{pb, "its consumer's info", "req", "$JS.API.CONSUMER.INFO.PUSH.pushbridge", nil, true},
		{pb, "pull push events", "req", "$JS.API.CONSUMER.MSG.NEXT.PUSH.pushbridge", next, true},
		{pb, "ack a push event", "pub", "$JS.ACK.PUSH.pushbridge.1.1.1.0.0", []byte("+ACK"), true},
		{pb, "subscribe to its reply prefix", "sub", natsauth.InboxPrefix(pb) + ".x", nil, true},
		{pb, "pull an inbox (the archiver)", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.archiver", next, false},
		{pb, "pull an inbox (the pusher)", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.push", next, false},
		{pb, "create a consumer on an inbox", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.x.inbox.0.7", nil, false},
		{pb, "direct get of an inbox entry", "req", "$JS.API.DIRECT.GET.INBOX_0.inbox.0.7", nil, false},
		{pb, "get an inbox entry", "req", "$JS.API.STREAM.MSG.GET.INBOX_0", map[string]any{"seq": 1}, false},
		{pb, "subscribe to an inbox subject", "sub", "inbox.>", nil, false},
		{pb, "subscribe to a user's live subject", "sub", "inboxd.u.0.7.*", nil, false},
		{pb, "subscribe to every reply (_INBOX.>)", "sub", "_INBOX.>", nil, false},
		{pb, "publish a send", "req", "send.0.1", []byte("x"), false},
		{pb, "publish an inbox entry", "req", "inbox.0.7", []byte("x"), false},
		{pb, "forge a push event", "req", "push.7", []byte("{}"), false},
		{pb, "create another consumer of PUSH", "req", "$JS.API.CONSUMER.CREATE.PUSH.x", nil, false},
		{pb, "delete its consumer", "req", "$JS.API.CONSUMER.DELETE.PUSH.pushbridge", nil, false},
		{pb, "purge PUSH", "req", "$JS.API.STREAM.PURGE.PUSH", nil, false},
		{pb, "read PUSH beside its consumer", "req", "$JS.API.STREAM.MSG.GET.PUSH", map[string]any{"seq": 1}, false},
		{pb, "stream info", "req", "$JS.API.STREAM.INFO.INBOX_0", nil, false},
		{pb, "call the admin API", "req", "inboxd.admin.conv.create", nil, false},

		{sy, "publish a push event", "req", "push.7", []byte("{}"), true},
		{sy, "pull for the pusher", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.push", map[string]any{"batch": 1, "no_wait": true, "group": streams.PusherGroup}, true},
		{sy, "update PUSH", "req", "$JS.API.STREAM.UPDATE.PUSH", pushCfg, true},
		{sy, "pull push events", "req", "$JS.API.CONSUMER.MSG.NEXT.PUSH.pushbridge", next, false},
		{sy, "purge PUSH", "req", "$JS.API.STREAM.PURGE.PUSH", nil, false},
		{gw, "publish a push event", "req", "push.7", []byte("{}"), false},
		{gw, "pull for the pusher", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.push", next, false},
		{gw, "ack for the pusher", "pub", "$JS.ACK.INBOX_0.push.1.1.1.0.0", []byte("+ACK"), false},
		{gw, "take over the pusher", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.push.inbox.0.7", nil, false},
	}
	for _, c := range calls {
		t.Run(string(c.role)+": "+c.what, func(t *testing.T) {
			if err := tryCall(url, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
