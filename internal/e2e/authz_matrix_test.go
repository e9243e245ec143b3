package e2e

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire/pb"
)

// The authorization matrix: every way in that must be shut, each tried on a
// real connection to a real gateway, each refused with its documented
// answer, and none of them storing or delivering anything (storeState and
// the victim's witness are compared around every row).
func TestAuthorizationMatrix(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	keyFile := filepath.Join(t.TempDir(), "tokens.pub")
	if err := os.WriteFile(keyFile, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TokenEdKeyFile = keyFile // HS256 and EdDSA both: the confusion rows need a gateway holding both kinds of key
	n := testnode.StartNode(t, cfg, allRoles)

	const friend, victim, removed, intruder = 1, 2, 3, 66
	direct := createConv(t, n, false, friend, victim)
	group := createConv(t, n, true, friend, victim, removed)
	sendN(t, n, friend, direct, 3, "d")
	sendN(t, n, friend, group, 2, "g-before")
	ctx := ctxT(t, 60*time.Second)
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	if _, err := ac.RemoveMembers(ctx, admin.MembersRequest{ConvID: group, Members: []int64{removed}}); err != nil {
		t.Fatal(err)
	}
	sendN(t, n, friend, group, 2, "g-after") // conv_seq 3 and 4: after the removed member left at 2
	// The removed member read what it saw (so that a read of it again
	// changes nothing and its read_sync is a repeat).
	rm := dial(t, n, "tcp", removed, "r")
	if seq, err := rm.Read(ctx, group, 2); err != nil || seq != 2 {
		t.Fatalf("removed member's read up to where it left: %d, %v", seq, err)
	}
	rm.Close()
	edTok, _ := auth.NewEdSigner(priv).Issue(intruder, "ed", time.Minute)
	if c, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: edTok}); err != nil {
		t.Fatalf("a valid EdDSA token is refused: the gateway does not hold the Ed25519 key: %v", err)
	} else {
		c.Close()
	}
	v := connectWitness(t, n, victim, "v")
	v.waitFor(t, 7) // 3 direct + 4 group
	victimSeqs := v.seqs()
	w := newWatch(t, n, 0, []int64{friend, victim, removed, intruder}, "2/v")
	w.settle(t)

	hs := func(secret string, claims jwt.MapClaims) string { return signHS(t, []byte(secret), claims) }
	victimClaims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": strconv.Itoa(victim), "dev": "v", "aud": auth.Audience,
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	m := &matrix{n: n, ac: ac}
	refused := fatalErr(pb.ErrorCode_UNAUTHENTICATED)

	rows := []struct {
		name string
		on   []string // default: transports
		try  func(t *testing.T, tr string) error
	}{
		// Tokens: each claims the victim's identity (its uid and device), so
		// a token that got through would also replace the victim's session.
		{"forged signature", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs("not-the-secret", victimClaims(nil)), refused)
		}},
		{"forged signature: another user's valid signature under the victim's claims", nil, func(t *testing.T, tr string) error {
			own := strings.Split(testenv.Token(t, intruder, "v"), ".")
			forged := strings.Split(hs(testenv.Secret, victimClaims(nil)), ".")
			return m.login(t, tr, forged[0]+"."+forged[1]+"."+own[2], refused)
		}},
		{"token signed with the development secret", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs(auth.DevSecret, victimClaims(nil)), refused)
		}},
		{"expired token", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs(testenv.Secret, victimClaims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), refused)
		}},
		{"token without exp", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs(testenv.Secret, victimClaims(func(c jwt.MapClaims) { delete(c, "exp") })), refused)
		}},
		{"token for another audience", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs(testenv.Secret, victimClaims(func(c jwt.MapClaims) { c["aud"] = "another-service" })), refused)
		}},
		{"token without an audience", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, hs(testenv.Secret, victimClaims(func(c jwt.MapClaims) { delete(c, "aud") })), refused)
		}},
		{"alg none", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, unsigned(t, map[string]any{"alg": "none", "typ": "JWT"}, victimClaims(nil), ""), refused)
		}},
		{"alg none with the HS256 signature of its claims", nil, func(t *testing.T, tr string) error {
			sig := strings.Split(hs(testenv.Secret, victimClaims(nil)), ".")[2]
			return m.login(t, tr, unsigned(t, map[string]any{"alg": "none"}, victimClaims(nil), sig), refused)
		}},
		{"HS/EdDSA confusion: HS256 keyed with the Ed25519 public key (PEM)", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, signHS(t, pubPEM, victimClaims(nil)), refused)
		}},
		{"HS/EdDSA confusion: HS256 keyed with the Ed25519 public key (raw)", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, signHS(t, pub, victimClaims(nil)), refused)
		}},
		{"HS/EdDSA confusion: alg EdDSA over an HMAC signature", nil, func(t *testing.T, tr string) error {
			sig := strings.Split(hs(testenv.Secret, victimClaims(nil)), ".")[2]
			return m.login(t, tr, unsigned(t, map[string]any{"alg": "EdDSA", "typ": "JWT"}, victimClaims(nil), sig), refused)
		}},
		{"empty-key token", nil, func(t *testing.T, tr string) error {
			return m.login(t, tr, signHS(t, nil, victimClaims(nil)), refused)
		}},
		{"empty-key token, alg HS512", nil, func(t *testing.T, tr string) error {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS512, victimClaims(nil)).SignedString([]byte{})
			if err != nil {
				return err
			}
			return m.login(t, tr, tok, refused)
		}},
		{"token whose subject is no uid", nil, func(t *testing.T, tr string) error {
			for _, sub := range []string{"0", "-2", "2abc", ""} {
				if err := m.login(t, tr, hs(testenv.Secret, victimClaims(func(c jwt.MapClaims) { c["sub"] = sub })), refused); err != nil {
					return fmt.Errorf("sub %q: %w", sub, err)
				}
			}
			return nil
		}},

		// Another user's data.
		{"reading another user's inbox", nil, func(t *testing.T, tr string) error {
			c := dialWire(t, n, tr)
			wel := c.hello(intruder, "v") // the victim's device id, its own uid
			if wel.GetUid() != intruder || wel.GetPending() != 0 || len(wel.GetSummary().GetConvs()) != 0 {
				return fmt.Errorf("intruder's welcome %v", wel)
			}
			c.send(&pb.Ack{Seqs: victimSeqs})
			if err := c.expect(errFrame(pb.ErrorCode_INVALID_ARGUMENT)); err != nil {
				return fmt.Errorf("ack of the victim's seqs: %w", err)
			}
			c.send(&pb.SummaryRequest{RequestId: 9})
			if s, ok := c.reply().(*pb.Summary); !ok || len(s.GetConvs()) != 0 || s.GetPending() != 0 {
				return fmt.Errorf("intruder's summary %v", s)
			}
			return nil
		}},
		{"pulling a conversation one is not a member of", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, intruder)
			c.send(&pb.Pull{RequestId: 11, ConvId: direct})
			if err := c.expect(reqErr(pb.ErrorCode_NOT_MEMBER, 11)); err != nil {
				return fmt.Errorf("direct: %w", err)
			}
			c.send(&pb.Pull{RequestId: 12, ConvId: group, BeforeConvSeq: 3})
			return c.expect(reqErr(pb.ErrorCode_NOT_MEMBER, 12))
		}},
		{"read and read_count of a conversation one is not a member of", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, intruder)
			c.send(&pb.Read{RequestId: 13, ConvId: direct, UpToConvSeq: 3})
			if err := c.expect(reqErr(pb.ErrorCode_NOT_MEMBER, 13)); err != nil {
				return fmt.Errorf("read: %w", err)
			}
			c.send(&pb.ReadCount{RequestId: 14, ConvId: group, ConvSeq: 1})
			return c.expect(reqErr(pb.ErrorCode_NOT_MEMBER, 14))
		}},
		{"a removed member's read_count of a message after it left", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, removed)
			c.send(&pb.ReadCount{RequestId: 15, ConvId: group, ConvSeq: 3})
			return c.expect(reqErr(pb.ErrorCode_NOT_MEMBER, 15))
		}},
		{"a removed member's read counts after leaving: capped at where it left, not counted after it", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, removed)
			c.send(&pb.Read{RequestId: 16, ConvId: group, UpToConvSeq: 4})
			if r, ok := c.reply().(*pb.ReadResult); !ok || r.GetReadSeq() != 2 {
				return fmt.Errorf("removed member's read up to 4: got %v, want read_seq 2 (where it left)", r)
			}
			f := m.as(t, tr, friend)
			f.send(&pb.ReadCount{RequestId: 17, ConvId: group, ConvSeq: 3})
			if r, ok := f.reply().(*pb.ReadCountResult); !ok || r.GetMembers() != 1 || r.GetRead() != 0 {
				return fmt.Errorf("read_count of a message after the removal: got %v, want read 0 of 1 (the victim alone)", r)
			}
			return nil
		}},
		{"a removed member's pull ends where it left", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, removed)
			c.send(&pb.Pull{RequestId: 18, ConvId: group})
			r, ok := c.reply().(*pb.PullResult)
			if !ok || len(r.GetMessages()) != 2 || r.GetMessages()[1].GetConvSeq() != 2 || r.GetHasMore() {
				return fmt.Errorf("got %v, want conv_seq 1 and 2 only", r)
			}
			return nil
		}},
		{"sending to a conversation one is not in", nil, func(t *testing.T, tr string) error {
			c := m.as(t, tr, intruder)
			c.send(&pb.Send{ClientMsgId: "x-" + tr, ConvId: direct, Text: "let me in"})
			if err := c.expect(rejected(pb.ErrorCode_NOT_MEMBER)); err != nil {
				return fmt.Errorf("direct: %w", err)
			}
			c.send(&pb.Send{ClientMsgId: "y-" + tr, ConvId: 1 << 40, Text: "anyone?"})
			if err := c.expect(rejected(pb.ErrorCode_CONV_NOT_FOUND)); err != nil {
				return fmt.Errorf("no such conversation: %w", err)
			}
			r := m.as(t, tr, removed)
			r.send(&pb.Send{ClientMsgId: "z-" + tr, ConvId: group, Text: "still here?"})
			if err := r.expect(rejected(pb.ErrorCode_NOT_MEMBER)); err != nil {
				return fmt.Errorf("removed member: %w", err)
			}
			return nil
		}},

		// Sessions that must end.
		{"a revoked device", nil, func(t *testing.T, tr string) error {
			device := "rv-" + tr
			tok := testenv.Token(t, intruder, device) // issued before the revocation
			c := dialWire(t, n, tr)
			c.send(&pb.Hello{Token: tok})
			if _, ok := c.reply().(*pb.Welcome); !ok {
				return errors.New("no welcome before the revocation")
			}
			if err := m.revoke(intruder, device); err != nil {
				return err
			}
			if err := c.expect(fatalErr(pb.ErrorCode_REVOKED)); err != nil {
				return fmt.Errorf("open connection: %w", err)
			}
			return m.login(t, tr, tok, fatalErr(pb.ErrorCode_REVOKED))
		}},
		{"a token past exp on an open connection", nil, func(t *testing.T, tr string) error {
			tok, err := auth.NewSigner(testenv.Secret).Issue(intruder, "exp-"+tr, time.Second)
			if err != nil {
				return err
			}
			exp := time.Now().Add(time.Second)
			c := dialWire(t, n, tr)
			c.send(&pb.Hello{Token: tok})
			if _, ok := c.reply().(*pb.Welcome); !ok {
				return errors.New("no welcome for a token valid for another second")
			}
			// exp, the verifier's leeway (5 s) and a margin.
			c.wait = time.Until(exp) + 7*time.Second
			got, timedOut := c.replyOrTimeout()
			if timedOut {
				return fmt.Errorf("the connection is still open %s after its token's exp: no TOKEN_EXPIRED", (time.Since(exp)).Round(time.Second))
			}
			if e, ok := got.(*pb.Error); !ok || e.GetCode() != pb.ErrorCode_TOKEN_EXPIRED || !e.GetFatal() {
				return fmt.Errorf("got %T %v, want fatal TOKEN_EXPIRED", got, got)
			}
			if m := c.next(); m != nil {
				return fmt.Errorf("after TOKEN_EXPIRED the connection is still open: got %T %v", m, m)
			}
			return nil
		}},
	}
	for _, row := range rows {
		on := row.on
		if on == nil {
			on = transports
		}
		for _, tr := range on {
			t.Run(row.name+"/"+tr, func(t *testing.T) {
				before, seen := w.state(t), v.seen()
				if err := row.try(t, tr); err != nil {
					t.Error(err)
				}
				time.Sleep(50 * time.Millisecond) // anything the row set off lands
				w.unchanged(t, before)
				v.nothingSince(t, seen)
			})
		}
	}
}

