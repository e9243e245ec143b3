package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// TestSendTxCommitsAndRollsBack: the fanout's transaction (BEGIN in the
// pipeline of its first statements, COMMIT in that of its writes) commits
// what it wrote; a write that fails, or a batch that returns before its
// commit, leaves nothing (no row, last_seq unchanged) and no lock behind,
// and the pool's one connection is clean for the next batch.
func TestSendTxCommitsAndRollsBack(t *testing.T) {
	st, err := store.Open(context.Background(), testenv.Database(t), 1) // one connection: each batch reuses it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conv, _, err := st.CreateConversation(ctx, store.KindDirect, []int64{1, 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ids.AtTime(time.Now()) // inside the newest msg_content range
	msg := func(n int64, cmid string) *store.Message {
		return &store.Message{MsgID: id + n, ConvID: conv, ConvSeq: n, SenderUID: 1, SenderDevice: "d",
			ClientMsgID: cmid, Kind: 1, Body: "hi", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	}
	keys := []store.SendKey{{Sender: 1, ClientMsgID: "a"}}
	// state runs a batch that only reads: the conversation's last_seq and
	// whether send "a" is stored. Its lock wait is bounded: a lock left
	// behind by a rolled-back batch fails it.
	state := func(what string) (int64, bool) {
		t.Helper()
		lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
		defer lcancel()
		var last int64
		var stored bool
		err := store.RunSendTx(lctx, st.Pool, []int64{conv}, keys, func(tx *store.SendTx) error {
			last = tx.Convs[conv].LastSeq
			_, stored = tx.Lookup.Stored[keys[0]]
			return nil
		})
		if err != nil {
			t.Fatalf("%s: read batch: %v", what, err)
		}
		return last, stored
	}

	if err := store.RunSendTx(ctx, st.Pool, []int64{conv}, keys, func(tx *store.SendTx) error {
		return tx.Commit(ctx, []*store.Message{msg(1, "a")}, map[int64]int64{conv: 1}, nil)
	}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if last, stored := state("after the commit"); last != 1 || !stored {
		t.Fatalf("after the commit: last_seq %d, stored %v; want 1, true", last, stored)
	}
	conns := st.Pool.Stat().NewConnsCount()

	// The same msg_id again: the insert fails, the last_seq update queued
	// with it must not stay.
	err = store.RunSendTx(ctx, st.Pool, []int64{conv}, keys, func(tx *store.SendTx) error {
		return tx.Commit(ctx, []*store.Message{msg(1, "b")}, map[int64]int64{conv: 2}, nil)
	})
	if err == nil {
		t.Fatal("a commit with a duplicate msg_id succeeded")
	}
	if last, _ := state("after the failed commit"); last != 1 {
		t.Fatalf("after the failed commit: last_seq %d, want 1", last)
	}

	// Returning before Commit rolls back; so does an error.
	boom := errors.New("boom")
	if err := store.RunSendTx(ctx, st.Pool, []int64{conv}, keys, func(tx *store.SendTx) error {
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("RunSendTx returned %v, want fn's error", err)
	}
	if last, _ := state("after an error before the commit"); last != 1 {
		t.Fatalf("last_seq %d, want 1", last)
	}
	if n := st.Pool.Stat().NewConnsCount(); n != conns {
		t.Fatalf("%d connections opened after the first commit, want none: a rolled-back batch's connection was not clean", n-conns)
	}
}
