package node

import (
	"io/fs"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/web"
)

// webFiles are the web client's files, or nil with --web=false.
func webFiles(cfg config.Config) fs.FS {
	if !cfg.Web {
		return nil
	}
	return web.App()
}

// devTokens issues the web client's development tokens, only when the
// gateway verifies with the development secret: whoever reads the source
// can sign such tokens anyway, and the exposure check (secure.go) keeps
// that secret on loopback unless --dev. With any other key nil: no
// endpoint.
func devTokens(cfg config.Config) func(uid int64, device string) (string, time.Time, error) {
	if !cfg.Web || cfg.TokenSecret != auth.DevSecret {
		return nil
	}
	s := auth.NewSigner(auth.DevSecret).WithIssuer(cfg.TokenIssuer)
	ttl := min(cfg.TokenMaxTTL, auth.DefaultMaxTTL)
	return func(uid int64, device string) (string, time.Time, error) {
		exp := time.Now().Add(ttl)
		tok, err := s.Issue(uid, device, ttl)
		return tok, exp, err
	}
}