// matrix holds what the rows of TestAuthorizationMatrix share.
type matrix struct {
	n  *node.Node
	ac *admin.Client
}

// login says hello with token and returns an error unless the answer is want.
func (m *matrix) login(t *testing.T, tr, token string, want outcome) error {
	c := dialWire(t, m.n, tr)
	c.send(&pb.Hello{Token: token})
	return c.expect(want)
}

// as is a connection logged in as uid (a device of the row's own).
func (m *matrix) as(t *testing.T, tr string, uid int64) *wireConn {
	c := dialWire(t, m.n, tr)
	c.hello(uid, "m-"+tr)
	return c
}

// revoke revokes uid's device through the admin API.
func (m *matrix) revoke(uid int64, device string) error {
	req, _ := json.Marshal(map[string]any{"uid": uid, "device": device})
	msg, err := m.ac.NC.Request(admin.SubjectUserRevoke, req, 5*time.Second)
	if err != nil {
		return fmt.Errorf("revoke %d/%s through the admin API (%s): %w", uid, device, admin.SubjectUserRevoke, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("revoke %d/%s: %s %s", uid, device, code, msg.Header.Get("Nats-Service-Error"))
	}
	return nil
}

// signHS signs claims with HMAC-SHA256 under key, whatever the key (an
// empty one included, which the jwt package will not sign with).
func signHS(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	u := unsigned(t, map[string]any{"alg": "HS256", "typ": "JWT"}, claims, "")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.TrimSuffix(u, ".")))
	return u + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// unsigned is header.claims.sig, each part as given.
