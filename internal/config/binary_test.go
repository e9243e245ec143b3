package config_test

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
)

// build builds cmd/<name> into a temporary directory.
func build(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runInboxd runs bin with args and extra environment variables, and returns
// its stderr and exit status.
func runInboxd(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &exit):
		return stderr.String(), exit.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return "", 0
}

// The secrets a deployment gives through the environment; distinctive so
// that any trace of them in the output is found.
var envSecrets = map[string]string{
	"INBOXD_TOKEN_SECRET": "tok-secret-3f9a1c77",
	"NATS_PASSWORD":       "nats-pass-8e2d5b41",
	"DATABASE_URL":        "postgres://inboxd:db-pass-61c0aa93@db.internal:5432/inboxd",
}

// A typo on the command line and --help print neither a secret from the
// environment nor the development secret, and the typo exits with status 2
// (inboxd has the token secret and the database URL, the gateway the NATS
// password too).
func TestBinaryFlagErrorPrintsNoSecret(t *testing.T) {
	var env []string
	for k, v := range envSecrets {
		env = append(env, k+"="+v)
	}
	hidden := map[string]string{"the development secret": auth.DevSecret, "the database password": "db-pass-61c0aa93"}
	for k, v := range envSecrets {
		hidden[k] = v
	}
	for _, name := range []string{"inboxd", "gateway"} {
		bin := build(t, name)
		for _, tc := range []struct {
			args   []string
			status int
		}{
			{[]string{"--tokn-secret", "x"}, 2},
			{[]string{"--help"}, 0},
		} {
			stderr, status := runInboxd(t, bin, env, tc.args...)
			cmd := name + " " + strings.Join(tc.args, " ")
			if status != tc.status {
				t.Errorf("%s: exit status %d, want %d\n%s", cmd, status, tc.status, stderr)
			}
			if !strings.Contains(stderr, "--token-secret") {
				t.Errorf("%s: stderr names no flag (no usage?):\n%s", cmd, stderr)
			}
			for what, v := range hidden {
				if strings.Contains(stderr, v) {
					t.Errorf("%s prints %s (%q):\n%s", cmd, what, v, stderr)
				}
			}
		}
	}
}

// A malformed value in the environment stops the binary with status 2 and
// a message naming the variable (it was silently ignored). --log-level is
// invalid too, so that a binary that ignores the variable stops at its
// logger instead of starting a system.
func TestBinaryMalformedEnvFails(t *testing.T) {
	bin := build(t, "inboxd")
	for _, tc := range []struct{ env, want string }{
		{"INBOXD_HEARTBEAT=5x", `env INBOXD_HEARTBEAT: invalid duration "5x"`},
		{"INBOXD_NODE_ID=seven", `env INBOXD_NODE_ID: invalid integer "seven"`},
		{"INBOXD_SEND_PARTITIONS=16x", `env INBOXD_SEND_PARTITIONS: invalid integer "16x"`},
	} {
		stderr, status := runInboxd(t, bin, []string{tc.env}, "--log-level", "tripwire")
		if status != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit status %d, stderr %q; want status 2 and %q", tc.env, status, stderr, tc.want)
		}
	}
}
