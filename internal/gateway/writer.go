package gateway

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// writeLoop owns the socket's write side while there is something to
// write. Each round it takes everything waiting on the live lane (control
// frames, live entries: the latter coalesced into one Batch frame), then
// at most one backfill page, and writes all of it with one syscall under a
// deadline. Live traffic is therefore never behind more than one page.
// With both lanes empty it gives its buffers back and ends; kick starts
// the next one.
func (c *Conn) writeLoop() {
	w := getWriter(c)
	defer putWriter(w)
	for {
		if c.isClosed() {
			return
		}
		w.items = c.takeOut(w.items[:0])
		for _, it := range w.items {
			if !w.closing {
				w.add(it)
			}
		}
		clear(w.items)
		if !w.closing { // a fatal error is the connection's last frame
			select {
			case pg := <-c.backfill:
				w.addPage(pg)
			default:
			}
		}
		if len(w.buf) == 0 && len(w.raws) == 0 && !w.closing {
			// Nothing to write: stop, unless something came in between.
			c.writing.Store(false)
			if (c.outEmpty() && len(c.backfill) == 0) || !c.writing.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		if err := w.flush(); err != nil || w.closing {
			if err == nil && w.linger {
				c.linger()
			}
			c.close()
			return
		}
	}
}

// writer is a connection's write state, pooled: nothing is allocated per
// delivered message once its buffers have grown, and an idle connection
// holds none.
type writer struct {
	c       *Conn
	buf     []byte
	scratch []byte
	raws    [][]byte
	seqs    []uint64
	items   []outItem
	closing bool
	linger  bool // with closing: Conn.linger before the close
}

var writerPool = sync.Pool{New: func() any { return new(writer) }}

func getWriter(c *Conn) *writer {
	w := writerPool.Get().(*writer)
	w.c = c
	return w
}

func putWriter(w *writer) {
	if cap(w.buf) > 256<<10 {
		w.buf = nil
	}
	clear(w.raws)
	w.buf, w.raws, w.seqs, w.items = w.buf[:0], w.raws[:0], w.seqs[:0], w.items[:0]
	w.c, w.closing, w.linger = nil, false, false
	writerPool.Put(w)
}

func (w *writer) add(it outItem) {
	if it.live != nil {
		w.raws = append(w.raws, it.live)
		w.seqs = append(w.seqs, it.liveSeq)
		return
	}
	w.endLive()
	var err error
	w.buf, w.scratch, err = w.c.encode(w.buf, w.scratch, it)
	if err != nil {
		w.c.logger().Error("encode frame", zap.Error(err))
	}
	if it.close && !w.closing {
		w.linger = it.linger
	}
	w.closing = w.closing || it.close
}

// endLive turns the live entries gathered so far into one Batch frame.
func (w *writer) endLive() {
	if len(w.raws) == 0 {
		return
	}
	h := wire.BatchHeader{Lane: pb.Lane_LIVE}
	if s := w.c.session(); s != nil {
		h.BatchID = s.liveBatch(w.seqs)
	}
	w.appendBatch(&h, nil, w.raws)
	w.c.g.metrics.liveMessages.Add(float64(len(w.raws)))
	clear(w.raws)
	w.raws, w.seqs = w.raws[:0], w.seqs[:0]
}

func (w *writer) addPage(pg *page) {
	w.endLive()
	w.appendBatch(&pg.hdr, pg.msgs, nil)
	putPage(pg)
}

// appendBatch appends one Batch frame: msgs (from a page) followed by raws
// (live entries, already encoded), in binary straight into the write
// buffer, or in the JSON form for a JSON client.
func (w *writer) appendBatch(h *wire.BatchHeader, msgs []wire.Message, raws [][]byte) {
	c := w.c
	if c.json {
		w.appendJSONBatch(h, msgs, raws)
		return
	}
	n := wire.BatchFrameSize(h, msgs, raws)
	w.buf = c.tr.appendHeader(w.buf, n, false)
	w.buf = wire.AppendBatchFrame(w.buf, h, msgs, raws)
}

// appendJSONBatch makes the JSON form from the binary frame itself, so
// that the two forms cannot drift apart: whatever the binary encoding
// carries (an event, the newest mark) the JSON form carries too. It
// allocates; JSON is for debugging, not for the hot path.
func (w *writer) appendJSONBatch(h *wire.BatchHeader, msgs []wire.Message, raws [][]byte) {
	w.scratch = wire.AppendBatchFrame(w.scratch[:0], h, msgs, raws)
	_, m, err := wire.Decode(w.scratch)
	if err == nil {
		w.buf, w.scratch, err = w.c.encode(w.buf, w.scratch, outItem{msg: m})
	}
	if err != nil {
		w.c.logger().Error("encode JSON batch", zap.Error(err))
	}
}

func (w *writer) flush() error {
	w.endLive()
	c := w.c
	if w.closing {
		if cf := c.tr.closeFrame("closing"); cf != nil {
			w.buf = append(w.buf, cf...)
		}
	}
	if len(w.buf) == 0 {
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.g.opts.WriteTimeout))
	_, err := c.nc.Write(w.buf)
	if err != nil && isTimeout(err) {
		c.g.metrics.timeouts.Inc()
	}
	if cap(w.buf) > 1<<20 { // do not keep a burst's buffer forever
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// encode appends one item in transport framing to buf.
func (c *Conn) encode(buf, scratch []byte, it outItem) ([]byte, []byte, error) {
	if it.raw != nil {
		return append(buf, it.raw...), scratch, nil
	}
	if it.msg == nil {
		return buf, scratch, nil
	}
	var err error
	if c.json {
		scratch, err = wire.MarshalJSONFrame(it.msg)
	} else {
		scratch, err = wire.AppendFrame(scratch[:0], it.msg)
	}
	if err != nil {
		return buf, scratch, err
	}
	buf = c.tr.appendHeader(buf, len(scratch), c.json)
	return append(buf, scratch...), scratch, nil
}
