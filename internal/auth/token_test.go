package auth

import (
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
