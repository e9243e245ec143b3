package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
)

// router routes per-user NATS traffic (live entries, login kicks) to the
// sessions of that user on this gateway. Live entries come on one literal
// subscription per connected user, shared by the user's devices. Kicks
// (logins and revocations, one small message per login anywhere) come on
// one wildcard subscription of the gateway (streams.AllUserKicks), held
// for its lifetime: a subscription per user cost each connected user
// ~250 bytes of the gateway's heap, a server-side subscription, and a SUB
// and an UNSUB per login. (A wildcard is never subscribed per user: its
// unsubscribe made the server scan every outstanding service response of
// the account: commit afd5dad.) The user's rate buckets are not here:
// they outlive its sessions (limits.go).
//
// The subscriptions are channel subscriptions feeding routeShards
// goroutines (a user always to the same one, so its entries stay in
// order) and one for the kicks: an async subscription would cost a
// goroutine per connected user. A shard that falls routeQueue messages
// behind drops live entries (NATS counts a slow consumer); they are not
// lost, the tail read delivers them.
type router struct {
	g       *Gateway
	mu      sync.Mutex
	users   map[int64]*userEntry
	shards  []chan *nats.Msg
	kicks   chan *nats.Msg // every user's kick subject (AllUserKicks)
	kickSub *nats.Subscription
	done    chan struct{} // closed by the gateway's Shutdown
	// ending holds, by consumer name, a session that left users and is
	// saving its final cursor (session.close): a new login of the device
	// waits for it before it reads the cursor.
	ending map[string]*session
}

const (
	routeShards = 8
	routeQueue  = 1 << 14
)

func newRouter(g *Gateway) *router {
	r := &router{g: g, users: make(map[int64]*userEntry), ending: make(map[string]*session), done: make(chan struct{})}
	for range routeShards {
		ch := make(chan *nats.Msg, routeQueue)
		r.shards = append(r.shards, ch)
		go r.route(ch)
	}
	r.kicks = make(chan *nats.Msg, routeQueue)
	go r.route(r.kicks)
	return r
}

// start subscribes to every user's kicks.
func (r *router) start() (err error) {
	if r.kickSub, err = r.g.nc.ChanSubscribe(streams.AllUserKicks, r.kicks); err != nil {
		return fmt.Errorf("gateway: subscribe kicks: %w", err)
	}
	return nil
}

// stop ends the kick subscription.
func (r *router) stop() {
	if r.kickSub != nil {
		_ = r.kickSub.Unsubscribe()
	}
}

// route delivers one shard's messages until the gateway shuts down.
func (r *router) route(ch chan *nats.Msg) {
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-r.done:
			return
		}
		// inboxd.u.<p>.<uid>.<kind>
		rest := strings.TrimPrefix(m.Subject, "inboxd.u.")
		_, rest, _ = strings.Cut(rest, ".")
		uidStr, _, _ := strings.Cut(rest, ".")
		uid, err := strconv.ParseInt(uidStr, 10, 64)
		if err != nil {
			continue
		}
		r.deliver(uid, m)
	}
}

type userEntry struct {
	live     *nats.Subscription
	sessions []*session
}

// errTooManyConns refuses a connection over MaxConnsPerUser.
var errTooManyConns = errors.New("too many connections for this user")

// errOlderLogin: the device already has a session here from a login that
// began later (this hello was slow, and its client retried meanwhile).
var errOlderLogin = errors.New("the device has a newer login")

// register adds s; sessions of the same device here are replaced (closed),
// and other gateways are told to close theirs. ending is the device's
// session here that closed on its own and is still saving its final
// cursor (nil if none): s must wait for it, like for the replaced ones.
func (r *router) register(s *session) (replaced []*session, ending *session, err error) {
	r.mu.Lock()
	ending = r.ending[s.consumer]
	u := r.users[s.uid]
	if u == nil {
		u = &userEntry{}
		// A literal subject: the server's cleanup after unsubscribing a
		// wildcard scans every outstanding service response of the
		// account, which made a wave of disconnects cost the NATS server
		// seconds of CPU.
		u.live, err = r.g.nc.ChanSubscribe(streams.UserLive(s.p, s.uid), r.shards[uint64(s.uid)%routeShards])
		if err != nil {
			r.mu.Unlock()
			return nil, nil, err
		}
		r.users[s.uid] = u
	}
	others := 0
	for _, o := range u.sessions {
		if o.device != s.device {
			others++
		}
	}
	if others >= r.g.opts.MaxConnsPerUser {
		r.mu.Unlock()
		return nil, nil, errTooManyConns
	}
	for _, o := range u.sessions {
		if o.device == s.device && !newerLogin(o, s.c.born, s.id) {
			r.mu.Unlock()
			return nil, nil, errOlderLogin
		}
	}
	kept := u.sessions[:0]
	for _, o := range u.sessions {
		if o.device == s.device {
			replaced = append(replaced, o)
		} else {
			kept = append(kept, o)
		}
	}
	u.sessions = append(kept, s)
	r.mu.Unlock()
	// Other gateways holding this device close their session on this.
	r.kick(s)
	return replaced, ending, nil
}

