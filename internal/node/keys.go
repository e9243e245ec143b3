package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
)

// gatewayKeys are the keys the gateway's listeners need: the token keys
// are loaded before anything starts, so that a bad key file or a short
// secret is reported at once rather than after Postgres and NATS were
// waited for. The TLS files are only checked to exist then, and read when
// the gateway starts (tlsConfig): the readiness test holds the start there.
type gatewayKeys struct {
	verifier *auth.Verifier
}

func loadGatewayKeys(cfg config.Config, log *zap.Logger) (gatewayKeys, error) {
	v, err := tokenVerifier(cfg, log)
	if err != nil {
		return gatewayKeys{}, err
	}
	for _, f := range []string{cfg.TLSCert, cfg.TLSKey} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return gatewayKeys{}, fmt.Errorf("gateway: tls: %w", err)
		}
	}
	return gatewayKeys{verifier: v}, nil
}

// tokenVerifier builds the verifier of client tokens from every configured
// key: --token-secret (HS256, no kid), --token-ed25519-key (EdDSA, no kid)
// and the key set of --token-keys (each with its kid). One key is
// required; the development secret is logged as such.
func tokenVerifier(cfg config.Config, log *zap.Logger) (*auth.Verifier, error) {
	var keys []auth.Key
	if cfg.TokenSecret != "" {
		if cfg.TokenSecret == auth.DevSecret {
			log.Warn("gateway uses the development token secret; set --token-secret or INBOXD_TOKEN_SECRET in production")
		}
		k, err := auth.HS256Key("", cfg.TokenSecret)
		if err != nil {
			return nil, fmt.Errorf("gateway: --token-secret (INBOXD_TOKEN_SECRET): %w", err)
		}
		keys = append(keys, k)
	}
	if cfg.TokenEdKeyFile != "" {
		k, err := auth.LoadEd25519Key(cfg.TokenEdKeyFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: --token-ed25519-key: %w", err)
		}
		keys = append(keys, k)
	}
	if cfg.TokenKeysFile != "" {
		ks, err := auth.LoadKeySet(cfg.TokenKeysFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: --token-keys: %w", err)
		}
		warnIfOthersRead(cfg.TokenKeysFile, ks, log)
		keys = append(keys, ks...)
	}
	if len(keys) == 0 {
		return nil, errors.New("gateway: no way to verify tokens: set --token-secret, --token-ed25519-key or --token-keys")
	}
	v, err := auth.NewVerifier(auth.VerifierOptions{Keys: keys, Issuer: cfg.TokenIssuer, MaxTTL: cfg.TokenMaxTTL})
	if err != nil {
		return nil, fmt.Errorf("gateway: token keys: %w", err)
	}
	return v, nil
}

// warnIfOthersRead warns when a key set with secrets in it is readable by
// other users than its owner (as ssh does for private keys): anyone who
// reads an HS256 secret can sign tokens for every user.
func warnIfOthersRead(path string, keys []auth.Key, log *zap.Logger) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	for _, k := range keys {
		if k.Alg() == auth.AlgHS256 {
			log.Warn("--token-keys holds HS256 secrets and is readable by other users; chmod 600 it",
				zap.String("file", path), zap.String("mode", fi.Mode().Perm().String()))
			return
		}
	}
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
