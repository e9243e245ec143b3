// Package deploy holds no code: its tests check the deploy files
// (deploy/nats, deploy/systemd, deploy/env, deploy/compose, deploy/grafana)
// against the code they configure, so that the two cannot drift apart.
package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/testenv"
)

// clusterNodes are the node files of the 3-node cluster.
var clusterNodes = []string{"nats/cluster/nats-1.conf", "nats/cluster/nats-2.conf", "nats/cluster/nats-3.conf"}

// natsEnv sets the variables the cluster files read, as nats.env does.
func natsEnv(t *testing.T, routes string) map[string]string {
	env := map[string]string{
		"INBOXD_NATS_PASSWORD_SYS": "pw-sys",
		"INBOXD_CLUSTER_PASSWORD":  "pw-route",
		"INBOXD_NATS_ROUTES":       routes,
	}
	for _, r := range natsauth.Roles {
		env["INBOXD_NATS_PASSWORD_"+strings.ToUpper(string(r))] = "pw-" + string(r)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return env
}

// natsServer builds the stock nats-server of go.mod's version (a second
// with the build cache).
func natsServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go tool to build nats-server: %v", err)
		}
	}
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
	if err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}
	return bin
}

// Every node file is a configuration the stock nats-server accepts
// (`nats-server -t`), and only with every secret variable set: a missing
// one fails the check, naming it.
func TestNATSClusterConfigsPassNATSServerCheck(t *testing.T) {
	bin := natsServer(t)
	env := natsEnv(t, "[nats-route://route:pw-route@nats-1:6222, nats-route://route:pw-route@nats-2:6222, nats-route://route:pw-route@nats-3:6222]")
	files := append([]string{"nats/inboxd.conf"}, clusterNodes...)
	for _, f := range files {
		out, err := exec.Command(bin, "-t", "-c", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "is valid") {
			t.Errorf("nats-server -t -c %s: %v\n%s", f, err, out)
		}
	}
	// The check reads the environment: without the route password the
	// same file is refused.
	cmd := exec.Command(bin, "-t", "-c", clusterNodes[0])
	for k, v := range env {
		if k != "INBOXD_CLUSTER_PASSWORD" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "INBOXD_CLUSTER_PASSWORD") {
		t.Errorf("nats-server -t without INBOXD_CLUSTER_PASSWORD: %v\n%s; want an error naming it", err, out)
	}
}

// The cluster files, as nats-server parses them: distinct server names,
// one cluster with route authentication, the routes from the environment,
// JetStream with a store dir and limits, the system account, and the users
// of internal/natsauth with exactly its permissions.
func TestNATSClusterConfigsMatchNatsauth(t *testing.T) {
	routes := "[nats-route://route:pw-route@nats-1:6222, nats-route://route:pw-route@nats-2:6222, nats-route://route:pw-route@nats-3:6222]"
	natsEnv(t, routes)
	names := map[string]bool{}
	for i, f := range clusterNodes {
		opts, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := "nats-" + strconv.Itoa(i+1); opts.ServerName != want {
			t.Errorf("%s: server_name %q, want %q", f, opts.ServerName, want)
		}
		names[opts.ServerName] = true
		if opts.Cluster.Name != "inboxd" || opts.Cluster.Port != 6222 {
			t.Errorf("%s: cluster %q port %d, want inboxd on 6222", f, opts.Cluster.Name, opts.Cluster.Port)
		}
		if opts.Cluster.Username != "route" || opts.Cluster.Password != "pw-route" {
			t.Errorf("%s: route authorization %q/%q, want route/$INBOXD_CLUSTER_PASSWORD", f, opts.Cluster.Username, opts.Cluster.Password)
		}
		if len(opts.Routes) != 3 {
			t.Errorf("%s: %d routes, want the 3 of $INBOXD_NATS_ROUTES", f, len(opts.Routes))
		}
		for _, r := range opts.Routes {
			if pw, _ := r.User.Password(); r.User.Username() != "route" || pw != "pw-route" {
				t.Errorf("%s: route %s does not log in as route", f, r.Host)
			}
		}
		if !opts.JetStream || opts.StoreDir != "/var/lib/nats/jetstream" || opts.JetStreamMaxStore <= 0 || opts.JetStreamMaxMemory <= 0 {
			t.Errorf("%s: jetstream %v store %q max_file %d max_mem %d, want on with a store dir and both limits",
				f, opts.JetStream, opts.StoreDir, opts.JetStreamMaxStore, opts.JetStreamMaxMemory)
		}
		if opts.MaxConn != 4096 || opts.MaxPayload != 1<<20 || opts.LameDuckDuration != 30*time.Second {
			t.Errorf("%s: max_connections %d, max_payload %d, lame_duck_duration %s", f, opts.MaxConn, opts.MaxPayload, opts.LameDuckDuration)
		}
		if opts.HTTPHost != "127.0.0.1" {
			t.Errorf("%s: monitoring on %q, want loopback", f, opts.HTTPHost)
		}
		if opts.SystemAccount != "SYS" {
			t.Errorf("%s: system account %q, want SYS", f, opts.SystemAccount)
		}
		seen := map[natsauth.Role]bool{}
		for _, u := range opts.Users {
			if u.Account != nil && u.Account.Name == "SYS" {
				if u.Username != "sys" {
					t.Errorf("%s: system account user %q, want only sys", f, u.Username)
				}
				continue
			}
			r := natsauth.Role(u.Username)
			seen[r] = true
			if u.Password != "pw-"+u.Username {
				t.Errorf("%s: %s's password is not $INBOXD_NATS_PASSWORD_%s", f, r, strings.ToUpper(u.Username))
			}
			if want := natsauth.Permissions(r, 16); !reflect.DeepEqual(u.Permissions, want) {
				t.Errorf("%s: %s's permissions differ from internal/natsauth", f, r)
			}
		}
		for _, r := range natsauth.Roles {
			if !seen[r] {
				t.Errorf("%s: no user %s", f, r)
			}
		}
		if len(seen) != len(natsauth.Roles) {
			t.Errorf("%s: users %v, want exactly natsauth.Roles", f, seen)
		}
	}
	if len(names) != 3 {
		t.Errorf("server names %v, want 3 distinct", names)
	}
}

