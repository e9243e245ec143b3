package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/gateway/ledger"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Backfill pages come from two sources: the Postgres archive (older
// ranges, one indexed read, the bodies from the gateway's cache) and the
// device consumer (the tail the archiver has not copied yet). Both open a page the same way
// (openPage) and hand it over the same way (sendPage).

// page is one backfill batch on its way to the writer (pooled).
type page struct {
	hdr     wire.BatchHeader
	msgs    []wire.Message
	expired []wire.ExpiredRange // the retention horizons of the page's conversations
	entries []ledger.Entry      // what the ledger records of msgs
	idx     []int
	convs   []int64
}

var pagePool = sync.Pool{New: func() any { return new(page) }}

func getPage() *page { return pagePool.Get().(*page) }

func putPage(pg *page) {
	// Do not pin bodies: up to the capacity, since sendPage shortens the
	// slice by what went ahead on the live lane.
	all := pg.msgs[:cap(pg.msgs)]
	for i := range all {
		all[i].Text = ""
	}
	pg.msgs, pg.entries, pg.idx, pg.expired, pg.convs = pg.msgs[:0], pg.entries[:0], pg.idx[:0], pg.expired[:0], pg.convs[:0]
	pg.hdr = wire.BatchHeader{}
	pagePool.Put(pg)
}

// openPage is the opening every page read shares: the session's first
// page is small (firstPageSize), the backfill budget is taken for it, and
// a slot of the gateway's page gate (first pages ahead of later ones). It
// returns the page's size, at most limit, and the release of the slot.
func (s *session) openPage(ctx context.Context, limit int) (int, func(), error) {
	s.mu.Lock()
	first := s.led.PagesSent() == 0
	s.mu.Unlock()
	n := limit
	if first {
		n = min(n, firstPageSize)
	}
	if err := s.budget.wait(ctx, n); err != nil {
		return 0, nil, err
	}
	release, err := s.g.pageGate.acquire(ctx, first)
	if err != nil {
		return 0, nil, err
	}
	return n, release, nil
}

// archivePage hands over the next page of what the archive holds.
func (s *session) archivePage(ctx context.Context, covered uint64, info partInfo) (bool, error) {
	n, release, err := s.openPage(ctx, s.prof.pageSize)
	if err != nil {
		return false, err
	}
	defer release()
	pg := getPage()
	t0 := time.Now()
	pg.msgs, pg.expired, err = s.g.st.ArchivePage(ctx, pg.msgs[:0], pg.expired[:0], s.uid, covered, info.archived, n)
	if err == nil {
		err = s.archiveBodies(ctx, pg)
	}
	if err != nil {
		putPage(pg)
		return false, err
	}
	s.g.metrics.pageRead.WithLabelValues(pageArchive).Observe(time.Since(t0).Seconds())
	s.g.metrics.pages.WithLabelValues(pageArchive).Inc()
	upTo := info.archived
	if len(pg.msgs) == n {
		upTo = pg.msgs[n-1].Seq
	}
	return s.sendPage(pg, covered, upTo, true, true)
}

// positionTail makes sure the consumer delivers from covered+1 (or from
// the cursor, from where entries up to covered are read again and
// skipped). It reports false when the tail must wait for confirmations.
func (s *session) positionTail(ctx context.Context, covered, cursor uint64) (bool, error) {
	s.mu.Lock()
	at, inFlight := s.tail.at, s.led.Pages()
	s.mu.Unlock()
	if at == covered+1 {
		return true, nil
	}
	// The consumer may only be put at a confirmed position: at the cursor.
	// While backfill pages are out (the end of an archive drain), wait for
	// their confirmation instead: it brings the cursor to covered. Also
	// wait when the stretch is long (a live entry with much traffic after
	// it).
	if cursor < covered && (inFlight > 0 || covered-cursor > uint64(s.g.opts.TailScan)) {
		// Nothing more comes before the device confirms. If what it owes
		// is not backfill (a live entry it holds back, waiting for earlier
		// messages of its conversation), say so (has_more=false): it stops
		// waiting and confirms.
		if inFlight == 0 {
			s.finish()
		}
		return false, nil
	}
	if at == cursor+1 {
		return true, nil
	}
	left, err := s.cons.resetTo(ctx, cursor+1)
	if err != nil {
		return false, s.recover(ctx, err)
	}
	s.mu.Lock()
	s.tail.placed(cursor, left)
	s.mu.Unlock()
	return true, nil
}

