// Package bridge is the reference push bridge (cmd/pushbridge): it reads
// the push events of the PUSH stream from the durable consumer pushbridge
// and POSTs each, as is, to the relay's webhook (the customer's APNs/FCM
// relay). An event is acknowledged only after a 2xx answer; any other
// answer or a failed request is retried, with exponential backoff and full
// jitter through the server (NakWithDelay, so the attempt count survives a
// restart of the bridge), and an event still failing after MaxAttempts is
// terminated (+TERM), counted and logged: the dead letter is the log line
// and JetStream's MSG_TERMINATED advisory.
//
// Delivery is at least once: a bridge that dies after the relay answered
// and before the ack delivers the event again. Each request carries the
// event's id in Idempotency-Key for the relay to dedupe by.
package bridge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/streams"
)

// Headers of a webhook request (docs/operations.md, "Push bridge").
const (
	// HeaderIdempotencyKey is the event's id ("<uid>:<n>"): the same on
	// every delivery of one event.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderAttempt is the delivery attempt, from 1.
	HeaderAttempt = "Inboxd-Attempt"
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" with the webhook secret>", when a secret is set.
	HeaderSignature = "Inboxd-Signature"
)

// Options configures the bridge.
type Options struct {
	// URL is the webhook (http or https).
	URL string
	// Secret, when set, signs every request (HeaderSignature). Never logged.
	Secret string
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// MaxAttempts: an event failing this often is terminated (default 20).
	MaxAttempts int
	// RetryMin and RetryMax bound the backoff: attempt k waits a random
	// time in [0, min(RetryMax, RetryMin·2^(k-1))) (defaults 1s, 5m). A
	// 429 or 503 answer's Retry-After (seconds) is honoured up to RetryMax.
	RetryMin, RetryMax time.Duration
	// Concurrency is how many requests are in flight at most (default 16).
	Concurrency int
	// Client is the HTTP client (default: one with Timeout).
	Client *http.Client
}

// DefaultOptions returns the defaults (no URL).
func DefaultOptions() Options {
	return Options{Timeout: 10 * time.Second, MaxAttempts: 20, RetryMin: time.Second, RetryMax: 5 * time.Minute, Concurrency: 16}
}

// Validate checks the options.
func (o Options) Validate() error {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return errors.New("pushbridge: --webhook-url is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("pushbridge: --webhook-url %q: want an http:// or https:// URL", redactURL(o.URL))
	case u.User != nil:
		return errors.New("pushbridge: --webhook-url carries credentials: use --webhook-secret")
	case o.Timeout <= 0:
		return fmt.Errorf("pushbridge: --webhook-timeout %s must be positive", o.Timeout)
	case o.MaxAttempts < 1:
		return fmt.Errorf("pushbridge: --max-attempts %d must be at least 1", o.MaxAttempts)
	case o.RetryMin <= 0 || o.RetryMax < o.RetryMin:
		return fmt.Errorf("pushbridge: --retry-min %s and --retry-max %s: want 0 < min <= max", o.RetryMin, o.RetryMax)
	case o.Concurrency < 1:
		return fmt.Errorf("pushbridge: --concurrency %d must be at least 1", o.Concurrency)
	}
	return nil
}

// redactURL is u without user info or query, for an error message.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}

// Bridge delivers push events to the webhook.
type Bridge struct {
	opts  Options
	log   *zap.Logger
	js    jetstream.JetStream
	bound atomic.Bool

	delivered  prometheus.Counter
	failures   *prometheus.CounterVec
	deadLetter prometheus.Counter
	latency    prometheus.Histogram
	inFlight   prometheus.Gauge
}

// New returns a bridge; opts must be valid.
func New(opts Options, log *zap.Logger, js jetstream.JetStream, reg prometheus.Registerer) (*Bridge, error) {
	d := DefaultOptions()
	if opts.Timeout == 0 {
		opts.Timeout = d.Timeout
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = d.Concurrency
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	f := promauto.With(reg)
	return &Bridge{opts: opts, log: log, js: js,
		delivered: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_pushbridge_delivered_total", Help: "Push events the webhook accepted (2xx) and the bridge acknowledged."}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_pushbridge_failures_total",
			Help: "Webhook attempts that failed, by reason: status (a non-2xx answer) or error (no answer); each is retried until --max-attempts."}, []string{"reason"}),
		deadLetter: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_pushbridge_dead_letters_total",
			Help: "Push events given up after --max-attempts (terminated, logged with their id): must stay 0."}),
		latency: f.NewHistogram(prometheus.HistogramOpts{Name: "inboxd_pushbridge_request_seconds", Help: "Webhook request time.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_pushbridge_in_flight", Help: "Webhook requests in flight."}),
	}, nil
}

// Ready reports whether the bridge has bound its consumer (/readyz).
func (b *Bridge) Ready(context.Context) error {
	if !b.bound.Load() {
		return fmt.Errorf("consumer %s of stream %s not bound yet (the syncer creates it with --push)", streams.PushBridgeConsumer, streams.PushStream)
	}
	return nil
}

