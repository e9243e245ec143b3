package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// MinSecretLen is the shortest HS256 secret a verifier takes, in bytes:
// RFC 7518 §3.2 asks for a key at least as long as the hash (256 bits), and
// a shorter one can be searched offline from any one token.
const MinSecretLen = 32

// Algorithms of keys (the JWT alg header values).
const (
	AlgHS256 = "HS256"
	AlgEdDSA = "EdDSA"
)

// Key is one verification key. It has one fixed algorithm: a token is
// checked with a key only when the token's alg is the key's, so an HS256
// token can never be verified with an Ed25519 key's bytes. ID is the kid a
// token names it by; a key without ID verifies tokens without kid.
type Key struct {
	ID     string
	alg    string
	secret []byte            // AlgHS256
	public ed25519.PublicKey // AlgEdDSA
}

// HS256Key returns an HS256 key. The secret must be at least MinSecretLen
// bytes and must not be an Ed25519 public key (PEM text): an operator who
// pasted the public key where a secret goes would let anyone who has the
// public key sign tokens.
func HS256Key(kid, secret string) (Key, error) {
	if len(secret) < MinSecretLen {
		return Key{}, fmt.Errorf("auth: HS256 secret is %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	if bytes.Contains([]byte(secret), []byte("-----BEGIN")) {
		return Key{}, errors.New("auth: HS256 secret is PEM text (a public key?); HS256 takes a shared secret, an Ed25519 public key goes in a key of its own")
	}
	return Key{ID: kid, alg: AlgHS256, secret: []byte(secret)}, nil
}

// Ed25519Key returns an EdDSA key: tokens signed by the private half of pub.
func Ed25519Key(kid string, pub ed25519.PublicKey) (Key, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Key{}, fmt.Errorf("auth: Ed25519 public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	return Key{ID: kid, alg: AlgEdDSA, public: pub}, nil
}

// Alg is the key's algorithm (AlgHS256 or AlgEdDSA).
func (k Key) Alg() string { return k.alg }

// verificationKey is what the jwt library verifies a signature with.
func (k Key) verificationKey() jwt.VerificationKey {
	if k.alg == AlgEdDSA {
		return k.public
	}
	return k.secret
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
