// Package docmarks rewrites the generated part of a Markdown document: the
// lines between <!-- NAME:begin --> and <!-- NAME:end -->. The text around
// them is written by hand; the part between them by a program
// (docs/benchmarks.md by `inboxbench report`, docs/configuration.md by
// `go generate ./internal/config`), whose test compares the two.
package docmarks

import (
	"bytes"
	"fmt"
)

// Markers are the begin and end comments of the part called name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// Replace returns doc with the lines between the markers of name replaced
// by body (which ends in a newline, or is empty). Each marker must stand on
// a line of its own, once, the begin before the end.
func Replace(doc []byte, name string, body string) ([]byte, error) {
	begin, end := Markers(name)
	b := bytes.Index(doc, []byte(begin+"\n"))
	e := bytes.Index(doc, []byte(end))
	switch {
	case b < 0 || e < 0:
		return nil, fmt.Errorf("docmarks: no %s … %s lines", begin, end)
	case bytes.Count(doc, []byte(begin)) != 1 || bytes.Count(doc, []byte(end)) != 1:
		return nil, fmt.Errorf("docmarks: %s or %s more than once", begin, end)
	case e < b || (e > 0 && doc[e-1] != '\n'):
		return nil, fmt.Errorf("docmarks: %s must follow %s on a line of its own", end, begin)
	}
	head := doc[:b+len(begin)+1]
	out := make([]byte, 0, len(doc)+len(body))
	out = append(out, head...)
	out = append(out, body...)
	return append(out, doc[e:]...), nil
}
