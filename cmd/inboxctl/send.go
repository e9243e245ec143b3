package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nuid"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
)

// sendWindow is how many sends inboxctl keeps in flight; they are written
// in order on one connection, so conv_seq follows --count order.
const sendWindow = 64

type sendLine struct {
	ClientMsgID string `json:"client_msg_id"`
	MsgID       int64  `json:"msg_id"`
	ConvSeq     int64  `json:"conv_seq"`
	Status      string `json:"status"`
}

func sendCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "sender uid")
	device := fs.String("device", "inboxctl", "sender device id")
	convID := fs.Int64("conv", 0, "conversation id")
	text := fs.String("text", "", fmt.Sprintf("message text, at most %d bytes (with --count > 1, \" #i\" is appended)", wire.MaxTextLen))
	count := fs.Int("count", 1, "messages to send, in order")
	cmid := fs.String("client-msg-id", "", "client_msg_id (with --count > 1: ID-1 … ID-K); default random")
	timeout := fs.Duration("timeout", 60*time.Second, "give up on a send after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 || *convID <= 0 || *count < 1 {
		return fail(errors.New("send needs --uid, --conv and --count ≥ 1"))
	}
	tok, err := auth.NewSigner(c.secret).Issue(*uid, *device, time.Hour)
	if err != nil {
		return fail(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	cl, err := client.Dial(dctx, client.Options{URL: c.url, Token: tok})
	cancel()
	if err != nil {
		return clientFail("", err)
	}
	defer cl.Close()

	base := *cmid
	if base == "" {
		base = nuid.Next()
	}
	idOf := func(i int) string {
		if *count == 1 {
			return base
		}
		return base + "-" + strconv.Itoa(i+1)
	}
	textOf := func(i int) string {
		if *count == 1 {
			return *text
		}
		return fmt.Sprintf("%s #%d", *text, i+1)
	}
	// Keep a window of sends in flight, written in order, answered in order.
	inflight := make([]*client.PendingSend, 0, sendWindow)
	next := 0
	for done := 0; done < *count; done++ {
		for next < *count && len(inflight) < sendWindow {
			inflight = append(inflight, cl.SendAsync(*convID, idOf(next), textOf(next)))
			next++
		}
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		res, err := inflight[0].Wait(wctx)
		cancel()
		inflight = inflight[1:]
		if err != nil {
			return clientFail(idOf(done), err)
		}
		emit(sendLine{ClientMsgID: res.ClientMsgID, MsgID: res.MsgID, ConvSeq: res.ConvSeq, Status: "STORED"})
	}
	return 0
}

func clientFail(cmid string, err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		status := "FAILED"
		if cmid != "" {
			status = "REJECTED"
		}
		emit(errorLine{Error: we.Message, Code: we.Code.String(), ClientMsgID: cmid, Status: status})
		return 1
	}
	emit(errorLine{Error: err.Error(), ClientMsgID: cmid})
	return 1
}
