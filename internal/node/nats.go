package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/streams"
)

// natsLogin is where and as whom this process's NATS connections log in.
type natsLogin struct {
	url, user, password string
}

// connect opens one connection, named for `nats server report connections`.
func (l natsLogin) connect(name string, log *zap.Logger) (*nats.Conn, error) {
	return natsconn.Connect(l.url, name, log, nats.UserInfo(l.user, l.password))
}

// serviceLogin is the login to an external NATS server: the configured
// user and password, by default the service's role and its password.
func serviceLogin(cfg config.Config, roles config.Role) natsLogin {
	l := natsLogin{url: cfg.NATSURL, user: cfg.NATSUser, password: cfg.NATSPassword}
	if l.user == "" {
		l.user = string(serviceRole(roles))
	}
	if l.password == "" {
		l.password = natsauth.Password(natsauth.Role(l.user))
	}
	return l
}

// startNATS starts the embedded NATS JetStream server and returns the
// login of this process's own connections to it.
func (n *Node) startNATS(cfg config.Config, roles config.Role) (natsLogin, error) {
	host, port, err := splitHostPort(cfg.NATSListen)
	if err != nil {
		return natsLogin{}, err
	}
	// Least-privilege users: the all-in-one process's own user (a fresh
	// password each start), or one per service for a split deployment
	// on one box (--nats-only); always an admin for operators.
	var login natsLogin
	pw := map[natsauth.Role]string{natsauth.Admin: natsauth.Password(natsauth.Admin)}
	if roles&^config.RoleEmbeddedNATS == 0 {
		for _, r := range []natsauth.Role{natsauth.Gateway, natsauth.Fanout, natsauth.Syncer} {
			pw[r] = natsauth.Password(r)
		}
	} else {
		login.user, login.password = string(natsauth.AllInOne), natsauth.Random()
		pw[natsauth.AllInOne] = login.password
	}
	if pw[natsauth.Admin] == natsauth.DevPassword(natsauth.Admin) {
		n.log.Warn("embedded NATS: the admin user has the development password; set INBOXD_NATS_PASSWORD_ADMIN in production")
	}
	storeDir := filepath.Join(cfg.DataDir, "jetstream")
	if n.NATS, err = natsembed.Start(natsembed.Options{Host: host, Port: port, StoreDir: storeDir,
		Users: natsauth.Users(pw, cfg.Layout.InboxPartitions)}); err != nil {
		return natsLogin{}, err
	}
	login.url = n.NATS.ClientURL()
	n.log.Info("embedded NATS JetStream", zap.String("url", login.url), zap.String("store", storeDir))
	return login, nil
}

// connectNATS opens the process's main NATS connection and makes sure the
// streams exist.
func (n *Node) connectNATS(ctx context.Context, login natsLogin, roles config.Role, layout streams.Layout) (jetstream.JetStream, error) {
	var err error
	if n.NC, err = login.connect("inboxd-"+roleNames(roles), n.log); err != nil {
		return nil, err
	}
	js, err := jetstream.New(n.NC)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := streams.EnsureStreams(sctx, js, layout); err != nil {
		return nil, err
	}
	return js, nil
}

// serviceRole is the NATS user a process with these roles connects as.
func serviceRole(r config.Role) natsauth.Role {
	switch r &^ config.RoleEmbeddedNATS {
	case config.RoleGateway:
		return natsauth.Gateway
	case config.RoleFanout:
		return natsauth.Fanout
	case config.RoleSyncer:
		return natsauth.Syncer
	}
	return natsauth.AllInOne
}
