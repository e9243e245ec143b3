package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"sync"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/wire"
)

// syncLine is one line of sync's output. Other tooling parses it: fields
// are only added, and late is omitted when false, so the line of a message
// handed over in order is what it always was.
type syncLine struct {
	Seq       uint64 `json:"seq"`
	MsgID     int64  `json:"msg_id"`
	ConvID    int64  `json:"conv_id"`
	ConvSeq   int64  `json:"conv_seq"`
	SenderUID int64  `json:"sender_uid"`
	Text      string `json:"text"`
	Lane      string `json:"lane"`
	Late      bool   `json:"late,omitempty"` // client.Message.Late: below a conv_seq already printed
}

func lineOf(m client.Message) syncLine {
	return syncLine{Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, SenderUID: m.SenderUID,
		Text: m.Text, Lane: m.Lane, Late: m.Late}
}

// syncCmd prints the device's messages as the client package hands them to
// an application (deduplicated, in conv_seq order per conversation) and
// confirms what it printed. It stops with an error line (code
// SESSION_REPLACED) when the device logs in elsewhere meanwhile: that login
// wins (client.ErrReplaced).
func syncCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "uid")
	device := fs.String("device", "", "device id")
	idle := fs.Duration("idle", 2*time.Second, "exit after this long with nothing new")
	maxN := fs.Int("max", 0, "exit after this many messages, confirming only those (0: no limit)")
	noAck := fs.Bool("no-ack", false, "print and confirm nothing, like a client that crashes before storing")
	kind := fs.String("kind", "desktop", "device kind: mobile, desktop or web")
	var key, kid, issuer string
	fs.StringVar(&key, "key", "", "PEM Ed25519 private key (PKCS #8) to sign the token with EdDSA instead of --secret (env INBOXD_TOKEN_KEY)")
	fs.StringVar(&kid, "kid", "", "key id (kid header) of the signing key in the gateways' --token-keys set (env INBOXD_TOKEN_KID)")
	fs.StringVar(&issuer, "issuer", "", "iss claim, for gateways with --token-issuer (env INBOXD_TOKEN_ISSUER)")
	fromEnv(&key, "INBOXD_TOKEN_KEY")
	fromEnv(&kid, "INBOXD_TOKEN_KID")
	fromEnv(&issuer, "INBOXD_TOKEN_ISSUER")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 || *device == "" {
		return fail(errors.New("sync needs --uid and --device"))
	}
	sg, err := signer(c.secret, key, kid, issuer)
	if err != nil {
		return fail(err)
	}
	tok, err := sg.Issue(*uid, *device, time.Hour)
	if err != nil {
		return fail(err)
	}
	var (
		mu          sync.Mutex
		printed     int
		last        = time.Now()
		full        = make(chan struct{})
		interrupted bool // Ctrl-C: print nothing more, confirm what was printed
	)
	handler := func(m client.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if interrupted || (*maxN > 0 && printed >= *maxN) {
			return client.ErrStop // not printed, not confirmed
		}
		emit(lineOf(m))
		printed++
		last = time.Now()
		if *maxN > 0 && printed == *maxN {
			close(full)
		}
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	cl, err := client.Dial(dctx, client.Options{URL: c.url, Token: tok, DeviceKind: *kind, Handler: handler, NoAck: *noAck})
	cancel()
	if err != nil {
		return clientFail("", err)
	}
	bar := newProgressBar(os.Stderr, cl, func() int {
		mu.Lock()
		defer mu.Unlock()
		return printed
	})
	defer bar.done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// Interrupted (SIGINT, SIGTERM): the handler prints nothing more,
			// Close confirms every message printed (those of unfinished
			// batches one by one), and the exit says it was cut short.
			mu.Lock()
			interrupted = true
			mu.Unlock()
			bar.done()
			cl.Close()
			emit(errorLine{Error: "interrupted: every message printed is confirmed", Code: "INTERRUPTED"})
			return 130
		case <-full:
		case <-cl.Done(): // replaced: the client stopped for good
			err := cl.Err()
			var we *wire.Error
			if errors.As(err, &we) {
				emit(errorLine{Error: we.Message, Code: we.Code.String()})
			} else {
				emit(errorLine{Error: err.Error()})
			}
			return 1
		case <-tick.C:
			bar.update()
			mu.Lock()
			quiet := time.Since(last) >= *idle
			mu.Unlock()
			if !quiet {
				continue
			}
		}
		break
	}
	bar.done()
	cl.Close() // confirms what was printed (unless --no-ack)
	return 0
}