// The three node files, run by the stock nats-server on loopback ports
// (the files as they are, but for the addresses and the store dir), form
// one JetStream cluster: the syncer user creates an R3 stream, which gets
// a leader and two current replicas. A fourth server with the wrong route
// password is refused by every node and never joins.
func TestNATSClusterFormsWithRouteAuthentication(t *testing.T) {
	bin := natsServer(t)
	type node struct{ client, cluster, http int }
	nodes := make([]node, 3)
	var routes []string
	for i := range nodes {
		nodes[i] = node{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
		routes = append(routes, "nats-route://route:pw-route@127.0.0.1:"+strconv.Itoa(nodes[i].cluster))
	}
	env := natsEnv(t, "["+strings.Join(routes, ", ")+"]")
	dir := t.TempDir()
	copyTree(t, "nats", filepath.Join(dir, "nats"))
	start := func(name string, n node, extra map[string]string) {
		t.Helper()
		conf := filepath.Join(dir, "nats", "cluster", name+".conf")
		if _, err := os.Stat(conf); err != nil {
			// The rogue: node 1's file under another name.
			b, _ := os.ReadFile(clusterNodes[0])
			writeFile(t, conf, strings.Replace(string(b), "server_name: nats-1", "server_name: "+name, 1))
		}
		shared := filepath.Join(dir, "nats", "cluster", "cluster-"+name+".conf")
		b, err := os.ReadFile(filepath.Join(dir, "nats", "cluster", "cluster.conf"))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer(
			"listen: 0.0.0.0:4222", "listen: 127.0.0.1:"+strconv.Itoa(n.client),
			"http: 127.0.0.1:8222", "http: 127.0.0.1:"+strconv.Itoa(n.http),
			"listen: 0.0.0.0:6222", "listen: 127.0.0.1:"+strconv.Itoa(n.cluster),
			"store_dir: /var/lib/nats/jetstream", "store_dir: "+filepath.Join(dir, "js-"+name),
		).Replace(string(b))
		if s == string(b) {
			t.Fatal("cluster.conf: the addresses to replace are not there")
		}
		writeFile(t, shared, s)
		nb, _ := os.ReadFile(conf)
		writeFile(t, conf, strings.Replace(string(nb), "include ./cluster.conf", "include ./cluster-"+name+".conf", 1))
		cmd := exec.Command(bin, "-c", conf)
		for k, v := range env {
			if w, ok := extra[k]; ok {
				v = w
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		log, _ := os.Create(filepath.Join(dir, name+".log"))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for i, n := range nodes {
		start("nats-"+strconv.Itoa(i+1), n, nil)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"nats-1", "nats-2", "nats-3", "rogue"} {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Logf("%s.log:\n%s", name, b)
			}
		}
	})
	syncer := connect(t, nodes[0].client, natsauth.Syncer)
	js, err := jetstream.New(syncer)
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := ctxTimeout(5 * time.Second)
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "SEND", Subjects: []string{"send.*.*"}, Replicas: 3, Storage: jetstream.FileStorage})
		if err == nil {
			info, err = st.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2 &&
			info.Cluster.Replicas[0].Current && info.Cluster.Replicas[1].Current {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no R3 stream with a leader and 2 current replicas within 30 s: %v %+v (logs in %s)", err, info, dir)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("SEND R3: leader %s, replicas %s and %s", info.Cluster.Leader, info.Cluster.Replicas[0].Name, info.Cluster.Replicas[1].Name)

	// The rogue knows the routes but not the password.
	rogue := node{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	start("rogue", rogue, map[string]string{"INBOXD_NATS_ROUTES": "[nats-route://route:wrong@127.0.0.1:" + strconv.Itoa(nodes[0].cluster) + "]"})
	time.Sleep(3 * time.Second) // several connect attempts (a route retries every second)
	for i, n := range nodes {
		rz := routez(t, n.http)
		if len(rz.Routes) == 0 {
			t.Errorf("nats-%d has no routes", i+1)
		}
		for _, r := range rz.Routes {
			if r.RemoteName == "rogue" {
				t.Errorf("nats-%d accepted a route from the server with the wrong password", i+1)
			}
		}
	}
	if rz := routez(t, rogue.http); len(rz.Routes) != 0 {
		t.Errorf("the rogue server has %d routes, want none", len(rz.Routes))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "nats-1.log")); !strings.Contains(string(b), "Router connection closed: Authentication Failure") {
		t.Errorf("nats-1 logged no authorization error for the rogue route:\n%s", b)
	}
}

type routezResp struct {
	Routes []struct {
		RemoteName string `json:"remote_name"`
	} `json:"routes"`
}

func routez(t *testing.T, port int) routezResp {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/routez")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rz routezResp
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		t.Fatal(err)
	}
	return rz
}

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func connect(t *testing.T, port int, r natsauth.Role) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	var err error
	for range 100 {
		nc, err = nats.Connect("nats://127.0.0.1:"+strconv.Itoa(port), nats.UserInfo(string(r), "pw-"+string(r)),
			nats.CustomInboxPrefix(natsauth.InboxPrefix(r)))
		if err == nil {
			t.Cleanup(nc.Close)
			return nc
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("connect as %s on %d: %v", r, port, err)
	return nil
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
