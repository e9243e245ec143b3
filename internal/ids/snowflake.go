package ids

import (
	"errors"
	"sync"
	"time"
)

// Layout of a msg_id (63 bits, always positive):
//
//	41 bits milliseconds since Epoch | 10 bits node | 12 bits sequence
//
// 41 bits of milliseconds last 69 years from Epoch; 4096 ids per millisecond
// per node; 1024 nodes.
const (
	nodeBits = 10
	seqBits  = 12
	// MaxNode is the largest node id.
	MaxNode   = 1<<nodeBits - 1
	seqMask   = 1<<seqBits - 1
	timeShift = nodeBits + seqBits
)

// Epoch is the zero of msg_id time: 2025-01-01T00:00:00Z.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrBadNode is returned for a node id outside [0, MaxNode].
var ErrBadNode = errors.New("ids: node id out of range 0..1023")

// Generator issues msg_ids that are unique per node and strictly increasing.
//
// If the wall clock moves backwards, the generator keeps counting from the
// last millisecond it used (borrowing future milliseconds when a millisecond's
// 4096 ids run out) instead of going back, so ids stay unique and ordered; it
// catches up with the clock once the clock passes it again. Seed it with the
// largest id already stored (Observe) so that a restart after the clock moved
// back cannot reissue an id.
type Generator struct {
	mu     sync.Mutex
	node   int64
	lastMs int64
	seq    int64
	now    func() time.Time
	behind uint64 // ids issued while the clock was behind lastMs
}

// NewGenerator returns a generator for node (0..MaxNode).
func NewGenerator(node int) (*Generator, error) {
	if node < 0 || node > MaxNode {
		return nil, ErrBadNode
	}
	return &Generator{node: int64(node), now: time.Now}, nil
}

// Observe makes sure every id issued from now on is larger than id.
func (g *Generator) Observe(id int64) {
	ms := id >> timeShift
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms > g.lastMs || (ms == g.lastMs && id&seqMask > g.seq) {
		g.lastMs = ms
		g.seq = seqMask // force the next id into the next millisecond
	}
}

// Next returns a new msg_id.
func (g *Generator) Next() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := g.now().Sub(Epoch).Milliseconds()
	switch {
	case ms > g.lastMs:
		g.lastMs = ms
		g.seq = 0
	default:
		if ms < g.lastMs {
			g.behind++
		}
		g.seq++
		if g.seq > seqMask {
			g.lastMs++
			g.seq = 0
		}
	}
	return g.lastMs<<timeShift | g.node<<seqBits | g.seq
}

// Time returns the millisecond at which id was issued.
func Time(id int64) time.Time {
	return Epoch.Add(time.Duration(id>>timeShift) * time.Millisecond)
}

// FirstAt returns the smallest id issued at or after t: ids in
// [FirstAt(a), FirstAt(b)) were issued between a and b (on the issuer's
// clock).
func FirstAt(t time.Time) int64 {
	return max(t.Sub(Epoch).Milliseconds(), 0) << timeShift
}

// Node returns the node that issued id.
func Node(id int64) int {
	return int(id >> seqBits & MaxNode)
}

// IssuedBehindClock returns how many ids were issued while the wall clock was
// behind the generator's last millisecond (the clock moved backwards).
func (g *Generator) IssuedBehindClock() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.behind
}

// AtTime returns the smallest msg_id issued at t's millisecond: every id
// issued at t or later is at least this, every id issued before is below
// it. Time ranges of msg_ids (retention's partitions) are cut with it.
func AtTime(t time.Time) int64 {
	return t.Sub(Epoch).Milliseconds() << timeShift
}
