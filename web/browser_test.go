package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Backlogs seeded before the browsers log in: the direct conversation of
// users 1 and 2 gets enough for two history pages, the one of users 1 and
// 3 enough that a device's backfill of it takes seconds when the page
// holds each message a little (the page's delay setting), so that a live
// message can be seen arriving while it runs.
const (
	backlog12 = 30
	backlog13 = 1000
)

// TestBrowser runs the web client in Debian's headless Chromium against a
// real all-in-one (web/test/browser.test.mjs says what it checks). It
// needs what `make web` installs; without it the test fails saying so,
// never skips.
func TestBrowser(t *testing.T) {
	chromium := os.Getenv("INBOXD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the browser test needs Chromium at %s (INBOXD_CHROMIUM): run `make web` (deploy/dev/chromium.sh installs Debian's chromium): %v", chromium, err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the browser test needs Node.js 20 or later: %v", err)
	}
	if _, err := os.Stat("test/node_modules/playwright-core/package.json"); err != nil {
		t.Fatalf("the browser test needs web/test's packages: run `make web` (npm ci in web/test): %v", err)
	}
	artifacts, err := filepath.Abs("../build/web")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	n := devNode(t, auth.DevSecret, nil)
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conv := func(members ...int64) int64 {
		r, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: members})
		if err != nil {
			t.Fatal(err)
		}
		return r.ConvID
	}
	c12, c13, c23 := conv(1, 2), conv(1, 3), conv(2, 3)
	seed(ctx, t, n, 2, c12, backlog12)
	seed(ctx, t, n, 3, c13, backlog13)

	// user 2's page logs in with a pasted token, as against a gateway
	// without the development secret.
	token2, err := auth.NewSigner(auth.DevSecret).Issue(2, "laptop", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(nodeBin, "--test", "--test-reporter=spec", "browser.test.mjs")
	cmd.Dir = "test"
	cmd.Env = append(os.Environ(),
		"INBOXD_APP_URL="+appBase(n)+"/app/",
		"INBOXD_CHROMIUM="+chromium,
		"INBOXD_TOKEN_2="+token2,
		"INBOXD_ARTIFACTS="+artifacts,
		"INBOXD_CONV_12="+strconv.FormatInt(c12, 10),
		"INBOXD_CONV_13="+strconv.FormatInt(c13, 10),
		"INBOXD_CONV_23="+strconv.FormatInt(c23, 10),
		"INBOXD_BACKLOG_12="+strconv.Itoa(backlog12),
		"INBOXD_BACKLOG_13="+strconv.Itoa(backlog13),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test browser.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("browser test failed (%v); screenshots in %s", err, artifacts)
	}
}

// seed stores count messages "backlog <i>" from uid in conv, in order.
func seed(ctx context.Context, t *testing.T, n *node.Node, uid, conv int64, count int) {
	t.Helper()
	tok, err := auth.NewSigner(auth.DevSecret).Issue(uid, "seeder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sends := make([]*client.PendingSend, count)
	for i := range sends {
		sends[i] = c.SendAsync(conv, fmt.Sprintf("seed-%d-%d-%d", uid, conv, i), fmt.Sprintf("backlog %d", i+1))
	}
	for i, s := range sends {
		if _, err := s.Wait(ctx); err != nil {
			t.Fatalf("seed %d of conversation %d: %v", i+1, conv, err)
		}
	}
}
