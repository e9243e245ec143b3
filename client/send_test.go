package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

func sendsOf(frames []proto.Message) []string {
	var ids []string
	for _, s := range ofType[*pb.Send](frames) {
		ids = append(ids, s.GetClientMsgId())
	}
	return ids
}

func stored(cmid string, msgID int64) *pb.SendResult {
	return &pb.SendResult{ClientMsgId: cmid, MsgId: msgID, ConvSeq: msgID, Status: pb.SendStatus_STORED}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A send whose waiter gave up (its ctx ended) while it was on the wire
// still holds one of the max_inflight_sends slots until the server answers
// it, and then frees it: later sends are not stalled.
func TestAbandonedSendFreesItsSlot(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message {
		w := welcome(0)
		w.MaxInflightSends = 1
		return w
	})
	c, sc := dialScripted(t, s, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Send(ctx, 1, "a", "abandoned"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send a: %v, want its ctx's deadline", err)
	}
	sc.waitFrames("send a", func(f []proto.Message) bool { return slices.Equal(sendsOf(f), []string{"a"}) })
	queued := c.SendAsync(1, "b", "next") // waits for a's slot
	sc.send(stored("a", 1))
	sc.waitFrames("send b after a was answered", func(f []proto.Message) bool { return slices.Equal(sendsOf(f), []string{"a", "b"}) })
	sc.send(stored("b", 2))
	if r, err := queued.Wait(waitCtx(t)); err != nil || r.MsgID != 2 {
		t.Fatalf("send b: %+v %v", r, err)
	}
}

// Sends go on the wire in the order they were issued, at most the server's
// max_inflight_sends unanswered at once, and each waiter gets its own
// answer.
func TestSendsGoOnTheWireInIssueOrderWithinTheInflightLimit(t *testing.T) {
	const limit, total = 3, 12
	s := newScripted(t, func(int, *pb.Hello) proto.Message {
		w := welcome(0)
		w.MaxInflightSends = limit
		return w
	})
	c, sc := dialScripted(t, s, Options{})
	var want []string
	var pending []*PendingSend
	for i := range total {
		id := fmt.Sprintf("m%02d", i)
		want = append(want, id)
		pending = append(pending, c.SendAsync(1, id, "text "+id))
	}
	for answered := 0; answered < total; answered++ {
		got := sc.waitFrames(fmt.Sprintf("send #%d", answered+1), func(f []proto.Message) bool { return len(sendsOf(f)) > answered })
		// Give the client a moment to overrun the limit, if it would.
		time.Sleep(5 * time.Millisecond)
		got = sc.frames()
		if n := len(sendsOf(got)); n > answered+limit {
			t.Fatalf("%d sends on the wire with %d answered: over the limit of %d", n, answered, limit)
		}
		sc.send(stored(want[answered], int64(100+answered)))
	}
	if got := sendsOf(sc.frames()); !slices.Equal(got, want) {
		t.Fatalf("sends went on the wire as %v, want %v", got, want)
	}
	for i, p := range pending {
		if r, err := p.Wait(waitCtx(t)); err != nil || r.MsgID != int64(100+i) || r.ClientMsgID != want[i] {
			t.Fatalf("send %s: %+v %v", want[i], r, err)
		}
	}
}

// A transient failure (FAILED) is retried by the client with the same
// client_msg_id and body until the server answers STORED; a REJECTED send
// is final and not retried.
func TestTransientSendFailureRetriedWithTheSameClientMsgID(t *testing.T) {
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	a := c.SendAsync(1, "a", "hello")
	b := c.SendAsync(2, "b", "not a member")
	sc.waitFrames("sends a and b", func(f []proto.Message) bool { return len(sendsOf(f)) == 2 })
	sc.send(&pb.SendResult{ClientMsgId: "a", Status: pb.SendStatus_FAILED, Code: pb.ErrorCode_UNAVAILABLE})
	sc.send(&pb.SendResult{ClientMsgId: "b", Status: pb.SendStatus_REJECTED, Code: pb.ErrorCode_NOT_MEMBER})
	sc.send(&pb.SendResult{ClientMsgId: "a", Status: pb.SendStatus_FAILED, Code: pb.ErrorCode_TIMEOUT}) // an answer to no attempt on the wire: ignored
	got := sc.waitFrames("a sent again", func(f []proto.Message) bool { return len(sendsOf(f)) == 3 })
	sc.send(stored("a", 41))

	if r, err := a.Wait(waitCtx(t)); err != nil || r.MsgID != 41 {
		t.Fatalf("send a: %+v %v", r, err)
	}
	var we *wire.Error
	if _, err := b.Wait(waitCtx(t)); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("send b: %v, want NOT_MEMBER", err)
	}
	sends := ofType[*pb.Send](got)
	if ids := sendsOf(got); !slices.Equal(ids, []string{"a", "b", "a"}) {
		t.Fatalf("sends on the wire: %v, want a, b, then a again", ids)
	}
	if !proto.Equal(sends[0], sends[2]) {
		t.Fatalf("the retry differs from the first attempt: %v vs %v", sends[2], sends[0])
	}
	time.Sleep(50 * time.Millisecond)
	if ids := sendsOf(sc.frames()); len(ids) != 3 {
		t.Fatalf("after the answers the client sent more: %v", ids)
	}
}

