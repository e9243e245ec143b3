package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A dial the gateway's login budget refuses with retry_after_ms comes
// back after the hint, many times over (they do not count against its
// attempts), and says how many retries it made.
func TestDialRetryHonoursRetryHint(t *testing.T) {
	const refusals, hint = 3, 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan time.Time, 16)
	refusedAt := make(chan time.Time, 16)
	go func() {
		for i := 0; ; i++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- time.Now()
			go func(i int) {
				defer nc.Close()
				if _, err := wire.ReadTCPFrame(bufio.NewReader(nc), nil, 1<<20); err != nil {
					return
				}
				var m proto.Message = &pb.Welcome{Uid: 1, Device: "d", HeartbeatMs: 20000}
				if i < refusals {
					m = &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Fatal: true, RetryAfterMs: uint32(hint / time.Millisecond)}
				}
				f, _ := wire.AppendFrame(nil, m)
				if i < refusals {
					refusedAt <- time.Now()
				}
				_, _ = nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...))
				time.Sleep(time.Second)
			}(i)
		}
	}()
	c, retries, err := dialRetry(context.Background(), client.Options{URL: "tcp://" + ln.Addr().String(), Token: "t"}, 1)
	if err != nil {
		t.Fatalf("dial after %d refusals with a retry hint and 1 attempt: %v", refusals, err)
	}
	defer c.Close()
	if retries != refusals {
		t.Fatalf("%d retries, want %d", retries, refusals)
	}
	<-accepted
	for i := range refusals {
		refused, next := <-refusedAt, <-accepted
		if gap := next.Sub(refused); gap < hint {
			t.Fatalf("refusal %d: dialled again after %v, before the hint %v", i, gap, hint)
		}
	}
}