// tailPage hands over the next page of the consumer's tail.
//
// A device that is up to date gets every new entry on the live lane; its
// cursor still needs the consumer to deliver (and be acknowledged up to)
// those entries. Such a tail read is a covering read (covering): it takes
// no page slot and no backfill budget, and reads no bodies (the device has
// them), so in a login storm the live devices' confirmations do not queue
// with the storm's catch-up pages for the gateway's page gate (measured:
// ~46% of the slot time in inboxbench live went to them). The guess is
// checked on what the fetch brings: an entry the live lane did not send
// (dropped, deferred, or written without a live announcement) makes it a
// normal page read, with the slot, the budget and the bodies.
func (s *session) tailPage(ctx context.Context) (bool, error) {
	left, cover, err := s.tailPending(ctx)
	if err != nil {
		return false, err
	}
	if left == 0 {
		done, err := s.caughtUp(ctx)
		if err != nil {
			return false, err
		}
		if done {
			s.finish()
			return false, nil
		}
		left = 1 // there is more than NumPending said: read it
	}
	n := int(min(left, uint64(s.prof.pageSize)))
	release := func() {}
	if !cover {
		var err error
		if n, release, err = s.openPage(ctx, n); err != nil {
			return false, err
		}
	}
	defer func() { release() }()
	t0 := time.Now()
	f, err := s.fetchTail(ctx, n, left)
	if err != nil {
		return false, err
	}
	if f.orphans {
		s.g.metrics.orphans.Inc()
		s.mu.Lock()
		s.tail.orphaned()
		s.mu.Unlock()
		putPage(f.pg)
		return true, nil // the next step repositions the consumer at the cursor
	}
	if trimmed, err := s.trimmedUnder(ctx, f.from); err != nil || trimmed {
		putPage(f.pg)
		return trimmed, err
	}
	if len(f.delivered) == 0 {
		// NumPending said there was more, the fetch brought nothing (it
		// timed out, or the consumer is at max_ack_pending): try again
		// shortly rather than wait for a poke that may not come.
		s.mu.Lock()
		s.tail.stale()
		s.mu.Unlock()
		putPage(f.pg)
		return false, retry(fmt.Sprintf("the consumer's pending count says %d, a fetch brought none", left))
	}
	s.mu.Lock()
	s.tail.fetched(f.delivered, f.last, f.left, f.nextDseq)
	unsent := 0 // delivered entries the live lane did not send
	for _, d := range f.delivered {
		if !s.led.SentAhead(d.seq) {
			unsent++
		}
	}
	s.mu.Unlock()
	if cover && unsent > 0 {
		// The race: an entry the device does not have. Read as a normal
		// page (the deliveries are recorded: if the slot never comes, the
		// next step puts the consumer back at the cursor).
		s.g.metrics.coverFallbacks.Inc()
		cover = false
		_, rel, err := s.openPage(ctx, unsent)
		if err != nil {
			putPage(f.pg)
			return false, err
		}
		release = rel
	}
	if cover {
		s.g.metrics.pages.WithLabelValues(pageCover).Inc()
		s.g.metrics.pageRead.WithLabelValues(pageCover).Observe(time.Since(t0).Seconds())
	} else {
		s.g.metrics.pages.WithLabelValues(pageTail).Inc()
		// Bodies of what the device does not have from the live lane.
		if err := s.fillBodies(ctx, f.pg); err != nil {
			putPage(f.pg)
			return false, err
		}
		s.g.metrics.pageRead.WithLabelValues(pageTail).Observe(time.Since(t0).Seconds())
	}
	more, err := s.sendPage(f.pg, f.from, f.last, f.left > 0, !cover)
	return more || f.left > 0, err
}

