package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Live first (docs/operations.md): a live message that reaches STORED a
// second late (its Postgres write waits behind a table lock) lowers the
// gateway's catch-up level, and with it the backfill page reads allowed at
// once and the login limit; with the live path on time again, and no live
// traffic to protect, both come back to the full budget. Without the
// steering the gauges never move and the test fails.
func TestLateLiveMessagesHoldBackCatchUp(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	got := liveReceiver(t, n, 2, "phone")
	sender := dial(t, n, "tcp", 1, "laptop")

	// The baseline: live messages on time.
	for i := range 15 {
		r, err := sender.Send(ctxT(t, 20*time.Second), conv, "on-time-"+string(rune('a'+i)), "on time")
		if err != nil {
			t.Fatal(err)
		}
		waitMessage(t, got, r.MsgID)
		time.Sleep(50 * time.Millisecond)
	}
	// With no live traffic the level is back at 1 within 2 s (on a busy
	// machine the baseline's sends may have lowered it).
	fullBudget := func() (bool, string) {
		l, s := metric(t, n, "inboxd_gateway_catchup_level"), metric(t, n, "inboxd_gateway_page_slots")
		return l == 1 && s == 16, fmt.Sprintf("level %v, %v page slots", l, s)
	}
	waitUntil(t, 10*time.Second, "the full catch-up budget with no live traffic", fullBudget)

	// Watch the gauges every 10 ms from here on.
	type low struct{ level, slots, logins float64 }
	var mu sync.Mutex
	least := low{1, 16, 512}
	ctx, stop := context.WithCancel(context.Background())
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		for ctx.Err() == nil {
			// One scrape for the three, and no t.Fatal off the test's goroutine.
			v, _, err := readMetrics(n, "inboxd_gateway_catchup_level", "inboxd_gateway_page_slots", "inboxd_gateway_login_limit")
			if err == nil {
				mu.Lock()
				least = low{min(least.level, v[0]), min(least.slots, v[1]), min(least.logins, v[2])}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { stop(); watching.Wait() }()

	// One message a second late: its write waits for a lock on msg_content.
	tx, err := n.Store.Pool.Begin(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t, 10*time.Second), `LOCK TABLE msg_content IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	sent := make(chan int64, 1)
	go func() {
		r, err := sender.Send(ctxT(t, 30*time.Second), conv, "late", "a second late")
		if err != nil {
			t.Errorf("the late send: %v", err)
			sent <- 0
			return
		}
		sent <- r.MsgID
	}()
	time.Sleep(time.Second)
	if err := tx.Commit(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	id := <-sent
	if id == 0 {
		t.FailNow()
	}
	waitMessage(t, got, id)

	// The level falls at the next tick of the steering (every 100 ms),
	// then comes back.
	waitUntil(t, 5*time.Second, "the catch-up held back after a live message a second late", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return least.level <= 0.5 && least.slots <= 10 && least.logins <= 264,
			fmt.Sprintf("least catch-up level %v, page slots %v, login limit %v; want at most 0.5, 10 and 264", least.level, least.slots, least.logins)
	})
	waitUntil(t, 10*time.Second, "the full catch-up budget back", fullBudget)
}