func unsigned(t *testing.T, header map[string]any, claims jwt.MapClaims, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "." + sig
}

// storeState is what refused input must leave as it was: the messages,
// conversations, memberships and read positions in Postgres (outside the
// conversation a bystander writes to), the INBOX entries of each watched
// user, and the mirrored cursors of the watched users' devices.
type storeState struct {
	Messages, LastSeqs, Members, ReadSeqs int64
	Cursors                               int64
	Inbox                                 map[int64]uint64
}

// watch takes storeStates of a node.
type watch struct {
	n       *node.Node
	js      jetstream.JetStream
	skip    int64    // the bystander's conversation (0: none)
	uids    []int64  // whose inbox entries are counted
	devices []string // whose mirrored cursors are summed, as "uid/device"
}

func newWatch(t *testing.T, n *node.Node, skipConv int64, uids []int64, devices ...string) *watch {
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	return &watch{n: n, js: js, skip: skipConv, uids: uids, devices: devices}
}

func (w *watch) state(t *testing.T) storeState {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	var s storeState
	q := func(sql string, arg any, dst ...any) {
		if err := w.n.Store.Pool.QueryRow(ctx, sql, arg).Scan(dst...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	q(`SELECT count(*) FROM msg_content WHERE conv_id <> $1`, w.skip, &s.Messages)
	q(`SELECT coalesce(sum(last_seq), 0) FROM conversation WHERE conv_id <> $1`, w.skip, &s.LastSeqs)
	q(`SELECT count(*), coalesce(sum(read_seq), 0) FROM conv_member WHERE conv_id <> $1`, w.skip, &s.Members, &s.ReadSeqs)
	q(`SELECT coalesce(sum(ack_seq), 0) FROM device_cursor WHERE uid::text || '/' || device = ANY($1)`, w.devices, &s.Cursors)
	s.Inbox = map[int64]uint64{}
	layout := testnode.Layout()
	for _, uid := range w.uids {
		p := ids.Partition(uid, layout.InboxPartitions)
		st, err := w.js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			t.Fatal(err)
		}
		subj := streams.InboxSubject(p, uid)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		s.Inbox[uid] = info.State.Subjects[subj]
	}
	return s
}

// settle waits until the state stops changing (receipts and cursor mirror
// writes of the setup are asynchronous).
func (w *watch) settle(t *testing.T) {
	t.Helper()
	last := w.state(t)
	for quiet := time.Now(); time.Since(quiet) < 1500*time.Millisecond; {
		time.Sleep(250 * time.Millisecond)
		if s := w.state(t); fmt.Sprint(s) != fmt.Sprint(last) {
			last, quiet = s, time.Now()
		}
	}
}

// unchanged fails the test if the state differs from before (the caller
// gave anything a row set off a moment to land).
func (w *watch) unchanged(t *testing.T, before storeState) {
	t.Helper()
	if after := w.state(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("stored data changed: before %+v, after %+v", before, after)
	}
}

// witness is a real client of a user that must receive nothing from a
// refused input: it records every message, event and error it gets.
type witness struct {
	c      *client.Client
	mu     sync.Mutex
	msgs   []client.Message
	events []client.Event
	errs   []error
	more   chan struct{}
}

func connectWitness(t *testing.T, n *node.Node, uid int64, device string) *witness {
	t.Helper()
	w := &witness{more: make(chan struct{}, 1)}
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{
		URL: n.Gateway.WSURL(), Token: testenv.Token(t, uid, device),
		Handler: func(m client.Message) error {
			w.mu.Lock()
			w.msgs = append(w.msgs, m)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
			return nil
		},
		OnEvent: func(e client.Event) { w.mu.Lock(); w.events = append(w.events, e); w.mu.Unlock() },
		OnError: func(err error) { w.mu.Lock(); w.errs = append(w.errs, err); w.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w.c = c
	return w
}

// witnessed counts what a witness got.
type witnessed struct{ msgs, events, errs int }

func (w *witness) seen() witnessed {
	w.mu.Lock()
	defer w.mu.Unlock()
	return witnessed{len(w.msgs), len(w.events), len(w.errs)}
}

func (w *witness) waitFor(t *testing.T, msgs int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for w.seen().msgs < msgs {
		select {
		case <-w.more:
		case <-deadline:
			t.Fatalf("witness got %d of %d messages", w.seen().msgs, msgs)
		}
	}
}

func (w *witness) seqs() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []uint64
	for _, m := range w.msgs {
		out = append(out, m.Seq)
	}
	return out
}

// nothingSince fails the test if the witness got anything after seen: a
// message, an event, an error (its session replaced or lost).
func (w *witness) nothingSince(t *testing.T, seen witnessed) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) != seen.msgs || len(w.events) != seen.events || len(w.errs) != seen.errs {
		t.Errorf("the victim received messages %v, events %v, errors %v", w.msgs[seen.msgs:], w.events[seen.events:], w.errs[seen.errs:])
	}
	if err := w.c.Err(); err != nil {
		t.Errorf("the victim's client stopped: %v", err)
	}
}
