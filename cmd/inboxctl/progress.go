package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/inboxd/inboxd/client"
)

// progressBar draws sync's progress on stderr when stderr is a terminal:
// the messages printed (and so confirmed, batch by batch) of the backlog
// the welcome announced (pending), the rate and the time left. It never
// writes to stdout: the JSON lines there are what tooling reads. On
// anything but a terminal it draws nothing.
type progressBar struct {
	w        io.Writer // nil: not a terminal, no bar
	cl       *client.Client
	printed  func() int
	start    time.Time
	lastDraw time.Time
	drawn    bool
	width    int
}

// barEvery is how often the bar is redrawn at most.
const barEvery = 200 * time.Millisecond

func newProgressBar(f *os.File, cl *client.Client, printed func() int) *progressBar {
	b := &progressBar{cl: cl, printed: printed, start: time.Now(), width: 80}
	if term.IsTerminal(int(f.Fd())) {
		b.w = f
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 40 {
			b.width = w
		}
	}
	return b
}

// update redraws the bar if it is due.
func (b *progressBar) update() {
	if b.w == nil || time.Since(b.lastDraw) < barEvery {
		return
	}
	b.lastDraw = time.Now()
	var pending uint64
	if w := b.cl.Welcome(); w != nil {
		pending = w.GetPending()
	}
	fmt.Fprint(b.w, "\r"+barLine(b.printed(), pending, time.Since(b.start), b.width))
	b.drawn = true
}

// done ends the bar's line (once), so that what follows on the terminal
// starts on a line of its own.
func (b *progressBar) done() {
	if b.w == nil || !b.drawn {
		return
	}
	b.lastDraw = time.Time{}
	b.update()
	fmt.Fprintln(b.w)
	b.w = nil
}

// barLine is the bar's text for n messages printed of pending (0: unknown,
// no bar, only the count and the rate) after elapsed, at most width runes.
func barLine(n int, pending uint64, elapsed time.Duration, width int) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	tail := fmt.Sprintf(" %d/%d  %.0f msg/s", n, pending, rate)
	if pending == 0 {
		return truncate(fmt.Sprintf("synced %d  %.0f msg/s", n, rate), width)
	}
	frac := min(float64(n)/float64(pending), 1)
	eta := "--"
	if rate > 0 && uint64(n) < pending {
		eta = time.Duration(float64(pending-uint64(n)) / rate * float64(time.Second)).Round(time.Second).String()
	} else if uint64(n) >= pending {
		eta = "0s"
	}
	tail += fmt.Sprintf("  %3.0f%%  ETA %s", frac*100, eta)
	cells := width - len(tail) - 3
	if cells < 10 {
		return truncate(tail[1:], width)
	}
	full := int(frac * float64(cells))
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", cells-full) + "]" + tail + " "
}

func truncate(s string, width int) string {
	if len(s) > width-1 {
		return s[:width-1]
	}
	return s
}
