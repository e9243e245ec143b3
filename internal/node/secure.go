package node

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/store"
)

// The development secrets are public: they are in this repository. They
// are fine on a box nobody else can reach, and an open door anywhere else.
// checkExposure refuses a start that would serve beyond loopback while one
// of them is in use; --dev allows it, loudly, for a trial. It runs before
// anything listens, so a refused start has opened nothing.
//
// The rule is one sentence: if anything of this process is reachable from
// outside loopback — a listener (--ws, --tcp, --http, --nats-listen,
// --debug-http) or the NATS server it logs in to (--nats) — no development
// secret may be in use: the token secret, a NATS password of the embedded server's users or
// of this service's login, the cluster routes' password, or the Postgres password of store.DefaultURL.
// It does not ask which listener a secret guards: a box with a public
// listener is not a development box, and a loopback NATS or Postgres with a
// public password is open to every local user and to any process an
// attacker gets to run through the public one.
func checkExposure(cfg config.Config, roles config.Role, log *zap.Logger) error {
	reach := reachable(cfg, roles)
	devs := devSecrets(cfg, roles)
	switch {
	case cfg.Dev && len(reach) > 0 && len(devs) > 0:
		log.Warn("--dev: DEVELOPMENT SECRETS ON ADDRESSES REACHABLE BEYOND LOOPBACK: anyone with the inboxd source can log in. For a trial only, never in production",
			zap.Strings("development_secrets", settings(devs)), zap.Strings("reachable", reach))
	case cfg.Dev:
		log.Warn("--dev is set: development secrets would be allowed on addresses reachable beyond loopback (none is in use there now)")
	case len(reach) > 0 && len(devs) > 0:
		verb := "is"
		if len(reach) > 1 {
			verb = "are"
		}
		var what, fixes []string
		for _, d := range devs {
			what, fixes = append(what, d.what), append(fixes, d.fix)
		}
		sep := " and "
		if len(what) > 1 {
			sep = ", while "
		}
		return fmt.Errorf("%s%s%s %s reachable beyond loopback; %s or pass --dev for a trial",
			andList(what), sep, andList(reach), verb, strings.Join(fixes, ", "))
	}
	return nil
}

// devSecret is a development secret in use: the setting, what is wrong
// with it and how to mend it (never its value).
type devSecret struct {
	setting, what, fix string
}

func settings(ds []devSecret) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.setting
	}
	return out
}

// devSecrets lists the development secrets the roles would use.
func devSecrets(cfg config.Config, roles config.Role) []devSecret {
	var out []devSecret
	if roles&config.RoleGateway != 0 && cfg.TokenSecret == auth.DevSecret {
		fix := "set a secret (INBOXD_TOKEN_SECRET)"
		if cfg.TokenKeysFile != "" || cfg.TokenEdKeyFile != "" {
			fix = `set a secret (INBOXD_TOKEN_SECRET) or --token-secret "" to verify with the other token keys only`
		}
		out = append(out, devSecret{"--token-secret", "--token-secret is the development secret", fix})
	}
	services := roles&^config.RoleEmbeddedNATS != 0
	if roles&config.RoleEmbeddedNATS != 0 {
		// The embedded server's users (startNATS): admin always (and the
		// push bridge's with --push), the services' users and the push
		// bridge's when it is alone (--nats-only); the all-in-one
		// process's own user has a fresh password.
		users := []natsauth.Role{natsauth.Admin}
		if !services {
			users = append(users, natsauth.Gateway, natsauth.Fanout, natsauth.Syncer, natsauth.PushBridge)
		} else if cfg.Push {
			users = append(users, natsauth.PushBridge)
		}
		for _, r := range users {
			if natsauth.Password(r) == natsauth.DevPassword(r) {
				env := natsPasswordEnv(r)
				out = append(out, devSecret{env, fmt.Sprintf("the embedded NATS user %s has the development password", r), "set " + env})
			}
		}
		// The cluster's routes (--cluster-listen): another server that
		// knows the route password joins the cluster and sees everything.
		if cfg.ClusterListen != "" && natsauth.ClusterPassword() == natsauth.DevClusterPassword {
			env := natsauth.ClusterPasswordEnv
			out = append(out, devSecret{env, "the cluster routes have the development password", "set " + env + " (the same on every node)"})
		}
	} else if services {
		l := serviceLogin(cfg, roles)
		if isDevNATSPassword(l.password) {
			setting, fix := natsPasswordEnv(natsauth.Role(l.user)), "set "+natsPasswordEnv(natsauth.Role(l.user))
			if cfg.NATSPassword != "" {
				setting, fix = "--nats-password", "set --nats-password (NATS_PASSWORD)"
			}
			out = append(out, devSecret{setting, fmt.Sprintf("the NATS password of user %s is a development password", l.user), fix})
		}
	}
	if services && hasDevDatabasePassword(cfg.DatabaseURL) {
		out = append(out, devSecret{"--database-url", "--database-url has the development password", "set DATABASE_URL with a password of its own"})
	}
	return out
}

