package deploy

import (
	"bufio"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
)

// units are the systemd units, with the config role of their binary
// (0: not an inboxd binary).
var units = map[string]config.Role{
	"inboxd.service":            config.RoleAllInOne,
	"inboxd-gateway.service":    config.RoleGateway,
	"inboxd-fanout.service":     config.RoleFanout,
	"inboxd-syncer.service":     config.RoleSyncer,
	"inboxd-pushbridge.service": 0, // cmd/pushbridge: another helper's flags
	"inboxd-nats@.service":      0,
}

// notFlags are the variables of deploy/env that are no flag's: the NATS
// passwords the services read by role (natsauth.Password), and settings
// of work merged separately.
var notFlags = map[string]string{
	// Route authentication of the embedded cluster (issue 14, the
	// cluster work): the all-in-one's route password.
	"INBOXD_CLUSTER_PASSWORD": "cluster",
}

func init() {
	for _, r := range append(natsauth.Roles, natsauth.AllInOne) {
		notFlags["INBOXD_NATS_PASSWORD_"+strings.ToUpper(string(r))] = "natsauth"
	}
}

// flagVars returns the environment variables of the flags of a binary
// with roles.
func flagVars(roles config.Role) map[string]bool {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c := config.DefaultsFor(roles)
	c.Register(fs, roles)
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		for _, v := range config.EnvVars(f.Name) {
			out[v] = true
		}
	})
	return out
}

// unitLines returns a unit's key=value lines, section-qualified keys
// ("Service.DynamicUser") to their values in order.
func unitLines(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "[") {
			section = strings.Trim(l, "[]")
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		out[section+"."+k] = append(out[section+"."+k], v)
	}
	return out
}

// Every unit carries the hardening and the restart policy, reads its
// settings from an environment file of deploy/env, and starts a binary
// this repository builds (or the stock nats-server).
func TestSystemdUnitsAreHardened(t *testing.T) {
	files, _ := filepath.Glob("systemd/*.service")
	if len(files) != len(units) {
		t.Errorf("deploy/systemd has %v, want the units %v", files, units)
	}
	for name := range units {
		u := unitLines(t, filepath.Join("systemd", name))
		for _, kv := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes",
			"ProtectHome=yes", "Restart=on-failure", "CapabilityBoundingSet="} {
			k, v, _ := strings.Cut(kv, "=")
			if got := u["Service."+k]; len(got) == 0 || got[len(got)-1] != v {
				t.Errorf("%s: %s=%v, want %s", name, k, got, v)
			}
		}
		if len(u["Service.LimitNOFILE"]) == 0 {
			t.Errorf("%s: no LimitNOFILE", name)
		}
		if len(u["Service.ReadWritePaths"]) == 0 && len(u["Service.StateDirectory"]) == 0 {
			t.Errorf("%s: neither ReadWritePaths nor StateDirectory says what it may write", name)
		}
		envs := u["Service.EnvironmentFile"]
		if len(envs) == 0 {
			t.Errorf("%s: no EnvironmentFile", name)
		}
		for _, e := range envs {
			base := strings.TrimPrefix(e, "/etc/inboxd/")
			if base == e || strings.Contains(base, "/") {
				t.Errorf("%s: EnvironmentFile %s is not /etc/inboxd/<file>", name, e)
				continue
			}
			if _, err := os.Stat(filepath.Join("env", base)); err != nil {
				t.Errorf("%s: EnvironmentFile %s has no template deploy/env/%s", name, e, base)
			}
		}
		argv := strings.Fields(u["Service.ExecStart"][0])
		switch {
		case name == "inboxd-nats@.service":
			if argv[0] != "/usr/local/bin/nats-server" || argv[len(argv)-1] != "/etc/inboxd/nats/cluster/nats-%i.conf" {
				t.Errorf("%s: ExecStart %v, want nats-server -c /etc/inboxd/nats/cluster/nats-%%i.conf (deploy/nats/cluster)", name, argv)
			}
		case units[name] != 0:
			bin := strings.TrimPrefix(argv[0], "/opt/inboxd/bin/")
			if _, err := os.Stat(filepath.Join("..", "cmd", bin)); err != nil || bin == argv[0] {
				t.Errorf("%s: ExecStart %s is no binary of cmd/ in /opt/inboxd/bin", name, argv[0])
			}
		}
	}
}

