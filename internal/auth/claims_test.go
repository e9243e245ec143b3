package auth

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeClaims decodes data as golang-jwt does (json.Unmarshal into the
// Claims interface), and as encoding/json alone would.
func decodeClaims(data []byte) (fast Claims, fastErr error, plain Claims, plainErr error) {
	var c any = &fast
	fastErr = json.Unmarshal(data, &c)
	plainErr = json.Unmarshal(data, (*jsonClaims)(&plain))
	return
}

// The tokens our signers issue take the fast path, and it gives what
// encoding/json gives.
func TestClaimsOfOurTokensTakeTheFastPath(t *testing.T) {
	for _, s := range []*Signer{NewSigner("0123456789abcdef0123456789abcdef"), NewSigner("0123456789abcdef0123456789abcdef").WithIssuer("https://idp.example").WithKeyID("k1")} {
		tok, err := s.Issue(12345, "phone-1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		var c Claims
		if !fastClaims(raw, &c) {
			t.Fatalf("claims %s: not the plain shape", raw)
		}
		fast, ferr, plain, perr := decodeClaims(raw)
		if ferr != nil || perr != nil || !reflect.DeepEqual(fast, plain) || !reflect.DeepEqual(c, plain) {
			t.Fatalf("claims %s: fast %+v (%v), encoding/json %+v (%v)", raw, fast, ferr, plain, perr)
		}
		if c.Subject != "12345" || c.Device != "phone-1" || c.ExpiresAt == nil || c.IssuedAt == nil || len(c.Audience) != 1 {
			t.Fatalf("claims %s read as %+v", raw, c)
		}
	}
}

// Whatever the claims' bytes, decoding them gives what encoding/json
// gives (the same Claims, or an error from both): the fast path never
// reads a claim differently, and what it does not take falls through.
func FuzzClaimsDecode(f *testing.F) {
	for _, s := range []string{
		`{"dev":"phone-1","iss":"https://idp.example","sub":"12345","aud":["inboxd"],"exp":1780000000,"iat":1779990000}`,
		`{"dev":"d","sub":"1","aud":"inboxd","exp":1780000000,"nbf":1779990000,"iat":1779990000,"jti":"x","extra":{"a":[1,2,"}"]}}`,
		`{"DEV":"d","Sub":"1"}`, `{"ſub":"1"}`, `{"\u0064ev":"d"}`, `{"dev":"a\"b","sub":"\u00e9"}`,
		`{"exp":1780000000.5,"iat":1e9,"nbf":-1}`, `{"exp":null,"aud":null,"dev":null}`, `{"aud":[],"sub":"1","sub":"2"}`,
		`{"aud":["a",1]}`, `{"aud":[ "a" , "b" ]}`, "{\"dev\":\"\xff\"}", `null`, `[]`, `"x"`, `{}`, `{"exp":0}`, `{"exp":01}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ferr, plain, perr := decodeClaims(data)
		if (ferr == nil) != (perr == nil) {
			t.Fatalf("%q: fast %+v (%v), encoding/json %+v (%v)", data, fast, ferr, plain, perr)
		}
		if ferr == nil && !reflect.DeepEqual(fast, plain) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", data, fast, plain)
		}
	})
}

// A token's verification, and its claims decoded with and without the
// fast path.
func BenchmarkClaimsDecode(b *testing.B) {
	const secret = "0123456789abcdef0123456789abcdef"
	v, err := NewHS256Verifier(secret)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := NewSigner(secret).Issue(12345, "phone-1", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("claims=fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c Claims
			var i any = &c
			if err := json.Unmarshal(raw, &i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("claims=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c Claims
			if err := json.Unmarshal(raw, (*jsonClaims)(&c)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