// natsPasswordEnv is the variable a role's NATS password comes from.
func natsPasswordEnv(r natsauth.Role) string {
	return "INBOXD_NATS_PASSWORD_" + strings.ToUpper(string(r))
}

func isDevNATSPassword(pw string) bool {
	for _, r := range append(natsauth.Roles, natsauth.AllInOne) {
		if pw == natsauth.DevPassword(r) {
			return true
		}
	}
	return false
}

// hasDevDatabasePassword reports whether the database URL logs in with
// store.DefaultURL's password (deploy/dev/postgres.sh creates it). The
// password pgx would use counts: from the URL, PGPASSWORD or a pgpass
// file. An unparsable URL is left to the connection to report.
func hasDevDatabasePassword(dsn string) bool {
	dev, err := pgconn.ParseConfig(store.DefaultURL)
	if err != nil || dev.Password == "" {
		return false
	}
	c, err := pgconn.ParseConfig(dsn)
	return err == nil && c.Password == dev.Password
}

// listenAddr is a listener's flag and its configured address.
type listenAddr struct{ flag, addr string }

// listenAddrs are the listeners the roles open.
func listenAddrs(cfg config.Config, roles config.Role) []listenAddr {
	out := []listenAddr{{"--http", cfg.HTTPAddr}}
	if roles&config.RoleGateway != 0 {
		out = append(out, listenAddr{"--ws", cfg.WSAddr}, listenAddr{"--tcp", cfg.TCPAddr})
	}
	if roles&config.RoleEmbeddedNATS != 0 {
		out = append(out, listenAddr{"--nats-listen", cfg.NATSListen})
		if cfg.ClusterListen != "" {
			out = append(out, listenAddr{"--cluster-listen", cfg.ClusterListen})
		}
	}
	// checkDebugAddr refuses a debug address beyond loopback anyway; it is
	// listed so that the rule here does not depend on that one.
	if cfg.DebugHTTPAddr != "" { // "": off
		out = append(out, listenAddr{"--debug-http", cfg.DebugHTTPAddr})
	}
	return out
}

// reachable lists the configured addresses of the roles that are not
// loopback, as "<flag> <address>" (NATS URLs without their user info).
func reachable(cfg config.Config, roles config.Role) []string {
	var out []string
	for _, a := range listenAddrs(cfg, roles) {
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil || !isLoopback(host) {
			out = append(out, a.flag+" "+a.addr)
		}
	}
	if roles&config.RoleEmbeddedNATS == 0 {
		for _, s := range strings.Split(cfg.NATSURL, ",") {
			s = strings.TrimSpace(s)
			if !strings.Contains(s, "://") {
				s = "nats://" + s // as nats.go reads a bare host:port
			}
			u, err := url.Parse(s)
			if err != nil {
				out = append(out, "--nats (an unparsable URL)")
			} else if !isLoopback(u.Hostname()) {
				out = append(out, "--nats "+u.Host)
			}
		}
	}
	return out
}

// isLoopback: a loopback IP or "localhost". An empty host and the
// unspecified addresses (0.0.0.0, ::) listen on every interface; any other
// name may resolve anywhere.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// andList joins "a", "a and b", "a, b and c".
func andList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