// Every variable of an environment template is a setting its service
// has: a flag of the binary's roles (its INBOXD_ name), a NATS password of
// natsauth, or, for nats.env, a variable the cluster files read; and
// nats.env sets every variable they read.
func TestEnvTemplatesNameRealSettings(t *testing.T) {
	byFile := map[string]config.Role{}
	for name, roles := range units {
		for _, e := range unitLines(t, filepath.Join("systemd", name))["Service.EnvironmentFile"] {
			base := strings.TrimPrefix(e, "/etc/inboxd/")
			byFile[base] |= roles
		}
	}
	natsVars := confVars(t)
	for file, roles := range byFile {
		vars := envTemplate(t, filepath.Join("env", file))
		known := flagVars(roles)
		for v := range vars {
			switch {
			case file == "nats.env":
				if !natsVars[v] && v != "GOMEMLIMIT" {
					t.Errorf("env/nats.env: %s is read by no file of deploy/nats/cluster", v)
				}
			case file == "pushbridge.env":
				// cmd/pushbridge's flags are its own work's.
			case known[v] || notFlags[v] != "":
			default:
				t.Errorf("env/%s: %s is no setting of its service", file, v)
			}
		}
		if file == "nats.env" {
			for v := range natsVars {
				if _, ok := vars[v]; !ok {
					t.Errorf("env/nats.env lacks %s, which deploy/nats/cluster reads", v)
				}
			}
		}
	}
	// Each service's file holds its own NATS password, and no other's.
	for _, r := range []natsauth.Role{natsauth.Gateway, natsauth.Fanout, natsauth.Syncer} {
		vars := envTemplate(t, filepath.Join("env", string(r)+".env"))
		for _, o := range natsauth.Roles {
			_, has := vars["INBOXD_NATS_PASSWORD_"+strings.ToUpper(string(o))]
			if has != (o == r) {
				t.Errorf("env/%s.env: INBOXD_NATS_PASSWORD_%s present %v", r, strings.ToUpper(string(o)), has)
			}
		}
	}
}

var varRef = regexp.MustCompile(`[:=]\s*\$([A-Z_][A-Z0-9_]*)`)

// confVars returns the variables the cluster files read.
func confVars(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, f := range append([]string{"nats/auth.conf", "nats/cluster/cluster.conf"}, clusterNodes...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			for _, m := range varRef.FindAllStringSubmatch(l, -1) {
				out[m[1]] = true
			}
		}
	}
	return out
}

// envTemplate returns the variables a template sets (commented ones too:
// they are documented settings).
func envTemplate(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		k, v, ok := strings.Cut(l, "=")
		if ok && regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(k) {
			out[k] = v
		}
	}
	return out
}

