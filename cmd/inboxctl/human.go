package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/store"
)

// --human: conv show, trace and audit print an aligned table for people
// instead of JSON lines (the JSON stays the default: tooling parses it).
// The tables carry the same fields as the JSON; times are UTC, to the
// second.

func humanTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// convKinds names store.Conversation.Kind.
var convKinds = map[int]string{store.KindDirect: "direct", store.KindGroup: "group"}

func humanConv(w io.Writer, c *admin.ShowConvResponse) {
	kind, ok := convKinds[c.Kind]
	if !ok {
		kind = strconv.Itoa(c.Kind)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "conversation\t%d\n", c.ConvID)
	fmt.Fprintf(tw, "kind\t%s\n", kind)
	fmt.Fprintf(tw, "last conv_seq\t%d\n", c.LastSeq)
	fmt.Fprintf(tw, "member version\t%d\n", c.MemberVer)
	fmt.Fprintf(tw, "share history\t%s\n", yesNo(c.ShareHistory))
	fmt.Fprintf(tw, "legal hold\t%s\n", yesNo(c.LegalHold))
	if c.ExpiredUpTo > 0 {
		fmt.Fprintf(tw, "expired up to conv_seq\t%d\n", c.ExpiredUpTo)
	}
	fmt.Fprintf(tw, "created\t%s\n", humanTime(c.CreatedAt))
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "UID\tROLE\tJOINED\tLEFT\tREAD\tUNREAD\t")
	for _, m := range c.Members {
		left, unread := "-", c.LastSeq-m.ReadSeq
		if m.LeftSeq != nil {
			left = strconv.FormatInt(*m.LeftSeq, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\t\n", m.UID, m.Role, m.JoinedSeq, left, m.ReadSeq, max(unread, 0))
	}
	_ = tw.Flush()
}

func humanTrace(w io.Writer, lines []traceLine) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MSG_ID\tCONV_SEQ\tUID\tDEVICE\tSTATUS\tSEQ\tCURSOR\tREAD_SEQ\tSTORED_AT")
	for _, l := range lines {
		dev := l.Device
		if dev == "" {
			dev = "(no device)"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", l.MsgID, l.ConvSeq, l.UID, dev, l.Status, l.Seq, l.Cursor, l.ReadSeq, humanTime(l.StoredAt))
	}
	_ = tw.Flush()
}

func humanAudit(w io.Writer, stuck []store.Stuck) {
	if len(stuck) == 0 {
		fmt.Fprintln(w, "no stuck messages")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "UID\tDEVICE\tMSG_ID\tCONV_ID\tSEQ\tCURSOR\tBEHIND\tSTORED_AT\tLAST_SEEN_AT")
	for _, s := range stuck {
		behind := uint64(0)
		if s.Seq > s.Cursor {
			behind = s.Seq - s.Cursor
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.UID, s.Device, s.MsgID, s.ConvID, s.Seq, s.Cursor, behind, humanTime(s.StoredAt), humanTime(s.LastSeenAt))
	}
	_ = tw.Flush()
}
