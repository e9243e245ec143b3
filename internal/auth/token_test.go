package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	secretOld   = "old-secret-0123456789abcdefghijklmn"
	secretNew   = "new-secret-0123456789abcdefghijklmn"
	secretNoKID = "nokid-secret-0123456789abcdefghijkl"
	issuer      = "https://idp.example"
)

// mustKey(t)(HS256Key(…)) is the key, or the test fails.
func mustKey(t *testing.T) func(Key, error) Key {
	return func(k Key, err error) Key {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
}

func mustVerifier(t *testing.T, opts VerifierOptions) *Verifier {
	t.Helper()
	v, err := NewVerifier(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// claims are valid claims for uid 42 on device d, issued now for ttl.
func claims(ttl time.Duration) Claims {
	now := time.Now()
	return Claims{Device: "d", RegisteredClaims: jwt.RegisteredClaims{
		Issuer: issuer, Subject: "42", Audience: jwt.ClaimStrings{Audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
}

// sign signs c with method and key; kid, unless nil, goes in the header.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid any, c Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != nil {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pemOf(t *testing.T, pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// One verifier holds two HS256 keys of a rotation (kids old and new), an
// Ed25519 key (kid ed) and an HS256 key without kid, with an issuer and a
// one-hour lifetime bound. Each row is one token, accepted or refused with
// its reason.
func TestVerifierKeysAndClaims(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	v := mustVerifier(t, VerifierOptions{Keys: []Key{
		mustKey(t)(HS256Key("old", secretOld)), mustKey(t)(HS256Key("new", secretNew)),
		mustKey(t)(Ed25519Key("ed", pub)), mustKey(t)(HS256Key("", secretNoKID)),
	}, Issuer: issuer, MaxTTL: time.Hour})
	hs, ed := jwt.SigningMethodHS256, jwt.SigningMethodEdDSA
	ok := claims(30 * time.Minute)
	with := func(f func(*Claims)) Claims { c := claims(30 * time.Minute); f(&c); return c }

	for _, tc := range []struct {
		name  string
		token string
		want  string // "" accepted; else a piece of the error
	}{
		{"kid old (rotation: the old key)", NewSigner(secretOld).WithKeyID("old").WithIssuer(issuer).mustIssue(t, 30*time.Minute), ""},
		{"kid new (rotation: the new key)", NewSigner(secretNew).WithKeyID("new").WithIssuer(issuer).mustIssue(t, 30*time.Minute), ""},
		{"kid ed (EdDSA)", NewEdSigner(priv).WithKeyID("ed").WithIssuer(issuer).mustIssue(t, 30*time.Minute), ""},
		{"no kid: the key without kid", NewSigner(secretNoKID).WithIssuer(issuer).mustIssue(t, 30*time.Minute), ""},
		{"lifetime exactly the maximum", sign(t, hs, []byte(secretOld), "old", claims(time.Hour)), ""},

		{"unknown kid", sign(t, hs, []byte(secretOld), "retired", ok), "unknown kid"},
		{"kid of another key", sign(t, hs, []byte(secretOld), "new", ok), "signature is invalid"},
		{"kid not a string", sign(t, hs, []byte(secretOld), 7, ok), "kid is not a non-empty string"},
		{"no kid, signed with a key that has a kid", sign(t, hs, []byte(secretOld), nil, ok), "signature is invalid"},
		{"no kid, EdDSA: no EdDSA key without kid", sign(t, ed, priv, nil, ok), "no EdDSA key without kid"},
		{"kid ed, forged EdDSA", sign(t, ed, otherPriv, "ed", ok), "signature is invalid"},

		{"HS/EdDSA confusion: HMAC key = Ed25519 public key bytes, kid ed", sign(t, hs, []byte(pub), "ed", ok), "kid names an EdDSA key, the token is HS256"},
		{"HS/EdDSA confusion: HMAC key = Ed25519 public key PEM, kid ed", sign(t, hs, pemOf(t, pub), "ed", ok), "kid names an EdDSA key, the token is HS256"},
		{"HS/EdDSA confusion: HMAC key = Ed25519 public key bytes, no kid", sign(t, hs, []byte(pub), nil, ok), "signature is invalid"},
		{"HS/EdDSA confusion: HMAC key = Ed25519 public key PEM, no kid", sign(t, hs, pemOf(t, pub), nil, ok), "signature is invalid"},
		{"empty-key HS256 token", sign(t, hs, []byte{}, nil, ok), "signature is invalid"},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, ok), "signing method none is invalid"},
		{"alg none with kid", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "old", ok), "signing method none is invalid"},
		{"alg HS512 with a known secret", sign(t, jwt.SigningMethodHS512, []byte(secretOld), "old", ok), "signing method HS512 is invalid"},

		{"iss mismatch", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Issuer = "https://evil.example" })), "token has invalid issuer"},
		{"no iss", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Issuer = "" })), "iss claim is required"},
		{"lifetime over the maximum", sign(t, hs, []byte(secretOld), "old", claims(time.Hour+time.Second)), "lifetime 1h0m1s exceeds the maximum 1h0m0s"},
		{"no iat", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.IssuedAt = nil })), "no iat claim"},
		{"iat in the future (stretches the lifetime)", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) {
			c.IssuedAt = jwt.NewNumericDate(time.Now().Add(24 * time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(25 * time.Hour))
		})), "token used before issued"},
		{"expired", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) {
			c.IssuedAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
		})), "token is expired"},
		{"no exp", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.ExpiresAt = nil })), "token is missing required claim: exp"},
		{"wrong audience", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Audience = jwt.ClaimStrings{"someone-else"} })), "token has invalid audience"},
		{"no device", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Device = "" })), "device claim"},
		{"long device", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Device = strings.Repeat("x", MaxDeviceLen+1) })), "device claim"},
		{"bad uid", sign(t, hs, []byte(secretOld), "old", with(func(c *Claims) { c.Subject = "-1" })), "not a positive uid"},
		{"garbage", "not.a.token", "invalid"},
		{"empty", "", "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(tc.token)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if id.UID != 42 || id.Device != "d" || id.IssuedAt.IsZero() || !id.ExpiresAt.After(id.IssuedAt) {
					t.Fatalf("identity %+v, want uid 42 device d with the token's iat and exp", id)
				}
			case err == nil:
				t.Fatalf("accepted as %+v, want refused (%s)", id, tc.want)
			case !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("err = %v, want ErrToken with %q", err, tc.want)
			}
		})
	}
}

