package client

import "github.com/inboxd/inboxd/wire/pb"

// Conversation is the client's view of a conversation's read state, kept
// from the login summary, the messages handed over, and the events of the
// inbox (read_sync from the user's other devices, receipts from the peer),
// so every device of a user agrees on unread counts.
type Conversation struct {
	ConvID  int64
	LastSeq int64 // highest conv_seq known
	ReadSeq int64 // the user's read position (own messages count as read)
	// Direct conversations: how far the peer's devices stored and read.
	PeerDelivered int64
	PeerRead      int64
	// ExpiredUpTo: the server's retention removed the messages up to this
	// conv_seq (learned from batches, pulls and the summary): they never
	// come, and the client does not wait for them.
	ExpiredUpTo int64
}

// Unread is LastSeq - ReadSeq.
func (c Conversation) Unread() int64 { return max(0, c.LastSeq-c.ReadSeq) }

// Event is a per-user event as the client applied it.
type Event struct {
	Type    pb.EventType
	ConvID  int64
	UpTo    int64
	PeerUID int64
	Seq     uint64
}

// Conversations returns the read state of every conversation the client
// knows of.
func (c *Client) Conversations() map[int64]Conversation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]Conversation, len(c.convs))
	for id, cv := range c.convs {
		out[id] = *cv
	}
	return out
}

func (c *Client) convLocked(id int64) *Conversation {
	if c.convs == nil {
		c.convs = map[int64]*Conversation{}
	}
	cv := c.convs[id]
	if cv == nil {
		cv = &Conversation{ConvID: id}
		c.convs[id] = cv
	}
	return cv
}

func (c *Client) applySummary(s *pb.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range s.GetConvs() {
		cv := c.convLocked(cs.GetConvId())
		cv.LastSeq = max(cv.LastSeq, cs.GetLastSeq())
		cv.ReadSeq = max(cv.ReadSeq, cs.GetReadSeq())
		cv.ExpiredUpTo = max(cv.ExpiredUpTo, cs.GetExpiredUpToConvSeq())
	}
}

// applyExpiredEntry records an inbox entry whose body retention removed.
func (c *Client) applyExpiredEntry(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cv := c.convLocked(m.ConvID)
	cv.LastSeq = max(cv.LastSeq, m.ConvSeq)
	cv.ExpiredUpTo = max(cv.ExpiredUpTo, m.ConvSeq)
}

// applyExpired records a conversation's retention horizon.
func (c *Client) applyExpired(conv, upTo int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cv := c.convLocked(conv)
	cv.ExpiredUpTo = max(cv.ExpiredUpTo, upTo)
}

func (c *Client) applyRead(conv, seq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cv := c.convLocked(conv)
	cv.ReadSeq = max(cv.ReadSeq, seq)
}

// applyMessage records a message handed to the application.
func (c *Client) applyMessage(m Message, self int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cv := c.convLocked(m.ConvID)
	cv.LastSeq = max(cv.LastSeq, m.ConvSeq)
	if m.SenderUID == self {
		cv.ReadSeq = max(cv.ReadSeq, m.ConvSeq)
	}
}

func (c *Client) applyEvent(e Event) {
	c.mu.Lock()
	cv := c.convLocked(e.ConvID)
	switch e.Type {
	case pb.EventType_READ_SYNC:
		cv.ReadSeq = max(cv.ReadSeq, e.UpTo)
		cv.LastSeq = max(cv.LastSeq, e.UpTo)
	case pb.EventType_DELIVERED:
		cv.PeerDelivered = max(cv.PeerDelivered, e.UpTo)
	case pb.EventType_READ:
		cv.PeerRead = max(cv.PeerRead, e.UpTo)
		cv.PeerDelivered = max(cv.PeerDelivered, e.UpTo)
	}
	c.mu.Unlock()
	if c.opts.OnEvent != nil {
		c.opts.OnEvent(e)
	}
}
