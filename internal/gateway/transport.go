package gateway

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/gobwas/ws"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// transport is the framing of one connection: raw TCP with a length prefix,
// or WebSocket with one frame per message. Both carry the same frames.
type transport interface {
	// readFrame returns the next frame, valid until the next call, and
	// whether it is the JSON form (WebSocket text). It answers WebSocket
	// pings itself through ctl.
	readFrame() (frame []byte, text bool, err error)
	// appendHeader appends the transport header of a frame of n bytes.
	appendHeader(dst []byte, n int, text bool) []byte
	// headerRoom is the most bytes appendHeader writes.
	headerRoom() int
	// closeFrame returns the bytes to send before closing, if any.
	closeFrame(reason string) []byte
	// release gives back the read buffers when nothing is buffered (the
	// connection is about to park) and reports whether it did; the next
	// readFrame takes a buffer again.
	release() bool
	// buffered is the reader frames are read from (a waiting login
	// peeks at it to notice its peer is gone); it takes one if the
	// connection had given its reader back.
	buffered() *bufio.Reader
}

// readers are the connections' read buffers, taken while a reader runs.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

// reader returns r, or a pooled reader on src when r was given back.
func reader(r *bufio.Reader, src io.Reader) *bufio.Reader {
	if r != nil {
		return r
	}
	r = readers.Get().(*bufio.Reader)
	r.Reset(src)
	return r
}

// releaseReader gives r back when it holds nothing.
func releaseReader(r **bufio.Reader) bool {
	if *r == nil {
		return true
	}
	if (*r).Buffered() > 0 {
		return false
	}
	(*r).Reset(nil)
	readers.Put(*r)
	*r = nil
	return true
}

// tcpTransport: [u32 big-endian length][frame].
type tcpTransport struct {
	src io.Reader
	r   *bufio.Reader // nil while parked
	buf []byte
	max int
}

func (t *tcpTransport) readFrame() ([]byte, bool, error) {
	t.r = reader(t.r, t.src)
	f, err := wire.ReadTCPFrame(t.r, t.buf, t.max)
	if f != nil && cap(f) <= t.max {
		t.buf = f[:0]
	}
	return f, false, err
}

func (t *tcpTransport) appendHeader(dst []byte, n int, _ bool) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func (t *tcpTransport) release() bool {
	if !releaseReader(&t.r) {
		return false
	}
	t.buf = nil // as large as the largest frame read: not kept while idle
	return true
}

func (t *tcpTransport) headerRoom() int { return wire.LengthPrefix }
func (t *tcpTransport) buffered() *bufio.Reader {
	t.r = reader(t.r, t.src)
	return t.r
}
func (t *tcpTransport) closeFrame(string) []byte { return nil }

// wsTransport: RFC 6455 frames after a gobwas/ws zero-copy upgrade. Client
// frames are masked; server frames are not.
type wsTransport struct {
	src  io.Reader
	r    *bufio.Reader // nil while parked
	buf  []byte
	max  int
	ctl  func(raw []byte) // queues a control frame (pong) for the writer
	hbuf [ws.MaxHeaderSize - 2]byte
}

var errWSClosed = errors.New("websocket closed by peer")

func (t *wsTransport) readFrame() ([]byte, bool, error) {
	t.r = reader(t.r, t.src)
	msg := t.buf[:0]
	var text, started bool
	for {
		h, err := ws.ReadHeaderBuffer(t.r, t.hbuf[:])
		if err != nil {
			return nil, false, err
		}
		if !h.Masked {
			return nil, false, wire.Errorf(pb.ErrorCode_BAD_FRAME, "websocket client frames must be masked")
		}
		if h.Rsv != 0 {
			return nil, false, wire.Errorf(pb.ErrorCode_BAD_FRAME, "websocket extensions are not negotiated")
		}
		if h.OpCode.IsControl() {
			if h.Length > 125 || !h.Fin {
				return nil, false, wire.Errorf(pb.ErrorCode_BAD_FRAME, "bad websocket control frame")
			}
			var p [125]byte
			payload := p[:h.Length]
			if _, err := io.ReadFull(t.r, payload); err != nil {
				return nil, false, err
			}
			ws.Cipher(payload, h.Mask, 0)
			switch h.OpCode {
			case ws.OpPing:
				t.ctl(appendWSFrame(nil, ws.OpPong, payload))
			case ws.OpClose:
				return nil, false, errWSClosed
			}
			continue
		}
		switch {
		case !started && h.OpCode == ws.OpContinuation:
			return nil, false, wire.Errorf(pb.ErrorCode_BAD_FRAME, "websocket continuation without a first frame")
		case started && h.OpCode != ws.OpContinuation:
			return nil, false, wire.Errorf(pb.ErrorCode_BAD_FRAME, "websocket data frame inside a fragmented message")
		case !started:
			text = h.OpCode == ws.OpText
			started = true
		}
		if h.Length < 0 || int64(len(msg))+h.Length > int64(t.max) {
			return nil, false, wire.Errorf(pb.ErrorCode_FRAME_TOO_LARGE, "frame exceeds the limit of %d bytes", t.max)
		}
		n := len(msg)
		msg = grow(msg, int(h.Length))
		if _, err := io.ReadFull(t.r, msg[n:]); err != nil {
			return nil, false, err
		}
		ws.Cipher(msg[n:], h.Mask, 0)
		if h.Fin {
			t.buf = msg[:0]
			return msg, text, nil
		}
	}
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

func (t *wsTransport) appendHeader(dst []byte, n int, text bool) []byte {
	op := ws.OpBinary
	if text {
		op = ws.OpText
	}
	return appendWSHeader(dst, op, n)
}

func (t *wsTransport) release() bool {
	if !releaseReader(&t.r) {
		return false
	}
	t.buf = nil
	return true
}

func (t *wsTransport) headerRoom() int { return 10 }

func (t *wsTransport) buffered() *bufio.Reader {
	t.r = reader(t.r, t.src)
	return t.r
}

func (t *wsTransport) closeFrame(reason string) []byte {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	return appendWSFrame(nil, ws.OpClose, ws.NewCloseFrameBody(ws.StatusPolicyViolation, reason))
}

// appendWSHeader appends an unmasked, final frame header (RFC 6455 5.2).
func appendWSHeader(dst []byte, op ws.OpCode, n int) []byte {
	dst = append(dst, 0x80|byte(op))
	switch {
	case n < 126:
		return append(dst, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 127), uint64(n))
	}
}

func appendWSFrame(dst []byte, op ws.OpCode, payload []byte) []byte {
	return append(appendWSHeader(dst, op, len(payload)), payload...)
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