// Sends unanswered when the connection drops (stored or not, the client
// cannot know) go out again on the next connection, in issue order, with
// the same client_msg_ids, before sends issued later; the answers reach
// the original waiters.
func TestUnansweredSendsSentAgainInOrderAfterReconnect(t *testing.T) {
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	var ps []*PendingSend
	for _, id := range []string{"a", "b", "c"} {
		ps = append(ps, c.SendAsync(1, id, id))
	}
	sc.waitFrames("three sends", func(f []proto.Message) bool { return len(sendsOf(f)) == 3 })
	sc.send(stored("b", 2)) // b is answered; a and c are not when the connection drops
	if r, err := ps[1].Wait(waitCtx(t)); err != nil || r.MsgID != 2 {
		t.Fatalf("send b: %+v %v", r, err)
	}
	sc.close()

	sc = s.next()
	ps = append(ps, c.SendAsync(1, "d", "d"))
	got := sc.waitFrames("a, c and d", func(f []proto.Message) bool { return len(sendsOf(f)) == 3 })
	if ids := sendsOf(got); !slices.Equal(ids, []string{"a", "c", "d"}) {
		t.Fatalf("after the reconnect the client sent %v, want a, c, d", ids)
	}
	for i, id := range []string{"a", "c", "d"} {
		sc.send(stored(id, int64(10+i)))
	}
	for i, want := range map[int]int64{0: 10, 2: 11, 3: 12} {
		if r, err := ps[i].Wait(waitCtx(t)); err != nil || r.MsgID != want {
			t.Fatalf("send %d: %+v %v, want msg_id %d", i, r, err, want)
		}
	}
}

// A send that can never be stored (wire.CheckSend: here a text over
// MaxTextLen) is refused by SendAsync at once with the gateway's code and
// words, and never goes on the wire.
func TestSendBeyondTheLimitsRefusedLocally(t *testing.T) {
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	for _, text := range []string{strings.Repeat("x", wire.MaxTextLen+1), strings.Repeat("x", 70_000)} {
		_, err := c.SendAsync(1, "long", text).Wait(waitCtx(t))
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != pb.ErrorCode_INVALID_ARGUMENT || we.Message != "text exceeds 16384 bytes" {
			t.Fatalf("send of %d bytes: %v, want INVALID_ARGUMENT: text exceeds 16384 bytes", len(text), err)
		}
	}
	ok := c.SendAsync(1, "fits", strings.Repeat("x", wire.MaxTextLen))
	sc.waitFrames("the send that fits", func(f []proto.Message) bool { return len(sendsOf(f)) > 0 })
	sc.send(stored("fits", 1))
	if _, err := ok.Wait(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ids := sendsOf(sc.frames()); !slices.Equal(ids, []string{"fits"}) {
		t.Fatalf("sends on the wire: %v, want only the one that fits", ids)
	}
}

// A send whose frame is above the max_frame the welcome advertises is
// refused with FRAME_TOO_LARGE before it is written (the server would close
// the connection); the sends after it go on.
func TestSendAboveAdvertisedMaxFrameRefusedBeforeTheWire(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message {
		w := welcome(0)
		w.MaxFrame = 1000
		return w
	})
	c, sc := dialScripted(t, s, Options{})
	big := c.SendAsync(1, "big", strings.Repeat("x", 2000))
	small := c.SendAsync(1, "small", "fits")
	var we *wire.Error
	if _, err := big.Wait(waitCtx(t)); !errors.As(err, &we) || we.Code != pb.ErrorCode_FRAME_TOO_LARGE {
		t.Fatalf("send of a 2000-byte frame to a server of max_frame 1000: %v, want FRAME_TOO_LARGE", err)
	}
	sc.waitFrames("the small send", func(f []proto.Message) bool { return len(sendsOf(f)) > 0 })
	sc.send(stored("small", 1))
	if _, err := small.Wait(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ids := sendsOf(sc.frames()); !slices.Equal(ids, []string{"small"}) {
		t.Fatalf("sends on the wire: %v, want only the small one", ids)
	}
}

// A server that closes the connection with FRAME_TOO_LARGE for a send
// without having advertised the limit (an older or differently configured
// server) gets that send once: the client rejects it with the server's code
// instead of sending it again on every reconnect until its waiter gives up.
// Another send on the wire at the time goes out again and is stored.
func TestSendRefusedFrameTooLargeNotRetried(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message {
		w := welcome(0)
		w.MaxFrame = 0 // not advertised
		return w
	})
	c, sc := dialScripted(t, s, Options{})
	big := c.SendAsync(1, "big", strings.Repeat("x", 10_000))
	small := c.SendAsync(1, "small", "fits")
	sc.waitFrames("both sends", func(f []proto.Message) bool { return len(sendsOf(f)) == 2 })
	sc.send(&pb.Error{Code: pb.ErrorCode_FRAME_TOO_LARGE, Message: "frame of 10012 bytes exceeds the limit of 8192", Fatal: true})
	sc.close()
	var we *wire.Error
	if _, err := big.Wait(waitCtx(t)); !errors.As(err, &we) || we.Code != pb.ErrorCode_FRAME_TOO_LARGE {
		t.Fatalf("the send the server refused as too large: %v, want FRAME_TOO_LARGE", err)
	}
	sc = s.next()
	got := sc.waitFrames("the small send again", func(f []proto.Message) bool { return len(sendsOf(f)) > 0 })
	sc.send(stored("small", 1))
	if _, err := small.Wait(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if ids := sendsOf(sc.frames()); !slices.Equal(ids, []string{"small"}) {
		t.Fatalf("after the reconnect the client sent %v (first %v), want only the small send", ids, sendsOf(got))
	}
}
