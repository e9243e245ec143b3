package main

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/inboxd/inboxd/internal/auth"
)

// signer returns the token signer of token and sync: EdDSA with the PEM
// Ed25519 private key in keyFile when it is set (a gateway that holds only
// the public key, --token-ed25519-key or an ed25519_key_file of its key
// set), else HS256 with secret; with kid and iss when they are set.
func signer(secret, keyFile, kid, issuer string) (*auth.Signer, error) {
	s := auth.NewSigner(secret)
	if keyFile != "" {
		k, err := loadEd25519PrivateKey(keyFile)
		if err != nil {
			return nil, err
		}
		s = auth.NewEdSigner(k)
	}
	return s.WithKeyID(kid).WithIssuer(issuer), nil
}

// loadEd25519PrivateKey reads a PEM "PRIVATE KEY" (PKCS #8) holding an
// Ed25519 key, as `openssl genpkey -algorithm ed25519` writes it.
func loadEd25519PrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("--key %s: want a PEM PRIVATE KEY block (PKCS #8; openssl genpkey -algorithm ed25519)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("--key %s: a %T, want an Ed25519 private key", path, k)
	}
	return ed, nil
}
