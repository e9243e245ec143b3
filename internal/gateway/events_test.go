package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/wire/pb"
)

func testEventWriter(p retryPolicy) *eventWriter {
	w := newEventWriter(nil, nil, 4, nil, zap.NewNop(), newMetrics(prometheus.NewRegistry()))
	w.policy = p
	return w
}

// A failed event publish is retried with backoff until it succeeds; every
// failed attempt is counted.
func TestEventRetriedUntilItSucceeds(t *testing.T) {
	w := testEventWriter(retryPolicy{attempt: time.Second, first: time.Millisecond, max: 4 * time.Millisecond, budget: 10 * time.Second})
	calls := 0
	err := w.retried(pb.EventType_READ, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Fatal("an attempt without a deadline")
		}
		if calls++; calls < 5 {
			return errors.New("nats: timeout")
		}
		return nil
	})
	if err != nil || calls != 5 {
		t.Fatalf("err %v after %d calls, want success at the 5th", err, calls)
	}
	if n := counterValue(w.m.eventFailures.WithLabelValues("READ")); n != 4 {
		t.Fatalf("%v failures counted, want 4", n)
	}
}

// Retries are bounded (the budget keeps them inside the streams' duplicate
// window) and stop with the gateway; an event given up is counted.
func TestEventGivenUpAfterBudgetOrShutdown(t *testing.T) {
	w := testEventWriter(retryPolicy{attempt: time.Second, first: 5 * time.Millisecond, max: 10 * time.Millisecond, budget: 50 * time.Millisecond})
	fail := func(context.Context) error { return errors.New("nats: no responders") }
	start := time.Now()
	if err := w.retried(pb.EventType_DELIVERED, fail); err == nil {
		t.Fatal("an always failing publish succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s with a 50ms budget", el)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w = testEventWriter(retryPolicy{attempt: time.Second, first: time.Hour, max: time.Hour, budget: 10 * time.Hour})
	w.start(ctx)
	e := &event{uid: 1, dedupeID: "x"}
	e.entry.EventType = pb.EventType_READ_SYNC
	w.background(pb.EventType_READ_SYNC, e.fields(), func() error { return w.retried(pb.EventType_READ_SYNC, fail) })
	cancel()
	w.wait() // returns: the retry ends with the gateway's context
	if n := counterValue(w.m.eventsGivenUp.WithLabelValues("READ_SYNC")); n != 1 {
		t.Fatalf("%v events given up at shutdown, want 1", n)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