// systemd-analyze verify accepts every unit (in a scratch root with
// stand-ins for the binaries): no unknown key, no bad value, no missing
// dependency. Skipped where systemd-analyze is not installed.
func TestSystemdUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	if _, err := os.Stat("/usr/lib/systemd/system/multi-user.target"); err != nil {
		t.Skip("no systemd unit directory to verify against")
	}
	root := t.TempDir()
	for _, d := range []string{"opt/inboxd/bin", "usr/local/bin", "usr/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copy unit dir: %v %s", err, out)
	}
	for _, l := range []string{"bin", "lib"} {
		_ = os.Symlink("usr/"+l, filepath.Join(root, l))
	}
	for _, b := range []string{"opt/inboxd/bin/inboxd", "opt/inboxd/bin/gateway", "opt/inboxd/bin/fanout", "opt/inboxd/bin/syncer",
		"opt/inboxd/bin/pushbridge", "usr/local/bin/nats-server", "usr/bin/kill"} {
		writeFile(t, filepath.Join(root, b), "#!/bin/sh\n")
		_ = os.Chmod(filepath.Join(root, b), 0o755)
	}
	var args []string
	names := make([]string, 0, len(units))
	for name := range units {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "etc/systemd/system", name), string(b))
		if strings.HasSuffix(name, "@.service") {
			name = strings.Replace(name, "@.", "@1.", 1)
		}
		args = append(args, name)
	}
	out, err := exec.Command(sa, append([]string{"verify", "--root=" + root}, args...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, name := range args {
		out, _ := exec.Command(sa, "security", "--offline=yes", "--root="+root, name).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("%s", lines[len(lines)-1])
	}
}

// compose.yaml is well-formed YAML of the shape compose reads: three NATS
// nodes on the cluster files and the nats-server of go.mod's version,
// Postgres, the services with settings that are their flags, secrets only
// from .env (required), and published ports on loopback only. It is not
// run here (no containers).
func TestComposeFileStructure(t *testing.T) {
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       map[string]string `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []string          `yaml:"ports"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	gomod, _ := os.ReadFile("../go.mod")
	natsVersion := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(gomod)
	roles := map[string]config.Role{"syncer": config.RoleSyncer, "fanout-1": config.RoleFanout, "fanout-2": config.RoleFanout,
		"gateway-1": config.RoleGateway, "gateway-2": config.RoleGateway}
	want := []string{"postgres", "nats-1", "nats-2", "nats-3"}
	for s := range roles {
		want = append(want, s)
	}
	for _, s := range want {
		if _, ok := doc.Services[s]; !ok {
			t.Errorf("compose.yaml: no service %s", s)
		}
	}
	secret := regexp.MustCompile(`PASSWORD|SECRET|DATABASE_URL`)
	for name, s := range doc.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s: port %s is published beyond loopback", name, p)
			}
		}
		for k, v := range s.Environment {
			if secret.MatchString(k) && !strings.Contains(v, ":?") {
				t.Errorf("%s: %s=%q is not a required variable of .env", name, k, v)
			}
		}
		if strings.HasPrefix(name, "nats-") {
			if len(natsVersion) < 2 || s.Image != "nats:"+string(natsVersion[1])+"-alpine" {
				t.Errorf("%s: image %s, want the nats-server of go.mod (%s)", name, s.Image, natsVersion)
			}
			conf := "/etc/inboxd/nats/cluster/" + name + ".conf"
			if len(s.Command) != 3 || s.Command[2] != conf {
				t.Errorf("%s: command %v, want nats-server -c %s", name, s.Command, conf)
			}
			mounted := false
			for _, v := range s.Volumes {
				mounted = mounted || v == "../nats:/etc/inboxd/nats:ro"
			}
			if !mounted {
				t.Errorf("%s: deploy/nats is not mounted at /etc/inboxd/nats", name)
			}
			for k := range confVars(t) {
				if _, ok := s.Environment[k]; !ok {
					t.Errorf("%s: %s, which the cluster files read, is not set", name, k)
				}
			}
		}
		if r, ok := roles[name]; ok {
			known := flagVars(r)
			for k := range s.Environment {
				if !known[k] && notFlags[k] == "" {
					t.Errorf("%s: %s is no setting of its binary", name, k)
				}
			}
			bin := strings.TrimPrefix(s.Command[0], "/opt/inboxd/bin/")
			if _, err := os.Stat(filepath.Join("..", "cmd", bin)); err != nil {
				t.Errorf("%s: command %v is no binary of cmd/", name, s.Command)
			}
			if s.Build["dockerfile"] != "deploy/compose/Dockerfile" {
				t.Errorf("%s: build %v", name, s.Build)
			}
		}
	}
	// The secrets compose requires are the ones env.example lists.
	example := envTemplate(t, "compose/env.example")
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+):\?`).FindAllStringSubmatch(string(b), -1) {
		if _, ok := example[m[1]]; !ok {
			t.Errorf("compose.yaml requires %s, which env.example does not list", m[1])
		}
	}
}