// trimmedUnder reports whether the stream lost entries after from while a
// tail fetch read from there: the syncer's trimmer purges archived entries
// older than the hot window, and a purge moves the consumer past them
// without a trace in what it delivers, so a page read across it would jump
// them. Only a stretch the archive holds can be trimmed (the trimmer's
// bound is an archive mark the gateway has seen), so only such a read asks
// the stream. Then the fetch is dropped and the stretch is read from the
// archive.
func (s *session) trimmedUnder(ctx context.Context, from uint64) (bool, error) {
	info := s.g.parts.get(s.p)
	if !s.sameEpoch(info) {
		return false, retry("the cached archive mark is of another stream epoch") // epoch.go: read again
	}
	if from >= info.archived {
		return false, nil
	}
	first, err := s.cons.firstSeq(ctx)
	if err != nil {
		return false, err
	}
	if from+1 >= first {
		return false, nil
	}
	s.g.metrics.trimmedUnderRead.Inc()
	s.mu.Lock()
	s.tail.orphaned() // put back at the cursor before it reads the tail again
	s.archiving = true
	s.mu.Unlock()
	return true, nil
}

// tailPending returns the consumer's NumPending: as the last fetch left it
// when that is still current, else from the server; and whether the read
// of that tail is a covering read (tailPage): the consumer delivers after
// covered, and no more entries are pending than the live lane sent ahead
// of it. Then it needs no NumPending from the server either: a stale
// count after live entries (acceptLiveLocked) is taken to be what went
// live, and the fetch checks it (an entry that did not go live makes it a
// normal page; more entries than that leave f.left > 0).
func (s *session) tailPending(ctx context.Context) (left uint64, cover bool, err error) {
	s.mu.Lock()
	left, known := s.tail.left, s.tail.known
	ahead := uint64(s.led.Ahead())
	atCovered := s.tail.at == s.led.Covered()+1
	s.mu.Unlock()
	if atCovered && ahead > 0 && (!known || left <= ahead) {
		if !known {
			left = ahead
		}
		return left, left > 0, nil
	}
	if known {
		return left, false, nil
	}
	ci, err := s.cons.info(ctx)
	if err != nil {
		return 0, false, s.recover(ctx, err)
	}
	return ci.NumPending, false, nil
}

// caughtUp reports whether the tail is empty when NumPending says so.
// NumPending has been seen to lag behind the stream under faults: before
// calling the device caught up, the stream is asked for the inbox's newest
// entry.
func (s *session) caughtUp(ctx context.Context) (bool, error) {
	s.mu.Lock()
	verified, covered := s.tail.verified, s.led.Covered()
	s.mu.Unlock()
	if verified {
		return true, nil
	}
	last, err := s.cons.lastEntrySeq(ctx)
	if err != nil {
		return false, err
	}
	verified = last <= covered
	s.mu.Lock()
	s.tail.verified = verified
	s.mu.Unlock()
	return verified, nil
}

// tailFetch is what one fetch from the consumer brought.
type tailFetch struct {
	pg        *page
	delivered []tailMsg
	from      uint64 // covered when the fetch started: the page covers (from, last]
	last      uint64 // the newest stream seq delivered (from when none)
	nextDseq  uint64 // the consumer sequence the next delivery must have
	left      uint64 // NumPending after the last delivery
	orphans   bool   // deliveries went to a pull request nobody read: drop this fetch
}

