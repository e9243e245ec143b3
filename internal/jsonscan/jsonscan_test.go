package jsonscan

import (
	"fmt"
	"strings"
	"testing"
)

// The members of an object come as written, nested values skipped whole
// (braces and quotes inside strings are not structure), escaped keys
// unescaped; a misshapen document is an error.
func TestEachMember(t *testing.T) {
	members := func(doc string) (string, error) {
		var b strings.Builder
		err := EachMember([]byte(doc), func(key, val []byte) error {
			fmt.Fprintf(&b, "%s=%s;", key, val)
			return nil
		})
		return b.String(), err
	}
	for doc, want := range map[string]string{
		`{}`:      ``,
		` { } `:   ``,
		`{"a":1}`: `a=1;`,
		`{ "a" : "x\"}" , "b":{"c":[1,{"d":"]"}]},"e":null,"f":true,"g":-1.5e3 }`: `a="x\"}";b={"c":[1,{"d":"]"}]};e=null;f=true;g=-1.5e3;`,
		`{"\u0061b":[]}`: `ab=[];`,
	} {
		got, err := members(doc)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", doc, got, err, want)
		}
	}
	for _, doc := range []string{``, `[]`, `null`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":"x}`, `{"a":{"b":1}`, `{a:1}`, `{"a":1 "b":2}`} {
		if got, err := members(doc); err == nil {
			t.Errorf("%s: read as %q, want an error", doc, got)
		}
	}
}

// Uint takes digits within uint64 and nothing else.
func TestUint(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "7": 7, "18446744073709551615": 1<<64 - 1} {
		if got, ok := Uint([]byte(in)); !ok || got != want {
			t.Errorf("%s: %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-1", "1.0", "1e3", "18446744073709551616", "99999999999999999999", "null", " 1"} {
		if got, ok := Uint([]byte(in)); ok {
			t.Errorf("%q read as %d", in, got)
		}
	}
}
