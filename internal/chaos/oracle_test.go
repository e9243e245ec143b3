package chaos

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// report runs the oracle and prints the run's figures.
func (w *world) report() {
	t := w.t
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	stored := map[int64]*sent{}
	for _, s := range w.sent {
		if s.msgID != 0 {
			stored[s.msgID] = s
		}
	}
	var lost, dups, wireDups, orderViolations, phantoms, deliveries, tooLong, newest int
	for _, d := range w.devices {
		d.mu.Lock()
		dups += d.dups
		wireDups += d.wireDups
		tooLong += d.tooLong
		newest += d.newest
		for id := range d.stored {
			if _, ok := stored[id]; !ok {
				phantoms++
			}
		}
		for _, s := range stored {
			if slices.Contains(w.members(s.conv), d.uid) {
				deliveries++
				if _, ok := d.stored[s.msgID]; !ok {
					lost++
					if lost <= 5 {
						t.Errorf("lost: %s (msg %d, conv %d seq %d) never reached %d/%s", s.cmid, s.msgID, s.conv, s.convSeq, d.uid, d.name)
					}
				}
			}
		}
		// The newest page of an offline-too-long login is ahead of
		// conv_seq order by design (it counts for loss and duplicates
		// above); everything else comes in conv_seq order, the in-order
		// drain skipping what the newest page handed over.
		for conv, all := range d.order {
			var hs []handed
			for _, h := range all {
				if h.lane != "newest" {
					hs = append(hs, h)
				}
			}
			for i := 1; i < len(hs); i++ {
				if hs[i].convSeq <= hs[i-1].convSeq {
					orderViolations++
					if orderViolations <= 5 {
						a, b := hs[i-1], hs[i]
						t.Errorf("order: device %d/%s got conv %d seq %d after %d (%s lane seq %d app start %d at %s, then %s lane seq %d app start %d at %s)",
							d.uid, d.name, conv, b.convSeq, a.convSeq, a.lane, a.seq, a.app, a.at.Format("15:04:05.000"), b.lane, b.seq, b.app, b.at.Format("15:04:05.000"))
					}
				}
			}
		}
		d.mu.Unlock()
	}
	// conv_seq dense per conversation.
	perConv := map[int64][]int64{}
	for _, s := range stored {
		perConv[s.conv] = append(perConv[s.conv], s.convSeq)
	}
	gaps := 0
	for conv, seqs := range perConv {
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for i, s := range seqs {
			if s != int64(i+1) {
				gaps++
				if gaps <= 3 {
					t.Errorf("gap: conversation %d: the %dth STORED conv_seq is %d (of %d stored; a send the run never saw answered counts as not stored)", conv, i+1, s, len(seqs))
				}
				break
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: %d messages stored, %d devices, %d deliveries checked\n", len(stored), len(w.devices), deliveries)
	kinds := make([]string, 0, len(w.faults))
	for k := range w.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		total += w.faults[k]
		rs := w.recover[k]
		var sum, mx time.Duration
		for _, r := range rs {
			sum += r
			mx = max(mx, r)
		}
		avg := time.Duration(0)
		if len(rs) > 0 {
			avg = sum / time.Duration(len(rs))
		}
		if len(rs) == 0 {
			fmt.Fprintf(&b, "  fault %-18s x%-4d (workload event: no recovery to measure)\n", k, w.faults[k])
			continue
		}
		fmt.Fprintf(&b, "  fault %-18s x%-4d recovery avg %-8s max %s\n", k, w.faults[k], avg.Round(time.Millisecond), mx.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  faults injected: %d (process and network: %d; the rest workload events)\n", total, total-w.faults["client-vanish"]-w.faults["sender-vanish"])
	fmt.Fprintf(&b, "  lost: %d   duplicates on the wire (dropped by the client): %d   duplicates after dedupe: %d\n", lost, wireDups, dups)
	fmt.Fprintf(&b, "  order violations: %d   conversations with conv_seq gaps: %d   messages never sent: %d\n", orderViolations, gaps, phantoms)
	fmt.Fprintf(&b, "  devices incomplete after quiescence until reconnected (stuck sessions): %d\n", w.stuck)
	if c, n := w.cuts, w.faults["power-cut"]+w.faults["cluster-power-cut"]; n > 0 {
		fmt.Fprintf(&b, "  power cuts: %d; unsynced NATS store pages dropped %d (%d bytes), kept by the modelled writeback %d, files left torn %d; INBOX streams fenced %d\n",
			n, c.PagesDropped, c.BytesDropped, c.PagesKept, c.TornFiles, w.h.fences())
	}
	fmt.Fprintf(&b, "  logins offline too long (--offline-threshold %d): %d   messages handed over on the newest lane: %d\n", w.pl.offlineThreshold, tooLong, newest)
	starts := make([]string, len(w.h.procs))
	for i, p := range w.h.procs {
		starts[i] = fmt.Sprintf("%s %d", p.name, p.starts)
	}
	fmt.Fprintf(&b, "  process starts: %s\n", strings.Join(starts, ", "))
	if w.cluster != nil {
		w.cluster.report(&b)
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("INBOXD_CHAOS_REPORT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
	if lost > 0 || orderViolations > 0 || phantoms > 0 || gaps > 0 || dups > 0 || w.stuck > 0 {
		t.Fatalf("guarantees broken: lost %d, order %d, phantom %d, gaps %d, dup after dedupe %d, stuck sessions %d", lost, orderViolations, phantoms, gaps, dups, w.stuck)
	}
	// The run must have been what it claims.
	var missing []string
	for _, k := range w.kinds {
		if w.faults[k] == 0 {
			missing = append(missing, fmt.Sprintf("%s (%v)", k, w.failed[k]))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("faults never injected: %v", missing)
	}
	if tooLong == 0 || newest == 0 {
		t.Fatalf("no device came back offline too long (%d logins, %d newest-lane messages): the oracle did not cover that mode", tooLong, newest)
	}
}
