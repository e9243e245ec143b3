package natsembed_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/testenv"
)

// The route port asks for the cluster's password: a server that does not
// know it does not join; one that does, does.
func TestRoutesNeedTheClusterPassword(t *testing.T) {
	aRoute, bRoute := testenv.FreePort(t), testenv.FreePort(t)
	start := func(name string, route, peer int, password string) func() {
		s, err := natsembed.Start(natsembed.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), Name: name,
			ClusterListen: "127.0.0.1:" + strconv.Itoa(route), ClusterUser: "inboxd-route", ClusterPassword: password,
			Routes: []string{"nats://127.0.0.1:" + strconv.Itoa(peer)}})
		if err != nil {
			t.Fatal(err)
		}
		return s.Shutdown
	}
	a, err := natsembed.Start(natsembed.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), Name: "a",
		ClusterListen: "127.0.0.1:" + strconv.Itoa(aRoute), ClusterUser: "inboxd-route", ClusterPassword: "right",
		Routes: []string{"nats://127.0.0.1:" + strconv.Itoa(bRoute)}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	stop := start("intruder", bRoute, aRoute, "wrong")
	time.Sleep(2 * time.Second)
	if n := a.NumRoutes(); n != 0 {
		t.Fatalf("a server with a wrong cluster password joined: %d routes", n)
	}
	stop()
	defer start("b", bRoute, aRoute, "right")()
	deadline := time.Now().Add(10 * time.Second)
	for a.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a server with the cluster password did not join")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