// mustIssue issues a token for uid 42 on device d.
func (s *Signer) mustIssue(t *testing.T, ttl time.Duration) string {
	t.Helper()
	tok, err := s.Issue(42, "d", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Rotation: while both keys are configured, tokens of either verify; once
// the old key is removed, its tokens are refused and the new key's still
// verify.
func TestVerifierRotation(t *testing.T) {
	oldTok := NewSigner(secretOld).WithKeyID("old").mustIssue(t, time.Hour)
	newTok := NewSigner(secretNew).WithKeyID("new").mustIssue(t, time.Hour)
	both := mustVerifier(t, VerifierOptions{Keys: []Key{mustKey(t)(HS256Key("old", secretOld)), mustKey(t)(HS256Key("new", secretNew))}})
	for _, tok := range []string{oldTok, newTok} {
		if _, err := both.Verify(tok); err != nil {
			t.Fatalf("during the rotation: %v", err)
		}
	}
	after := mustVerifier(t, VerifierOptions{Keys: []Key{mustKey(t)(HS256Key("new", secretNew))}})
	if _, err := after.Verify(oldTok); err == nil || !strings.Contains(err.Error(), "unknown kid") {
		t.Fatalf("old key's token after its removal: %v, want unknown kid", err)
	}
	if _, err := after.Verify(newTok); err != nil {
		t.Fatalf("new key's token after the rotation: %v", err)
	}
}

// Several keys without kid of one algorithm are each tried (a --token-secret
// beside a key set entry without kid is not possible, but two Ed25519 keys
// of a library user are).
func TestVerifierTriesEveryKeyWithoutKID(t *testing.T) {
	pub1, priv1, _ := ed25519.GenerateKey(nil)
	pub2, priv2, _ := ed25519.GenerateKey(nil)
	v := mustVerifier(t, VerifierOptions{Keys: []Key{mustKey(t)(Ed25519Key("", pub1)), mustKey(t)(Ed25519Key("", pub2))}})
	for i, priv := range []ed25519.PrivateKey{priv1, priv2} {
		if _, err := v.Verify(NewEdSigner(priv).mustIssue(t, time.Minute)); err != nil {
			t.Fatalf("key %d: %v", i+1, err)
		}
	}
}

// The default lifetime bound admits inboxctl token's default ttl (a day)
// and nothing longer.
func TestDefaultMaxTTL(t *testing.T) {
	v, err := NewHS256Verifier(secretNoKID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(NewSigner(secretNoKID).mustIssue(t, DefaultMaxTTL)); err != nil {
		t.Fatalf("a token of the default ttl: %v", err)
	}
	if _, err := v.Verify(NewSigner(secretNoKID).mustIssue(t, DefaultMaxTTL+time.Minute)); err == nil {
		t.Fatal("a token longer than the default maximum was accepted")
	}
}

// A verifier and its keys refuse to be built from what would let forged
// tokens through.
func TestVerifierRefusesBadKeys(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	hsKey := func(kid, s string) func() error {
		return func() error { _, err := HS256Key(kid, s); return err }
	}
	build := func(opts VerifierOptions) func() error {
		return func() error { _, err := NewVerifier(opts); return err }
	}
	hsOld := mustKey(t)(HS256Key("k", secretOld))
	for _, tc := range []struct {
		name string
		fn   func() error
		want string
	}{
		{"empty key set", build(VerifierOptions{}), "at least one key"},
		{"empty secret", hsKey("", ""), "0 bytes, want at least 32"},
		{"short secret", hsKey("", strings.Repeat("s", MinSecretLen-1)), "31 bytes, want at least 32"},
		{"the Ed25519 public key PEM as a secret", hsKey("", string(pemOf(t, pub))), "PEM text"},
		{"the Ed25519 public key bytes as a secret", build(VerifierOptions{Keys: []Key{
			mustKey(t)(HS256Key("", string(pub))), mustKey(t)(Ed25519Key("ed", pub))}}), "bytes of an Ed25519 public key"},
		{"short Ed25519 key", func() error { _, err := Ed25519Key("", pub[:16]); return err }, "16 bytes, want 32"},
		{"a zero Key", build(VerifierOptions{Keys: []Key{{}}}), "not made by HS256Key or Ed25519Key"},
		{"two keys of one kid", build(VerifierOptions{Keys: []Key{hsOld, hsOld}}), `two keys with kid "k"`},
		{"negative max lifetime", build(VerifierOptions{Keys: []Key{hsOld}, MaxTTL: -time.Second}), "negative"},
	} {
		err := tc.fn()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := HS256Key("", strings.Repeat("s", MinSecretLen)); err != nil {
		t.Errorf("a secret of exactly %d bytes: %v", MinSecretLen, err)
	}
}

func TestParseKeySet(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ed.pub"), pemOf(t, pub), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := ParseKeySet([]byte(`{"keys": [
		{"kid": "2026-01", "secret": "`+secretOld+`"},
		{"kid": "2026-02", "ed25519_key_file": "ed.pub"}
	]}`), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != "2026-01" || keys[0].Alg() != AlgHS256 || keys[1].ID != "2026-02" || keys[1].Alg() != AlgEdDSA {
		t.Fatalf("keys %+v", keys)
	}
	v := mustVerifier(t, VerifierOptions{Keys: keys})
	for _, s := range []*Signer{NewSigner(secretOld).WithKeyID("2026-01"), NewEdSigner(priv).WithKeyID("2026-02")} {
		if _, err := v.Verify(s.mustIssue(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct{ name, json, want string }{
		{"no keys", `{"keys": []}`, "no keys"},
		{"not JSON", `keys:`, "invalid character"},
		{"misspelt field", `{"keys": [{"kid": "a", "sercet": "` + secretOld + `"}]}`, `unknown field "sercet"`},
		{"no kid", `{"keys": [{"secret": "` + secretOld + `"}]}`, "key 1 has no kid"},
		{"neither secret nor key file", `{"keys": [{"kid": "a"}]}`, "exactly one of secret and ed25519_key_file"},
		{"both", `{"keys": [{"kid": "a", "secret": "` + secretOld + `", "ed25519_key_file": "ed.pub"}]}`, "exactly one of"},
		{"empty secret", `{"keys": [{"kid": "a", "secret": ""}]}`, `key "a": auth: HS256 secret is 0 bytes`},
		{"short secret", `{"keys": [{"kid": "a", "secret": "short"}]}`, `key "a": auth: HS256 secret is 5 bytes`},
		{"missing key file", `{"keys": [{"kid": "a", "ed25519_key_file": "gone.pub"}]}`, "gone.pub"},
	} {
		_, err := ParseKeySet([]byte(tc.json), dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), secretOld) {
			t.Errorf("%s: the error prints the secret: %v", tc.name, err)
		}
	}
}

func TestParseEd25519PublicKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	parsed, err := ParseEd25519PublicKey(pemOf(t, pub))
	if err != nil || !parsed.Equal(pub) {
		t.Fatalf("parse PEM: %v", err)
	}
	if _, err := ParseEd25519PublicKey([]byte("not pem")); err == nil {
		t.Fatal("accepted a file without a PEM block")
	}
}