// fetchTail fetches up to n deliveries and decodes them into a page.
func (s *session) fetchTail(ctx context.Context, n int, left uint64) (tailFetch, error) {
	batch, err := s.cons.fetch(ctx, n)
	if err != nil && len(batch) == 0 {
		if ctx.Err() != nil {
			return tailFetch{}, ctx.Err()
		}
		return tailFetch{}, s.recover(ctx, err)
	}
	s.mu.Lock()
	f := tailFetch{pg: getPage(), from: s.led.Covered(), nextDseq: s.tail.nextDseq, left: left}
	s.mu.Unlock()
	f.last = f.from
	for _, m := range batch {
		// Every delivery of the consumer has the next consumer sequence. A
		// jump means deliveries went to a pull request nobody read (an
		// expiring fetch, a replaced session): those entries count as
		// delivered and an ack above them would confirm them. Never: drop
		// this fetch and put the consumer back at the cursor.
		if f.nextDseq != 0 && m.consumerSeq != f.nextDseq {
			f.orphans = true
		}
		f.nextDseq = m.consumerSeq + 1
		if f.orphans {
			continue
		}
		f.left = m.pending
		if m.streamSeq <= f.last {
			continue // a redelivery of something already covered
		}
		f.last = m.streamSeq
		f.delivered = append(f.delivered, tailMsg{f.last, m.reply})
		e, err := streams.DecodeEntry(m.data)
		if err != nil {
			s.g.log.Error("undecodable inbox entry", zap.String("subject", m.subject), zap.Uint64("seq", f.last), zap.Error(err))
			continue
		}
		f.pg.msgs = append(f.pg.msgs, e.Wire(f.last))
	}
	return f, nil
}

// fillBodies sets the text of the page's messages that the device does not
// have from the live lane (the live lane carries bodies), and the page's
// expired ranges. A body retention removed (the stream still holds the
// entry) marks its message expired: a page never hands over an entry
// pointing at a body that is gone as if it were an empty message. The
// ranges matter when the backfill passed over entries that are gone
// altogether (an archive page that found none of a range retention
// dropped): the client learns from this page that it waits for nothing.
func (s *session) fillBodies(ctx context.Context, pg *page) error {
	s.mu.Lock()
	need, convs := pg.idx[:0], pg.convs[:0]
	for i := range pg.msgs {
		m := &pg.msgs[i]
		if m.EventType != 0 {
			continue
		}
		if !slices.Contains(convs, m.ConvID) {
			convs = append(convs, m.ConvID)
		}
		if !s.led.SentAhead(m.Seq) {
			need = append(need, i)
		}
	}
	s.mu.Unlock()
	pg.idx, pg.convs = need, convs
	horizons, err := s.g.bodies.fill(ctx, len(need),
		func(i int) int64 { return pg.msgs[need[i]].MsgID },
		func(i int, b store.Body, found bool) {
			m := &pg.msgs[need[i]]
			m.Text, m.Expired = b.Text, !found
			if b.Kind == wire.KindDeleted {
				m.Kind = b.Kind // a deleted user's message: a tombstone, whatever its entry says
			}
		},
		convs)
	for _, c := range convs { // in page order: deterministic frames
		if h := horizons[c]; h > 0 {
			pg.expired = store.AddExpired(pg.expired, c, h)
		}
	}
	// At or below its conversation's horizon a body is gone or about to
	// go (horizons are recorded before a range is dropped), even if this
	// gateway's cache still has it: expired, as for every device.
	for _, i := range need {
		if m := &pg.msgs[i]; m.ConvSeq <= horizons[m.ConvID] {
			m.Text, m.Expired = "", true
		}
	}
	return err
}

// archiveBodies completes the messages of an archive page from the
// gateway's body cache, loading the missing bodies in one round trip (none
// when every body is cached: the page's query brought the horizons).
func (s *session) archiveBodies(ctx context.Context, pg *page) error {
	need := pg.idx[:0]
	for i := range pg.msgs {
		if store.NeedsBody(&pg.msgs[i]) {
			need = append(need, i)
		}
	}
	pg.idx = need
	_, err := s.g.bodies.fill(ctx, len(need),
		func(i int) int64 { return pg.msgs[need[i]].MsgID },
		func(i int, b store.Body, found bool) { store.SetBody(&pg.msgs[need[i]], b, found) },
		nil)
	return err
}

