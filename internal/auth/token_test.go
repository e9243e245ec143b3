package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestVerifyAcceptsIssuedToken(t *testing.T) {
	tok, err := NewSigner("s3cret").Issue(42, "phone-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	id, err := NewVerifier("s3cret").Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != 42 || id.Device != "phone-1" {
		t.Fatalf("identity %+v", id)
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	good := NewSigner("s3cret")
	expired, _ := good.Issue(42, "d", -time.Minute)
	forged, _ := NewSigner("other").Issue(42, "d", time.Minute)
	wrongAud, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{Device: "d", RegisteredClaims: jwt.RegisteredClaims{
		Subject: "42", Audience: jwt.ClaimStrings{"someone-else"}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute)),
	}}).SignedString([]byte("s3cret"))
	noDevice, _ := good.Issue(42, "", time.Minute)
	badUID, _ := good.Issue(-1, "d", time.Minute)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, Claims{Device: "d", RegisteredClaims: jwt.RegisteredClaims{
		Subject: "42", Audience: jwt.ClaimStrings{Audience}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute)),
	}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	longDev, _ := good.Issue(42, strings.Repeat("x", MaxDeviceLen+1), time.Minute)

	v := NewVerifier("s3cret")
	for name, tok := range map[string]string{
		"expired": expired, "forged": forged, "wrong audience": wrongAud, "no device": noDevice,
		"bad uid": badUID, "alg none": none, "long device": longDev, "garbage": "not.a.token", "empty": "",
	} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrToken) {
			t.Errorf("%s: err = %v, want ErrToken", name, err)
		}
	}
}

func TestEdDSATokens(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	v := NewVerifierKeys("", pub)
	tok, err := NewEdSigner(priv).Issue(7, "tablet", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := v.Verify(tok); err != nil || id.UID != 7 || id.Device != "tablet" {
		t.Fatalf("EdDSA token: %+v %v", id, err)
	}
	forged, _ := NewEdSigner(otherPriv).Issue(7, "tablet", time.Minute)
	expired, _ := NewEdSigner(priv).Issue(7, "tablet", -time.Minute)
	hs, _ := NewSigner("secret").Issue(7, "tablet", time.Minute)
	for name, bad := range map[string]string{"forged": forged, "expired": expired, "HS256 without a secret configured": hs} {
		if _, err := v.Verify(bad); !errors.Is(err, ErrToken) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// Both at once.
	both := NewVerifierKeys("secret", pub)
	for _, ok := range []string{tok, hs} {
		if _, err := both.Verify(ok); err != nil {
			t.Fatal(err)
		}
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	parsed, err := ParseEd25519PublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil || !parsed.Equal(pub) {
		t.Fatalf("parse PEM: %v", err)
	}
}
