// Package auth issues and verifies the signed tokens clients present in
// hello. The uid and device of a connection come only from a verified token.
package auth

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
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

// DefaultMaxTTL is the longest token lifetime (exp − iat) a verifier
// accepts unless told otherwise: a day, inboxctl token's default ttl. A
// leaked token is worth at most this long.
const DefaultMaxTTL = 24 * time.Hour

// leeway is the clock skew allowed between the token issuer and a gateway.
const leeway = 5 * time.Second

// Signer issues tokens: HS256 with a shared secret, or EdDSA (Ed25519)
// with a private key whose public half the gateways hold.
type Signer struct {
	method jwt.SigningMethod
	key    any
	kid    string
	issuer string
}

// NewSigner returns an HS256 signer with secret.
func NewSigner(secret string) *Signer {
	return &Signer{method: jwt.SigningMethodHS256, key: []byte(secret)}
}

// NewEdSigner returns an EdDSA signer.
func NewEdSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{method: jwt.SigningMethodEdDSA, key: key}
}

// WithKeyID returns a copy of s whose tokens name their key: the kid
// header, which a verifier with a key set looks the key up by.
func (s *Signer) WithKeyID(kid string) *Signer {
	c := *s
	c.kid = kid
	return &c
}

// WithIssuer returns a copy of s whose tokens carry iss.
func (s *Signer) WithIssuer(iss string) *Signer {
	c := *s
	c.issuer = iss
	return &c
}

// Issue returns a token for uid and device valid for ttl.
func (s *Signer) Issue(uid int64, device string, ttl time.Duration) (string, error) {
	now := time.Now()
	c := Claims{
		Device: device,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.issuer,
			Subject:   strconv.FormatInt(uid, 10),
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	t := jwt.NewWithClaims(s.method, c)
	if s.kid != "" {
		t.Header["kid"] = s.kid
	}
	return t.SignedString(s.key)
}

// VerifierOptions configure a Verifier.
type VerifierOptions struct {
	// Keys verify tokens; at least one. A token with a kid is checked
	// with that key only; one without with the keys without ID of its
	// alg.
	Keys []Key
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// MaxTTL bounds exp − iat; a token without iat is refused. 0 means
	// DefaultMaxTTL.
	MaxTTL time.Duration
}

// Verifier checks tokens.
type Verifier struct {
	byKID  map[string]Key
	noKID  map[string][]jwt.VerificationKey // alg → the keys without ID
	maxTTL time.Duration
	parser *jwt.Parser
}

// NewVerifier returns a verifier of the keys in opts. It refuses to be
// built without a key (a verifier with none would have nothing to refuse
// an unsigned or empty-key token with), with two keys of one kid, or with
// an HS256 secret that is an Ed25519 public key of the set.
func NewVerifier(opts VerifierOptions) (*Verifier, error) {
	if len(opts.Keys) == 0 {
		return nil, errors.New("auth: a verifier needs at least one key")
	}
	if opts.MaxTTL < 0 {
		return nil, fmt.Errorf("auth: max token lifetime %s is negative", opts.MaxTTL)
	}
	v := &Verifier{byKID: map[string]Key{}, noKID: map[string][]jwt.VerificationKey{}, maxTTL: opts.MaxTTL}
	if v.maxTTL == 0 {
		v.maxTTL = DefaultMaxTTL
	}
	var methods []string
	for _, k := range opts.Keys {
		switch k.alg {
		case AlgHS256, AlgEdDSA:
		default:
			return nil, errors.New("auth: a key not made by HS256Key or Ed25519Key")
		}
		if k.ID == "" {
			v.noKID[k.alg] = append(v.noKID[k.alg], k.verificationKey())
		} else if _, dup := v.byKID[k.ID]; dup {
			return nil, fmt.Errorf("auth: two keys with kid %q", k.ID)
		} else {
			v.byKID[k.ID] = k
		}
		if !slices.Contains(methods, k.alg) {
			methods = append(methods, k.alg)
		}
		if k.alg == AlgHS256 {
			for _, o := range opts.Keys {
				if o.alg == AlgEdDSA && bytes.Equal(k.secret, o.public) {
					return nil, errors.New("auth: an HS256 secret is the bytes of an Ed25519 public key of the set")
				}
			}
		}
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(methods), // never empty: there is a key
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), // an iat in the future would stretch the lifetime bound
		jwt.WithLeeway(leeway),
	}
	if opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(opts.Issuer))
	}
	v.parser = jwt.NewParser(popts...)
	return v, nil
}

// NewHS256Verifier is NewVerifier with one HS256 key without kid and the
// default options: the single-secret install.
func NewHS256Verifier(secret string) (*Verifier, error) {
	k, err := HS256Key("", secret)
	if err != nil {
		return nil, err
	}
	return NewVerifier(VerifierOptions{Keys: []Key{k}})
}

// keyFor picks the keys a token may be verified with. The choice comes
// from the configured keys, never from the token alone: the token's alg
// must be its key's one fixed algorithm.
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if raw, ok := t.Header["kid"]; ok {
		kid, ok := raw.(string)
		if !ok || kid == "" {
			return nil, errors.New("kid is not a non-empty string")
		}
		k, ok := v.byKID[kid]
		if !ok {
			return nil, errors.New("unknown kid")
		}
		if k.alg != alg {
			return nil, fmt.Errorf("kid names an %s key, the token is %s", k.alg, alg)
		}
		return k.verificationKey(), nil
	}
	keys := v.noKID[alg]
	switch len(keys) {
	case 0:
		return nil, fmt.Errorf("no %s key without kid", alg)
	case 1:
		return keys[0], nil
	}
	return jwt.VerificationKeySet{Keys: keys}, nil
}

// Verify returns the identity of a valid token. Every failure wraps ErrToken
// and says why (expired, bad signature, wrong audience or issuer, lifetime
// too long, bad claims).
func (v *Verifier) Verify(token string) (Identity, error) {
	var c Claims
	if _, err := v.parser.ParseWithClaims(token, &c, v.keyFor); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrToken, err)
	}
	if c.IssuedAt == nil {
		return Identity{}, fmt.Errorf("%w: no iat claim (the lifetime cannot be bounded)", ErrToken)
	}
	if life := c.ExpiresAt.Sub(c.IssuedAt.Time); life > v.maxTTL {
		return Identity{}, fmt.Errorf("%w: lifetime %s exceeds the maximum %s", ErrToken, life, v.maxTTL)
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