// sendPage records a page covering (from, upTo] in the ledger (entries
// already sent ahead are dropped from it) and queues it. It reports
// whether the pump should go on. A page without bodies (a covering read)
// must hold nothing else: if the ledger forgot what went ahead meanwhile
// (an ack timeout took it back), it is read again, with the bodies.
func (s *session) sendPage(pg *page, from, upTo uint64, hasMore, bodies bool) (bool, error) {
	s.mu.Lock()
	again := s.closed || s.led.Covered() != from
	if !again && !bodies {
		for i := range pg.msgs {
			if m := &pg.msgs[i]; m.Seq > from && m.Seq <= upTo && !s.led.SentAhead(m.Seq) {
				again = true
				s.tail.orphaned() // the consumer delivered past covered: put it back at the cursor
				break
			}
		}
	}
	if again {
		// Covered moved meanwhile (an ack_range): read again from there.
		closed := s.closed
		s.mu.Unlock()
		putPage(pg)
		return !closed, nil
	}
	kept := pg.msgs[:0]
	pg.entries = pg.entries[:0]
	for _, m := range pg.msgs {
		if m.Seq <= from || m.Seq > upTo || s.led.SentAhead(m.Seq) {
			continue
		}
		kept = append(kept, m)
		pg.entries = append(pg.entries, ledgerEntry(&m))
	}
	pg.msgs = kept
	id, moved, _ := s.led.Page(from, upTo, pg.entries, time.Now())
	if moved {
		s.cursorMovedLocked()
	}
	if len(pg.msgs) == 0 {
		// Nothing of the device's in this range (or all of it went
		// ahead): coverage alone moved the cursor.
		s.mu.Unlock()
		putPage(pg)
		return true, nil
	}
	s.needFinal = hasMore
	s.armAckTimerLocked(s.g.opts.AckTimeout)
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: id, HasMore: hasMore, Expired: pg.expired}
	s.mu.Unlock()
	if err := s.handOver(pg); err != nil {
		return false, err
	}
	return true, nil
}

// handOver queues a recorded page for the writer.
func (s *session) handOver(pg *page) error {
	n := len(pg.msgs) // pg belongs to the writer once queued
	if !s.c.enqueueBackfill(pg) {
		return errors.New("connection closed")
	}
	s.g.metrics.backfillMessages.Add(float64(n))
	return nil
}

// ledgerEntry is what the ledger keeps of a message handed over.
func ledgerEntry(m *wire.Message) ledger.Entry {
	return ledger.Entry{Seq: m.Seq, Message: m.EventType == 0, Info: ledger.Info{Conv: m.ConvID, ConvSeq: m.ConvSeq, Sender: m.SenderUID}}
}

// finish tells the device that no more backfill comes for now (the last
// page said more): the backfill is done, or waits for confirmations.
func (s *session) finish() {
	s.mu.Lock()
	need := s.needFinal
	s.needFinal = false
	s.mu.Unlock()
	if need {
		pg := getPage()
		pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL}
		s.c.enqueueBackfill(pg)
	}
}

// sendNewest sends the newest page of the device's backlog first (offline
// too long): its entries are treated like live ones, so the background
// drain from the cursor skips them; the cursor still moves only over what
// is confirmed.
func (s *session) sendNewest(ctx context.Context) error {
	arch, err := s.g.st.ArchiveProgress(ctx) // fresh: the cached mark may be a refresh behind
	if err != nil {
		return err
	}
	s.mu.Lock()
	cursor := s.led.Cursor()
	s.mu.Unlock()
	pg := getPage()
	pg.msgs, pg.expired, err = s.g.st.NewestPage(ctx, pg.msgs[:0], pg.expired[:0], s.uid, cursor, arch[s.p], s.prof.pageSize)
	if err == nil {
		err = s.archiveBodies(ctx, pg)
	}
	if err != nil || len(pg.msgs) == 0 {
		putPage(pg)
		return err
	}
	pg.entries = pg.entries[:0]
	for i := range pg.msgs {
		pg.entries = append(pg.entries, ledgerEntry(&pg.msgs[i]))
	}
	s.mu.Lock()
	id := s.led.Newest(pg.entries, time.Now())
	s.needFinal = true
	s.armAckTimerLocked(s.g.opts.AckTimeout)
	// Newest: the page is ahead of conv_seq order (the drain brings the
	// older entries after it); a client must not take its gaps for holes.
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: id, HasMore: true, Newest: true, Expired: pg.expired}
	s.mu.Unlock()
	return s.handOver(pg)
}