// kick announces s's login: "<consumer> <session id> <connection born ns>".
func (r *router) kick(s *session) {
	_ = r.g.nc.Publish(streams.UserKick(s.p, s.uid), []byte(s.consumer+" "+s.id+" "+strconv.FormatInt(s.c.born, 10)))
}

// newerLogin reports whether a kick from a login whose connection was
// born at born (0: a kick without a time, from an older gateway) replaces
// s. The login that began later wins: a hello that a client gave up on and
// that registers after the client's retry on another gateway must not
// replace the retry (the client would stop for good on SESSION_REPLACED).
// Equal times are broken by session id, so exactly one of two survives.
func newerLogin(s *session, born int64, id string) bool {
	if born == 0 {
		return true
	}
	if born != s.c.born {
		return born > s.c.born
	}
	return id > s.id
}

func (r *router) unregister(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(s)
}

// leave moves s, which is closing, from its user's sessions to the
// ending table until left: it gets no more live entries or kicks, and a
// new login of its device waits until its final cursor is saved.
func (r *router) leave(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(s)
	r.ending[s.consumer] = s
}

// left removes s from the ending table (a newer closing session of the
// same device may have taken its place: it stays).
func (r *router) left(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ending[s.consumer] == s {
		delete(r.ending, s.consumer)
	}
}

func (r *router) removeLocked(s *session) {
	u := r.users[s.uid]
	if u == nil {
		return
	}
	for i, o := range u.sessions {
		if o == s {
			u.sessions = append(u.sessions[:i], u.sessions[i+1:]...)
			break
		}
	}
	if len(u.sessions) == 0 {
		_ = u.live.Unsubscribe()
		delete(r.users, s.uid)
	}
}

// limiter is uid's backfill bucket (the session's budget asks for it at
// each use; it lives in limits.go, past the user's sessions).
func (r *router) limiter(uid int64) *rate.Limiter {
	return r.g.limits.users.of(uid).backfill
}

func (r *router) sessionsOf(uid int64) []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u := r.users[uid]; u != nil {
		return append([]*session(nil), u.sessions...)
	}
	return nil
}

func (r *router) deliver(uid int64, m *nats.Msg) {
	switch {
	case strings.HasSuffix(m.Subject, ".live"):
		e, ok := wire.PeekEntry(m.Data)
		if !ok {
			r.g.log.Warn("undecodable live entry", zap.String("subject", m.Subject))
			return
		}
		if e.MsgID != 0 {
			d := time.Since(ids.Time(e.MsgID))
			r.g.steer.observe(sigLive, d)
			r.g.metrics.liveDelay.Observe(max(d, 0).Seconds())
		}
		for _, s := range r.sessionsOf(uid) {
			s.onLive(m.Data, e)
		}
	case strings.HasSuffix(m.Subject, ".kick"):
		if device, at, ok := streams.ParseRevokeAnnouncement(m.Data); ok {
			r.g.revoke(uid, device, at) // revoke.go
			return
		}
		consumer, rest, _ := strings.Cut(string(m.Data), " ")
		id, bornText, _ := strings.Cut(rest, " ")
		born, _ := strconv.ParseInt(bornText, 10, 64)
		for _, s := range r.sessionsOf(uid) {
			if s.consumer != consumer || s.id == id {
				continue
			}
			if newerLogin(s, born, id) {
				s.c.replaced()
			} else {
				// An older login registered after this one (its kick came
				// late): announce this one again so that the older closes.
				r.g.metrics.staleKicks.Inc()
				r.kick(s)
			}
		}
	}
}

// all returns every session (for a tail check after a NATS reconnect).
func (r *router) all() []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*session
	for _, u := range r.users {
		out = append(out, u.sessions...)
	}
	return out
}
