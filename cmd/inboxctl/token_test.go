package main

import (
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
)

// inboxctl token signs with the kid and issuer it is given: a gateway with
// that key in its set and that issuer accepts the token, one that expects
// another kid or issuer refuses it.
func TestTokenKIDAndIssuer(t *testing.T) {
	const secret = "inboxctl-test-secret-0123456789abcdef"
	key, err := auth.HS256Key("2026-01", secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.VerifierOptions{Keys: []auth.Key{key}, Issuer: "idp"})
	if err != nil {
		t.Fatal(err)
	}
	r := tokenRequest{secret: secret, kid: "2026-01", issuer: "idp", uid: 9, device: "cli", ttl: auth.DefaultMaxTTL}
	tok, err := r.issue()
	if err != nil {
		t.Fatal(err)
	}
	if id, err := v.Verify(tok); err != nil || id.UID != 9 || id.Device != "cli" {
		t.Fatalf("the default ttl with kid and issuer: %+v, %v", id, err)
	}
	for name, change := range map[string]func(*tokenRequest){
		"another kid":    func(r *tokenRequest) { r.kid = "2025-12" },
		"no kid":         func(r *tokenRequest) { r.kid = "" },
		"another issuer": func(r *tokenRequest) { r.issuer = "other" },
		"too long":       func(r *tokenRequest) { r.ttl = auth.DefaultMaxTTL + time.Hour },
	} {
		bad := r
		change(&bad)
		tok, err := bad.issue()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := (tokenRequest{secret: secret}).issue(); err == nil || !strings.Contains(err.Error(), "--uid and --device") {
		t.Errorf("no uid: %v", err)
	}
}
