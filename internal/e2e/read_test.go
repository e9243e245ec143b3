package e2e

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

func TestOfflineReceiverGetsEverythingOnceInOrder(t *testing.T) {
	for _, tr := range []string{"ws", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			n := testnode.AllInOne(t)
			conv := createConv(t, n, false, 1, 2)
			ids := sendN(t, n, 1, conv, 1000, "off")
			d := connectDevice(t, n, 2, "phone", deviceOpts{transport: tr})
			got := d.waitFor(1000, 60*time.Second)
			checkOrderedOnce(t, d.quiet(300*time.Millisecond), ids)
			for i, m := range got {
				if m.MsgID != ids[i] {
					t.Fatalf("message %d is %d, want %d (send order)", i, m.MsgID, ids[i])
				}
			}
			d.close()
			// A second connect gets nothing old.
			d2 := connectDevice(t, n, 2, "phone", deviceOpts{transport: tr})
			if got := d2.quiet(time.Second); len(got) != 0 {
				t.Fatalf("second connect got %d old messages (first seq %d)", len(got), got[0].Seq)
			}
		})
	}
}
