package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A mirrored cursor only rises within a stream epoch; one of a newer epoch
// replaces it (its position is in the newer stream), and one of an older
// epoch (a session of a lost stream flushing late) changes nothing.
func TestDeviceCursorEpochs(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	save := func(seq, epoch uint64) {
		t.Helper()
		if err := st.SaveDeviceCursors(ctx, []store.DeviceCursor{{UID: 7, Device: "d", Consumer: "c7", AckSeq: seq, Epoch: epoch}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, seq, epoch uint64) {
		t.Helper()
		c, found, err := st.GetDeviceCursor(ctx, 7, "d")
		if err != nil || !found || c.AckSeq != seq || c.Epoch != epoch {
			t.Fatalf("%s: cursor %d epoch %d (%v, %v), want %d epoch %d", what, c.AckSeq, c.Epoch, found, err, seq, epoch)
		}
	}
	save(40, 100)
	save(30, 100)
	check("lower in the same epoch", 40, 100)
	save(45, 0)
	check("epoch 0 counts as the row's", 45, 100)
	save(3, 200)
	check("a newer epoch", 3, 200)
	save(90, 100)
	check("an older epoch flushed late", 3, 200)
	save(5, 200)
	check("higher in the new epoch", 5, 200)
}

// An archive batch read from a stream that was replaced since (another
// epoch recorded) is refused, and recording an epoch whose start is at or
// below the archive mark (a batch of the lost stream committed after the
// start was chosen) fails: the stream must be numbered above it again.
func TestArchiveEpochGuards(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	if err := st.RecordEpoch(ctx, 0, 100, 0); err != nil {
		t.Fatal(err)
	}
	e := []store.ArchivedEntry{{UID: 1, Seq: 1, MsgID: 11, ConvID: 1, ConvSeq: 1, Kind: 1}}
	if err := st.ArchiveBatchOf(ctx, 0, 100, e, nil, 20); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordEpoch(ctx, 0, 200, 21); err != nil {
		t.Fatal(err)
	}
	e2 := []store.ArchivedEntry{{UID: 1, Seq: 21, MsgID: 12, ConvID: 1, ConvSeq: 2, Kind: 1}}
	if err := st.ArchiveBatchOf(ctx, 0, 100, e2, nil, 40); !errors.Is(err, store.ErrEpochChanged) {
		t.Fatalf("a batch of the replaced stream: %v, want ErrEpochChanged", err)
	}
	recs, err := st.ArchiveEpochs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.Archived != 20 || r.StreamEpoch != 200 || r.Start != 21 {
		t.Fatalf("record %+v, want mark 20, epoch 200, start 21", r)
	}
	if err := st.ArchiveBatchOf(ctx, 0, 200, e2, nil, 40); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordEpoch(ctx, 0, 300, 31); !errors.Is(err, store.ErrMarkMoved) {
		t.Fatalf("an epoch starting below the mark: %v, want ErrMarkMoved", err)
	}
}
