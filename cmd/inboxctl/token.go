package main

import (
	"errors"
	"flag"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
)

// tokenRequest is what `inboxctl token` signs.
type tokenRequest struct {
	secret, kid, issuer string
	key                 string // a PEM Ed25519 private key file: EdDSA instead of HS256
	uid                 int64
	device              string
	ttl                 time.Duration
}

func tokenCmd(args []string) int {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	var c conn
	c.register(fs)
	var r tokenRequest
	fs.Int64Var(&r.uid, "uid", 0, "uid")
	fs.StringVar(&r.device, "device", "", "device id")
	fs.DurationVar(&r.ttl, "ttl", auth.DefaultMaxTTL, "validity; gateways refuse tokens longer than their --token-max-ttl (default the same)")
	fs.StringVar(&r.kid, "kid", "", "key id (kid header) of --secret in the gateways' --token-keys set (env INBOXD_TOKEN_KID); none: a key without kid such as --token-secret")
	fs.StringVar(&r.issuer, "issuer", "", "iss claim, for gateways with --token-issuer (env INBOXD_TOKEN_ISSUER)")
	fs.StringVar(&r.key, "key", "", "PEM Ed25519 private key (PKCS #8) to sign with EdDSA instead of --secret (env INBOXD_TOKEN_KEY); with --kid when the gateways hold it in a key set")
	fromEnv(&r.kid, "INBOXD_TOKEN_KID") // after registering, as conn.register does
	fromEnv(&r.issuer, "INBOXD_TOKEN_ISSUER")
	fromEnv(&r.key, "INBOXD_TOKEN_KEY")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r.secret = c.secret
	tok, err := r.issue()
	if err != nil {
		return fail(err)
	}
	emit(struct {
		Token string `json:"token"`
	}{tok})
	return 0
}

func (r tokenRequest) issue() (string, error) {
	if r.uid <= 0 || r.device == "" {
		return "", errors.New("token needs --uid and --device")
	}
	s, err := signer(r.secret, r.key, r.kid, r.issuer)
	if err != nil {
		return "", err
	}
	return s.Issue(r.uid, r.device, r.ttl)
}
