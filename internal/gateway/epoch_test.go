package gateway

import (
	"errors"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
)

// A mirrored cursor is a position in the current stream as is when it was
// confirmed in it (or before epochs were recorded, in the installation's
// first stream); one of another epoch is trusted up to the epoch's start -
// 1; until the syncer recorded the start, such a login waits.
func TestMirrorInEpoch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mirror store.DeviceCursor
		ep     streamEpoch
		want   uint64
		err    error
	}{
		{"same epoch", store.DeviceCursor{AckSeq: 90, Epoch: 5}, streamEpoch{epoch: 5, start: 41}, 90, nil},
		{"legacy row, first stream", store.DeviceCursor{AckSeq: 90}, streamEpoch{epoch: 5, start: 1}, 90, nil},
		{"legacy row, recreated stream", store.DeviceCursor{AckSeq: 90}, streamEpoch{epoch: 5, start: 41}, 40, nil},
		{"older epoch above the start", store.DeviceCursor{AckSeq: 90, Epoch: 4}, streamEpoch{epoch: 5, start: 41}, 40, nil},
		{"older epoch below the start", store.DeviceCursor{AckSeq: 30, Epoch: 4}, streamEpoch{epoch: 5, start: 41}, 30, nil},
		{"start not recorded yet", store.DeviceCursor{AckSeq: 30, Epoch: 4}, streamEpoch{epoch: 5}, 30, errEpochPending},
	} {
		got, err := mirrorIn(tc.mirror, tc.ep)
		if !errors.Is(err, tc.err) || (err == nil && (got.AckSeq != tc.want || got.Epoch != tc.ep.epoch)) {
			t.Errorf("%s: %d epoch %d, %v; want %d epoch %d, %v", tc.name, got.AckSeq, got.Epoch, err, tc.want, tc.ep.epoch, tc.err)
		}
	}
}
