// Package auth issues and verifies the signed tokens clients present in
// hello. The uid and device of a connection come only from a verified token.
package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
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
	// IssuedAt and ExpiresAt are the token's iat (zero when it has none)
	// and exp: a connection ends at exp, a revocation refuses tokens by iat.
	IssuedAt, ExpiresAt time.Time
}

// Signer issues tokens: HS256 with a shared secret, or EdDSA (Ed25519)
// with a private key whose public half the gateways hold.
type Signer struct {
	method jwt.SigningMethod
	key    any
}

// NewSigner returns an HS256 signer with secret.
func NewSigner(secret string) *Signer {
	return &Signer{method: jwt.SigningMethodHS256, key: []byte(secret)}
}

// NewEdSigner returns an EdDSA signer.
func NewEdSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{method: jwt.SigningMethodEdDSA, key: key}
}

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
	return jwt.NewWithClaims(s.method, c).SignedString(s.key)
}

// Verifier checks tokens.
type Verifier struct {
	secret []byte            // HS256; nil: HS256 tokens are refused
	edKey  ed25519.PublicKey // EdDSA; nil: EdDSA tokens are refused
	parser *jwt.Parser
}

// NewVerifier returns a verifier for HS256 tokens signed with secret.
func NewVerifier(secret string) *Verifier { return NewVerifierKeys(secret, nil) }

// NewVerifierKeys accepts HS256 tokens signed with secret (unless empty)
// and EdDSA tokens signed by the private half of edKey (unless nil). Every
// other algorithm, "none" included, is refused.
func NewVerifierKeys(secret string, edKey ed25519.PublicKey) *Verifier {
	v := &Verifier{edKey: edKey}
	var methods []string
	if secret != "" {
		v.secret = []byte(secret)
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if edKey != nil {
		methods = append(methods, jwt.SigningMethodEdDSA.Alg())
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(methods),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second),
	)
	return v
}

// ParseEd25519PublicKey reads a PEM "PUBLIC KEY" (PKIX) Ed25519 key.
func ParseEd25519PublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("auth: no PEM block in the public key file")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("auth: public key: %w", err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("auth: public key is %T, want Ed25519", k)
	}
	return ek, nil
}

// Verify returns the identity of a valid token. Every failure wraps ErrToken
// and says why (expired, bad signature, wrong audience, bad claims).
func (v *Verifier) Verify(token string) (Identity, error) {
	var c Claims
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if t.Method.Alg() == jwt.SigningMethodEdDSA.Alg() {
			return v.edKey, nil
		}
		return v.secret, nil
	})
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
	id := Identity{UID: uid, Device: c.Device, ExpiresAt: c.ExpiresAt.Time}
	if c.IssuedAt != nil {
		id.IssuedAt = c.IssuedAt.Time
	}
	return id, nil
}
