package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Any gateway serves any user: a user's devices on two gateways (one NATS,
// one database) both get live messages; the device's second login on the
// other gateway gets the session, the first is told SESSION_REPLACED, and
// live messages reach the device where it is now connected.
func TestAnyGatewayServesAnyUser(t *testing.T) {
	n := testnode.AllInOne(t)
	g2 := testnode.Gateway(t, n, gateway.Options{})
	conv := createConv(t, n, false, 1, 2)
	sender := dial(t, n, "ws", 1, "desk")

	recv := func(url string, device string) (*client.Client, chan int64) {
		got := make(chan int64, 100)
		c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: url, Token: testenv.Token(t, 2, device),
			Handler: func(m client.Message) error { got <- m.MsgID; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, got
	}
	wait := func(what string, got chan int64, want int64) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case id := <-got:
				if id == want {
					return
				}
			case <-deadline:
				t.Fatalf("%s did not get msg_id %d", what, want)
			}
		}
	}
	send := func(text string) int64 {
		t.Helper()
		r, err := sender.Send(ctxT(t, 10*time.Second), conv, text, text)
		if err != nil {
			t.Fatal(err)
		}
		return r.MsgID
	}

	phone1, phoneGot1 := recv(n.Gateway.WSURL(), "phone")
	_, laptopGot := recv(g2.WSURL(), "laptop")
	id := send("one")
	wait("the phone on gateway 1", phoneGot1, id)
	wait("the laptop on gateway 2", laptopGot, id)

	_, phoneGot2 := recv(g2.WSURL(), "phone")
	select {
	case <-phone1.Done():
		if !errors.Is(phone1.Err(), client.ErrReplaced) {
			t.Fatalf("the phone's first login ended with %v, want ErrReplaced", phone1.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the phone's login on gateway 2 did not replace its login on gateway 1")
	}
	for k := range 3 {
		id := send(fmt.Sprint("after ", k))
		wait("the phone on gateway 2", phoneGot2, id)
		wait("the laptop on gateway 2", laptopGot, id)
	}
}
