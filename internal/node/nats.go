package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
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
	url            string
	role           natsauth.Role // the reply prefix of its connections
	user, password string
	creds          string // credentials file (JWT and seed): instead of user/password
	ca             string // CA certificates that verify the server (TLS)
	cert, key      string // client certificate (TLS with client verification)
}

// connect opens one connection, named for `nats server report connections`.
func (l natsLogin) connect(name string, log *zap.Logger) (*nats.Conn, error) {
	return natsconn.Connect(l.url, name, log, l.options()...)
}

// options are the login's nats.Options: its reply prefix (the only one its
// user may subscribe to), its credentials and its TLS settings.
func (l natsLogin) options() []nats.Option {
	opts := []nats.Option{nats.CustomInboxPrefix(natsauth.InboxPrefix(l.role))}
	if l.creds != "" {
		opts = append(opts, nats.UserCredentials(l.creds))
	} else {
		opts = append(opts, nats.UserInfo(l.user, l.password))
	}
	if l.ca != "" {
		opts = append(opts, nats.RootCAs(l.ca))
	}
	if l.cert != "" {
		opts = append(opts, nats.ClientCert(l.cert, l.key))
	}
	return opts
}

// serviceLogin is the login to an external NATS server: the configured
// credentials file, or user and password, by default the service's role
// and its password.
func serviceLogin(cfg config.Config, roles config.Role) natsLogin {
	l := natsLogin{url: cfg.NATSURL, role: serviceRole(roles), user: cfg.NATSUser, password: cfg.NATSPassword,
		creds: cfg.NATSCreds, ca: cfg.NATSCA, cert: cfg.NATSCert, key: cfg.NATSKey}
	if l.creds != "" {
		l.user, l.password = "", ""
		return l
	}
	if l.user == "" {
		l.user = string(l.role)
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
	login := natsLogin{role: natsauth.AllInOne}
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
	var routes []string
	for _, r := range strings.Split(cfg.Routes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			routes = append(routes, r)
		}
	}
	if n.NATS, err = natsembed.Start(natsembed.Options{Host: host, Port: port, StoreDir: storeDir,
		Name: cfg.NodeName, ClusterListen: cfg.ClusterListen, Routes: routes,
		Users: natsauth.Users(pw, cfg.Layout.InboxPartitions)}); err != nil {
		return natsLogin{}, err
	}
	login.url = n.NATS.ClientURL()
	n.log.Info("embedded NATS JetStream", zap.String("url", login.url), zap.String("store", storeDir))
	return login, nil
}

// connectNATS opens the process's main NATS connection and makes sure the
// streams exist: a process with the syncer role (the installation's
// steward) creates or updates them; a gateway or fanout alone, whose users
// may not, waits until they are there. The syncer records hotWindow on the
// streams and creates them with replicas copies, or refuses to start when
// they record another window or have another replica count.
func (n *Node) connectNATS(ctx context.Context, login natsLogin, roles config.Role, layout streams.Layout, hotWindow time.Duration, replicas int) (jetstream.JetStream, error) {
	var err error
	if n.NC, err = login.connect("inboxd-"+roleNames(roles), n.log); err != nil {
		return nil, err
	}
	n.log.Info("nats connected", zap.String("url", natsconn.Redact(n.NC.ConnectedUrl())), zap.String("user", login.user))
	js, err := jetstream.New(n.NC)
	if err != nil {
		return nil, err
	}
	if roles&config.RoleSyncer == 0 {
		return js, waitStreams(ctx, js, layout, n.log)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := streams.EnsureStreams(sctx, js, layout, hotWindow, replicas); err != nil {
		return nil, err
	}
	return js, nil
}

// waitStreams waits until every stream of layout exists, logging now and
// then, until ctx ends.
func waitStreams(ctx context.Context, js jetstream.JetStream, layout streams.Layout, log *zap.Logger) error {
	delay, logged := 250*time.Millisecond, time.Time{}
	for {
		err := streams.CheckStreams(ctx, js, layout)
		if err == nil || !errors.Is(err, streams.ErrStreamsMissing) {
			return err
		}
		if time.Since(logged) > 10*time.Second {
			log.Warn("waiting for the streams: a syncer creates them", zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
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
