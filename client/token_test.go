package client

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// tokens plays the application's token service: it hands out fresh-1,
// fresh-2, … and counts the calls.
type tokens struct {
	mu sync.Mutex
	n  int
}

func (k *tokens) refresh(context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	return "fresh-" + strconv.Itoa(k.n), nil
}

func (k *tokens) calls() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

// helloTokens records the token of each hello and answers with a welcome
// whose token expires after ttl (or the error reply returns for hello n,
// if not nil).
type helloTokens struct {
	mu    sync.Mutex
	toks  []string
	ttl   time.Duration
	reply func(n int) proto.Message
}

func (h *helloTokens) answer(n int, hello *pb.Hello) proto.Message {
	h.mu.Lock()
	h.toks = append(h.toks, hello.GetToken())
	h.mu.Unlock()
	if h.reply != nil {
		if r := h.reply(n); r != nil {
			return r
		}
	}
	w := welcome(0)
	w.TokenExpiresAtMs = time.Now().Add(h.ttl).UnixMilli()
	return w
}

func (h *helloTokens) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.toks...)
}

// The client refreshes its token on the connection before each exp the
// server announced (welcome, refresh_result), with a token from
// RefreshToken, without reconnecting; a reconnect afterwards logs in with
// the latest refreshed token, not the expired first one.
func TestRefreshesBeforeExpiry(t *testing.T) {
	h := &helloTokens{ttl: 1500 * time.Millisecond}
	s := newScripted(t, h.answer)
	var k tokens
	_, sc := dialScripted(t, s, Options{Token: "t0", RefreshToken: k.refresh})
	deadline := time.Now().Add(h.ttl)
	for i := 1; i <= 2; i++ {
		got := sc.waitFrames("refresh "+strconv.Itoa(i), func(got []proto.Message) bool { return len(ofType[*pb.Refresh](got)) == i })
		if time.Now().After(deadline) {
			t.Fatalf("refresh %d came after the token's exp", i)
		}
		r := ofType[*pb.Refresh](got)[i-1]
		if r.GetToken() != "fresh-"+strconv.Itoa(i) {
			t.Fatalf("refresh %d carries token %q, want RefreshToken's fresh-%d", i, r.GetToken(), i)
		}
		deadline = time.Now().Add(h.ttl)
		sc.send(&pb.RefreshResult{RequestId: r.GetRequestId(), ExpiresAtMs: deadline.UnixMilli()})
	}
	if n := len(s.helloTimes()); n != 1 {
		t.Fatalf("%d hellos while refreshing, want 1", n)
	}
	sc.close() // a network failure: the client comes back
	s.next()
	if toks := h.seen(); len(toks) != 2 || toks[1] != "fresh-2" {
		t.Fatalf("hello tokens %v: the reconnect must use the latest refreshed token fresh-2", toks)
	}
}

// A session the server ended with TOKEN_EXPIRED is followed by a hello
// with a new token from RefreshToken, not the expired one.
func TestTokenExpiredAsksForTokenBeforeReconnect(t *testing.T) {
	h := &helloTokens{ttl: time.Hour}
	s := newScripted(t, h.answer)
	var k tokens
	_, sc := dialScripted(t, s, Options{Token: "t0", RefreshToken: k.refresh})
	sc.send(&pb.Error{Code: pb.ErrorCode_TOKEN_EXPIRED, Message: "expired", Fatal: true})
	sc.close()
	s.next()
	if toks := h.seen(); len(toks) != 2 || toks[0] != "t0" || toks[1] != "fresh-1" {
		t.Fatalf("hello tokens %v, want t0 then RefreshToken's fresh-1", toks)
	}
}

// A refused refresh (a non-fatal error with the request's id) is reported
// and tried again with a new token; the client does not stop.
func TestRefusedRefreshRetried(t *testing.T) {
	h := &helloTokens{ttl: 2 * time.Second}
	s := newScripted(t, h.answer)
	var k tokens
	errs := make(errorsSeen, 64)
	c, sc := dialScripted(t, s, Options{Token: "t0", RefreshToken: k.refresh, OnError: errs.add})
	got := sc.waitFrames("a refresh", func(got []proto.Message) bool { return len(ofType[*pb.Refresh](got)) == 1 })
	sc.send(&pb.Error{Code: pb.ErrorCode_REVOKED, Message: "issued before a revocation", RequestId: ofType[*pb.Refresh](got)[0].GetRequestId()})
	got = sc.waitFrames("the refresh again", func(got []proto.Message) bool { return len(ofType[*pb.Refresh](got)) == 2 })
	if tok := ofType[*pb.Refresh](got)[1].GetToken(); tok != "fresh-2" {
		t.Fatalf("the retry carries %q, want a new token fresh-2", tok)
	}
	if c.Err() != nil {
		t.Fatalf("a refused refresh stopped the client: %v", c.Err())
	}
	select {
	case err := <-errs:
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != pb.ErrorCode_REVOKED || errors.Is(err, ErrRevoked) {
			t.Fatalf("OnError got %v, want the refresh's REVOKED answer (not ErrRevoked: the client goes on)", err)
		}
	default:
		t.Fatal("the refused refresh was not reported to OnError")
	}
}

// REVOKED on an open connection stops the client for good, like
// SESSION_REPLACED: it does not dial again, and Err, the pending send and
// later calls say ErrRevoked.
func TestRevokedStopsClient(t *testing.T) {
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	p := c.SendAsync(1, "m1", "hello")
	sc.waitFrames("the send", func(got []proto.Message) bool { return len(ofType[*pb.Send](got)) == 1 })
	sc.send(&pb.Error{Code: pb.ErrorCode_REVOKED, Message: "revoked", Fatal: true})
	sc.close()
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed within 2s of REVOKED")
	}
	time.Sleep(300 * time.Millisecond) // several backoffs
	if n := len(s.helloTimes()); n != 1 {
		t.Fatalf("the client said hello %d times after REVOKED, want 0", n-1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Err(); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Err() = %v, want ErrRevoked", err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrRevoked) {
		t.Fatalf("the pending send ended with %v, want ErrRevoked", err)
	}
	if _, err := c.Send(ctx, 1, "m2", "after"); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a send after REVOKED ended with %v, want ErrRevoked", err)
	}
}

// A reconnect whose hello is refused with REVOKED stops the client too.
func TestRevokedAtReconnectStopsClient(t *testing.T) {
	h := &helloTokens{ttl: time.Hour, reply: func(n int) proto.Message {
		if n > 1 {
			return &pb.Error{Code: pb.ErrorCode_REVOKED, Message: "revoked", Fatal: true}
		}
		return nil
	}}
	s := newScripted(t, h.answer)
	c, sc := dialScripted(t, s, Options{})
	sc.close()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the client still runs after its reconnect was refused with REVOKED (%d hellos)", len(s.helloTimes()))
	}
	if !errors.Is(c.Err(), ErrRevoked) {
		t.Fatalf("Err() = %v, want ErrRevoked", c.Err())
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(s.helloTimes()); n != 2 {
		t.Fatalf("%d hellos, want 2 (none after REVOKED)", n)
	}
}
