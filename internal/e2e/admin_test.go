package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// `nats micro ls` sends $SRV.PING and lists who answers; `nats micro info`
// asks $SRV.INFO.<name>.
func TestAdminServiceIsDiscoverable(t *testing.T) {
	n := testnode.AllInOne(t)
	msg, err := testnode.Admin(t, n).Request("$SRV.INFO."+admin.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Name      string `json:"name"`
		Endpoints []struct {
			Name    string `json:"name"`
			Subject string `json:"subject"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, e := range info.Endpoints {
		subjects[e.Subject] = true
	}
	for _, s := range []string{admin.SubjectConvCreate, admin.SubjectConvAdd, admin.SubjectConvRemove, admin.SubjectConvShow,
		admin.SubjectUserDelete, admin.SubjectUserDeletion, admin.SubjectUsage} {
		if !subjects[s] {
			t.Errorf("endpoint %s not advertised (have %v)", s, subjects)
		}
	}
}

func TestAdminAPIManagesConversations(t *testing.T) {
	n := testnode.AllInOne(t)
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	ctx := ctxT(t, 20*time.Second)
	r, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2, 3}, Group: true})
	if err != nil || !r.Created {
		t.Fatalf("create: %+v %v", r, err)
	}
	if _, err := ac.AddMembers(ctx, admin.MembersRequest{ConvID: r.ConvID, Members: []int64{4}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.RemoveMembers(ctx, admin.MembersRequest{ConvID: r.ConvID, Members: []int64{1}}); err != nil {
		t.Fatal(err)
	}
	c, err := ac.ShowConv(ctx, r.ConvID)
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, m := range c.Members {
		if m.LeftSeq == nil {
			active++
		}
	}
	if active != 3 || len(c.Members) != 4 {
		t.Fatalf("members %+v", c.Members)
	}
	var ae *admin.Error
	if _, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2, 3}}); !errors.As(err, &ae) || ae.Code != admin.CodeBadRequest {
		t.Fatalf("direct with three members: %v", err)
	}
	if _, err := ac.ShowConv(ctx, 987654); !errors.As(err, &ae) || ae.Code != admin.CodeNotFound {
		t.Fatalf("missing conversation: %v", err)
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	n := testnode.AllInOne(t)
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "inboxd_gateway_connections"} {
		resp, err := http.Get("http://" + n.Ops.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, b)
		}
	}
}
