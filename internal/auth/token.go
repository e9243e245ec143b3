// Package auth issues and verifies the signed tokens clients present in
// hello. The uid and device of a connection come only from a verified token.
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the aud claim every inboxd token carries.
const Audience = "inboxd"

// DevSecret is the HS256 secret of the all-in-one development mode; inboxctl
// uses it by default. Production installs set their own (--token-secret).
const DevSecret = "inboxd-dev-secret-do-not-use-in-production"

// MaxDeviceLen bounds a device id (bytes).
const MaxDeviceLen = 128

// ErrToken is wrapped by every verification failure.
var ErrToken = errors.New("invalid token")

// Claims are the token's claims: sub is the decimal uid, dev the device id.
type Claims struct {
	Device string `json:"dev"`
	jwt.RegisteredClaims
}

// Identity is who a verified token speaks for.
type Identity struct {
	UID    int64
	Device string
}

// Signer issues HS256 tokens.
type Signer struct {
	secret []byte
}

// NewSigner returns a signer with secret.
func NewSigner(secret string) *Signer { return &Signer{secret: []byte(secret)} }

// Issue returns a token for uid and device valid for ttl.
func (s *Signer) Issue(uid int64, device string, ttl time.Duration) (string, error) {
	now := time.Now()
	c := Claims{
		Device: device,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(uid, 10),
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
}

// Verifier checks tokens.
type Verifier struct {
	secret []byte
	parser *jwt.Parser
}

// NewVerifier returns a verifier for HS256 tokens signed with secret.
func NewVerifier(secret string) *Verifier {
	return &Verifier{
		secret: []byte(secret),
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithAudience(Audience),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(5*time.Second),
		),
	}
}

// Verify returns the identity of a valid token. Every failure wraps ErrToken
// and says why (expired, bad signature, wrong audience, bad claims).
func (v *Verifier) Verify(token string) (Identity, error) {
	var c Claims
	_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrToken, err)
	}
	uid, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || uid <= 0 {
		return Identity{}, fmt.Errorf("%w: subject %q is not a positive uid", ErrToken, c.Subject)
	}
	if c.Device == "" || len(c.Device) > MaxDeviceLen || !utf8.ValidString(c.Device) {
		return Identity{}, fmt.Errorf("%w: device claim must be 1..%d bytes of UTF-8", ErrToken, MaxDeviceLen)
	}
	return Identity{UID: uid, Device: c.Device}, nil
}
