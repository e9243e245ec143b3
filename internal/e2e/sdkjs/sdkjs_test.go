package sdkjs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// TestSDKJS runs the TypeScript SDK's tests (sdk/js: `node --test`) against
// a real all-in-one inboxd started here: real NATS, real Postgres, the real
// gateway. It checks that the committed generated code matches
// wire/pb/inboxd.proto, builds the SDK, runs its unit tests, then its
// integration tests (sdk/js/test/integration) with the gateway's WebSocket
// URL and a control endpoint of this test in their environment:
//
//   - INBOXD_WS_URL: the gateway;
//   - INBOXD_WS_CUT_URL: the gateway through a TCP proxy whose connections
//     the tests cut (POST /cut): the server side of the socket vanishes
//     without a WebSocket close, as when a gateway dies;
//   - INBOXD_WS_NEWEST_URL: a second gateway of the node for which a device
//     is offline too long from 50 pending entries on (the newest page);
//   - INBOXD_CTL_URL: POST /token, /conv, /revoke, /cut, /archived and /go/{dial,send,sendmany,read,conv,close}:
//     tokens, conversations (admin API) and Go clients (the client package)
//     for the tests' Go side, e.g. the read sync between two SDK instances
//     of one user and a Go client.
//
// node_modules comes from `make sdk` (npm ci in sdk/js), which `make test`
// runs first; without it this test fails and says so.
func TestSDKJS(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "sdk", "js"))
	if err != nil {
		t.Fatal(err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the SDK's tests need Node.js 20 or later (node not on PATH): install it, then run `make sdk` or `make test`: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@bufbuild", "protobuf")); err != nil {
		t.Fatalf("sdk/js/node_modules is missing: run `make sdk` (npm ci in sdk/js) or `make test`, which does it first: %v", err)
	}
	run := func(name string, env []string, args ...string) {
		t.Helper()
		cmd := exec.Command(nodeBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("%s (%s):\n%s", name, time.Since(start).Round(time.Millisecond), out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	run("generated code matches the .proto", nil, "scripts/check-gen.mjs")
	run("build", nil, "scripts/build.mjs")

	n := testnode.AllInOne(t)
	wsHost := strings.TrimPrefix(n.Gateway.WSURL(), "ws://")
	cut := testenv.StartProxy(t, wsHost[:len(wsHost)-len(wsPath(n.Gateway.WSURL()))])
	// A second gateway on the same node whose devices are offline too long
	// from 50 pending entries on (the default is 5,000): the newest page.
	newest := testnode.Gateway(t, n, gateway.Options{OfflineThreshold: 50})
	h := &sdkHarness{t: t, n: n, cut: cut, adm: &admin.Client{NC: testnode.Admin(t, n)}, goClients: map[int]*goDevice{}}
	ctl := &http.Server{Handler: h.mux(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ctl.Serve(ln) }()
	t.Cleanup(func() { _ = ctl.Close(); h.closeAll() })

	args := []string{"--test", "--test-reporter=spec", "--test-concurrency=1", "--test-timeout=90000"}
	if pat := os.Getenv("INBOXD_SDKJS_RUN"); pat != "" {
		args = append(args, "--test-name-pattern="+pat) // a development aid: only the tests matching pat
	}
	run("unit tests", nil, append(args, "test/unit/")...)
	run("integration tests", []string{
		"INBOXD_WS_URL=" + n.Gateway.WSURL(),
		"INBOXD_WS_CUT_URL=ws://" + cut.Addr() + wsPath(n.Gateway.WSURL()),
		"INBOXD_WS_NEWEST_URL=" + newest.WSURL(),
		"INBOXD_CTL_URL=http://" + ln.Addr().String(),
	}, append(args, "test/integration/")...)
}

// wsPath is the path of a ws:// URL (/ws).
func wsPath(u string) string {
	for i := len("ws://"); i < len(u); i++ {
		if u[i] == '/' {
			return u[i:]
		}
	}
	return "/"
}

// sdkHarness is the control endpoint of the SDK's integration tests.
type sdkHarness struct {
	t   *testing.T
	n   *node.Node
	cut *testenv.Proxy
	adm *admin.Client

	mu        sync.Mutex
	goClients map[int]*goDevice
	nextID    int
}

// goDevice is a Go client of the tests' Go side, with what its handler got.
type goDevice struct {
	c    *client.Client
	mu   sync.Mutex
	msgs []client.Message
}

func (h *sdkHarness) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.goClients {
		d.c.Close()
	}
}

func (h *sdkHarness) device(id int) (*goDevice, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.goClients[id]
	if d == nil {
		return nil, fmt.Errorf("no Go client %d", id)
	}
	return d, nil
}

func (h *sdkHarness) mux() *http.ServeMux {
	m := http.NewServeMux()
	handle := func(path string, f func(ctx context.Context, req map[string]json.RawMessage) (any, error)) {
		m.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var req map[string]json.RawMessage
			b, _ := io.ReadAll(r.Body)
			if len(b) > 0 {
				if err := json.Unmarshal(b, &req); err != nil {
					http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
					return
				}
			}
			ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
			defer cancel()
			resp, err := f(ctx, req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
		})
	}
	handle("/token", func(_ context.Context, req map[string]json.RawMessage) (any, error) {
		var uid, ttl int64
		var device string
		if err := fields(req, "uid", &uid, "device", &device); err != nil {
			return nil, err
		}
		_ = fields(req, "ttl_s", &ttl)
		if ttl <= 0 {
			ttl = 3600
		}
		tok, err := auth.NewSigner(testenv.Secret).Issue(uid, device, time.Duration(ttl)*time.Second)
		return map[string]string{"token": tok}, err
	})
	handle("/conv", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var members []int64
		var group bool
		if err := fields(req, "members", &members); err != nil {
			return nil, err
		}
		_ = fields(req, "group", &group)
		r, err := h.adm.CreateConv(ctx, admin.CreateConvRequest{Members: members, Group: group})
		return map[string]int64{"conv_id": r.ConvID}, err
	})
	handle("/revoke", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var uid int64
		var device string
		if err := fields(req, "uid", &uid, "device", &device); err != nil {
			return nil, err
		}
		return h.adm.Revoke(ctx, admin.RevokeRequest{UID: uid, Device: device})
	})
	// /archived waits until the archive holds at least entries of uid's
	// inbox below the archiver's mark: the newest page is read from the
	// archive up to its mark, and the archiver gathers entries for 200 ms
	// before it moves it (the message rows are there before, written by
	// the fanout).
	handle("/archived", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var uid, entries int64
		if err := fields(req, "uid", &uid, "entries", &entries); err != nil {
			return nil, err
		}
		p := ids.Partition(uid, testnode.Layout().InboxPartitions)
		for {
			var n int64
			if err := h.n.Store.Pool.QueryRow(ctx, `
				SELECT count(*) FROM inbox_archive
				WHERE uid = $1 AND seq <= coalesce((SELECT archived_seq FROM archive_progress WHERE partition = $2), 0)`, uid, p).Scan(&n); err != nil {
				return nil, err
			}
			if n >= entries {
				return map[string]int64{"archived": n}, nil
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("the archive holds %d of uid %d's entries, want %d: %w", n, uid, entries, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	handle("/cut", func(context.Context, map[string]json.RawMessage) (any, error) {
		return map[string]int{"cut": h.cut.Cut()}, nil
	})
	handle("/go/dial", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var uid int64
		var device string
		if err := fields(req, "uid", &uid, "device", &device); err != nil {
			return nil, err
		}
		d := &goDevice{}
		c, err := client.Dial(ctx, client.Options{
			URL: h.n.Gateway.WSURL(), Token: testenv.Token(h.t, uid, device),
			Handler: func(m client.Message) error {
				d.mu.Lock()
				d.msgs = append(d.msgs, m)
				d.mu.Unlock()
				return nil
			},
		})
		if err != nil {
			return nil, err
		}
		d.c = c
		h.mu.Lock()
		h.nextID++
		id := h.nextID
		h.goClients[id] = d
		h.mu.Unlock()
		return map[string]int{"id": id}, nil
	})
	handle("/go/send", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var id int
		var conv int64
		var cmid, text string
		if err := fields(req, "id", &id, "conv", &conv, "cmid", &cmid, "text", &text); err != nil {
			return nil, err
		}
		d, err := h.device(id)
		if err != nil {
			return nil, err
		}
		r, err := d.c.Send(ctx, conv, cmid, text)
		return map[string]string{"msg_id": strconv.FormatInt(r.MsgID, 10), "conv_seq": strconv.FormatInt(r.ConvSeq, 10)}, err
	})
	handle("/go/sendmany", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		// n sends of "<prefix><i>" (i from 1), in order; answers the last conv_seq.
		var id, count int
		var conv int64
		var prefix string
		if err := fields(req, "id", &id, "conv", &conv, "n", &count, "prefix", &prefix); err != nil {
			return nil, err
		}
		d, err := h.device(id)
		if err != nil {
			return nil, err
		}
		pend := make([]*client.PendingSend, count)
		for i := range pend {
			txt := prefix + strconv.Itoa(i+1)
			pend[i] = d.c.SendAsync(conv, txt, txt)
		}
		var last int64
		for _, p := range pend {
			r, err := p.Wait(ctx)
			if err != nil {
				return nil, err
			}
			last = max(last, r.ConvSeq)
		}
		return map[string]int64{"last_conv_seq": last}, nil
	})
	handle("/go/read", func(ctx context.Context, req map[string]json.RawMessage) (any, error) {
		var id int
		var conv, upTo int64
		if err := fields(req, "id", &id, "conv", &conv, "up_to", &upTo); err != nil {
			return nil, err
		}
		d, err := h.device(id)
		if err != nil {
			return nil, err
		}
		seq, err := d.c.Read(ctx, conv, upTo)
		return map[string]int64{"read_seq": seq}, err
	})
	handle("/go/conv", func(_ context.Context, req map[string]json.RawMessage) (any, error) {
		var id int
		var conv int64
		if err := fields(req, "id", &id, "conv", &conv); err != nil {
			return nil, err
		}
		d, err := h.device(id)
		if err != nil {
			return nil, err
		}
		cv := d.c.Conversations()[conv]
		d.mu.Lock()
		handled := 0
		for _, m := range d.msgs {
			if m.ConvID == conv {
				handled++
			}
		}
		d.mu.Unlock()
		return map[string]int64{"last_seq": cv.LastSeq, "read_seq": cv.ReadSeq, "unread": cv.Unread(),
			"peer_read": cv.PeerRead, "peer_delivered": cv.PeerDelivered, "handled": int64(handled)}, nil
	})
	handle("/go/close", func(_ context.Context, req map[string]json.RawMessage) (any, error) {
		var id int
		if err := fields(req, "id", &id); err != nil {
			return nil, err
		}
		d, err := h.device(id)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		delete(h.goClients, id)
		h.mu.Unlock()
		return map[string]bool{"closed": true}, d.c.Close()
	})
	return m
}

// fields decodes req's named fields: name, &dst pairs; each is required.
func fields(req map[string]json.RawMessage, pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i].(string)
		raw, ok := req[name]
		if !ok {
			return fmt.Errorf("field %q is required", name)
		}
		if err := json.Unmarshal(raw, pairs[i+1]); err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
	}
	return nil
}