// Run delivers until ctx ends. It waits for the consumer (a syncer with
// --push creates it), then hands events to Concurrency workers; it
// returns after the requests in flight ended.
func (b *Bridge) Run(ctx context.Context) error {
	cons, err := b.bind(ctx)
	if err != nil {
		return err
	}
	// Buffered, so that the delivery callback seldom blocks (it also
	// takes the consumer's heartbeats); an event waits here at most two
	// request timeouts, well within the consumer's ack_wait.
	work := make(chan jetstream.Msg, 2*b.opts.Concurrency)
	var wg sync.WaitGroup
	for range b.opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				b.deliver(ctx, m)
			}
		}()
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case work <- m:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(b.opts.Concurrency), jetstream.PullExpiry(5*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { b.log.Debug("consume", zap.Error(err)) }))
	if err != nil {
		close(work)
		wg.Wait()
		return fmt.Errorf("pushbridge: consume %s/%s: %w", streams.PushStream, streams.PushBridgeConsumer, err)
	}
	<-ctx.Done()
	cc.Stop()
	close(work)
	wg.Wait()
	return ctx.Err()
}

// bind looks the consumer up until it exists or ctx ends.
func (b *Bridge) bind(ctx context.Context) (jetstream.Consumer, error) {
	delay, logged := 250*time.Millisecond, time.Time{}
	for {
		cons, err := b.js.Consumer(ctx, streams.PushStream, streams.PushBridgeConsumer)
		if err == nil {
			b.bound.Store(true)
			b.log.Info("push bridge bound", zap.String("stream", streams.PushStream), zap.String("consumer", streams.PushBridgeConsumer),
				zap.String("webhook", redactURL(b.opts.URL)))
			return cons, nil
		}
		if time.Since(logged) > 10*time.Second {
			b.log.Warn("waiting for the push consumer: a syncer with --push creates it", zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// event is what the bridge reads of an event: enough to log and key it.
type event struct {
	ID  string `json:"id"`
	UID string `json:"uid"`
}

// deliver makes one attempt at m and acks, naks with a delay or
// terminates it.
func (b *Bridge) deliver(ctx context.Context, m jetstream.Msg) {
	attempt := 1
	if md, err := m.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	var ev event
	if err := json.Unmarshal(m.Data(), &ev); err != nil || ev.ID == "" {
		b.deadLetter.Inc()
		b.log.Error("push event is not an event; terminated", zap.String("subject", m.Subject()), zap.Error(err))
		_ = m.Term()
		return
	}
	log := b.log.With(zap.String("id", ev.ID), zap.String("uid", ev.UID), zap.Int("attempt", attempt))
	b.inFlight.Inc()
	status, retryAfter, err := b.post(ctx, m.Data(), ev.ID, attempt)
	b.inFlight.Dec()
	if err == nil && status/100 == 2 {
		// Acked once the server confirms it: a lost ack would deliver
		// the event again (the relay dedupes by Idempotency-Key).
		if err := m.DoubleAck(ctx); err != nil {
			log.Warn("ack of a delivered push event failed: it will be delivered again", zap.Error(err))
			return
		}
		b.delivered.Inc()
		log.Debug("push event delivered", zap.Int("status", status))
		return
	}
	if ctx.Err() != nil {
		_ = m.Nak() // stopping: delivered again at once, to this bridge restarted or another
		return
	}
	reason := "status"
	if err != nil {
		reason = "error"
	}
	b.failures.WithLabelValues(reason).Inc()
	if attempt >= b.opts.MaxAttempts {
		b.deadLetter.Inc()
		log.Error("push event given up after the last attempt; terminated", zap.Int("status", status), zap.Error(err))
		_ = m.Term()
		return
	}
	delay := b.backoff(attempt)
	if retryAfter > 0 {
		delay = min(max(delay, retryAfter), b.opts.RetryMax)
	}
	log.Warn("webhook failed; retrying", zap.Int("status", status), zap.Duration("in", delay), zap.Error(err))
	_ = m.NakWithDelay(delay)
}

// backoff is the delay after failed attempt k: full jitter over an
// exponentially growing cap.
func (b *Bridge) backoff(attempt int) time.Duration {
	// Doubled step by step, not shifted: RetryMin<<(k-1) overflows int64
	// from about the 35th attempt (1s) and would turn negative.
	ceiling := b.opts.RetryMin
	for i := 1; i < attempt && ceiling < b.opts.RetryMax; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, b.opts.RetryMax)
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Millisecond
}

// post sends body to the webhook and returns the status, a Retry-After
// hint, or the error of a request without an answer.
func (b *Bridge) post(ctx context.Context, body []byte, id string, attempt int) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.opts.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "inboxd-pushbridge")
	req.Header.Set(HeaderIdempotencyKey, id)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	if b.opts.Secret != "" {
		req.Header.Set(HeaderSignature, Sign(b.opts.Secret, time.Now(), body))
	}
	start := time.Now()
	resp, err := b.opts.Client.Do(req)
	b.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		// url.Error names the URL: the bridge's URL has no credentials
		// (Validate), so it may be logged.
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
	}
	return resp.StatusCode, retryAfter, nil
}

// Sign returns the HeaderSignature value of body at time t: a relay
// recomputes HMAC-SHA256(secret, "<t>.<body>") and compares, and refuses
// an old t (replays).
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
