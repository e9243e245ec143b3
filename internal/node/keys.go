package node

import (
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
)

// tokenVerifier loads the keys the gateway verifies client tokens with: the
// HS256 secret and, with --token-ed25519-key, an Ed25519 public key. One of
// them is required; the development secret is logged as such.
func tokenVerifier(cfg config.Config, log *zap.Logger) (*auth.Verifier, error) {
	if cfg.TokenSecret == auth.DevSecret {
		log.Warn("gateway uses the development token secret; set --token-secret or INBOXD_TOKEN_SECRET in production")
	}
	var edKey ed25519.PublicKey
	if cfg.TokenEdKeyFile != "" {
		b, err := os.ReadFile(cfg.TokenEdKeyFile)
		if err != nil {
			return nil, err
		}
		if edKey, err = auth.ParseEd25519PublicKey(b); err != nil {
			return nil, err
		}
	}
	if cfg.TokenSecret == "" && edKey == nil {
		return nil, errors.New("gateway: no way to verify tokens: set --token-secret or --token-ed25519-key")
	}
	return auth.NewVerifierKeys(cfg.TokenSecret, edKey), nil
}

// tlsConfig loads --tls-cert and --tls-key; nil without them (plain
// listeners).
func tlsConfig(cfg config.Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("gateway: tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
