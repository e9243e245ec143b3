package gateway

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestIsAppRequest(t *testing.T) {
	for _, c := range []struct {
		head string
		app  bool
	}{
		{"GET /app HTTP/1.1\r\n", true},
		{"GET /app/ HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"GET /app/app.js?v=1 HTTP/1.1\r\n", true},
		{"GET /app?x HTTP/1.1\r\n", true},
		{"POST /app/dev/token HTTP/1.1\r\n", true},
		{"GET /ws HTTP/1.1\r\n", false},
		{"GET /application HTTP/1.1\r\n", false},
		{"GET /apps/ HTTP/1.1\r\n", false},
		{"GET / HTTP/1.1\r\n", false},
		{"GET /app/\r\n", false},                                           // no version: not HTTP/1
		{"GET /app/ HTTP/1.1", false},                                      // no end of line before EOF
		{"GET /" + strings.Repeat("a", 2000) + " HTTP/1.1\r\n", false},     // longer than the buffer
		{"GET /app/" + strings.Repeat("a", 2000) + " HTTP/1.1\r\n", false}, // idem: the upgrader refuses it
	} {
		br := bufio.NewReaderSize(strings.NewReader(c.head), readBufSize)
		if got := isAppRequest(br); got != c.app {
			t.Errorf("%.40q: app %v, want %v", c.head, got, c.app)
		}
		// Nothing consumed: the upgrader or the HTTP server reads it all.
		if rest, _ := io.ReadAll(br); string(rest) != c.head {
			t.Errorf("%.40q: %d bytes consumed", c.head, len(c.head)-len(rest))
		}
	}
}
