package store_test

import (
	"context"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A named pool's connections carry application_name inboxd-<name>, or
// <the URL's application_name>-<name>, at the size asked for; an unnamed
// one keeps what the URL says.
func TestOpenPoolNamesItsConnections(t *testing.T) {
	url := testenv.Database(t)
	for _, c := range []struct {
		url, name, want string
	}{
		{url, "send", "inboxd-send"},
		{url + "&application_name=eu1", "catchup", "eu1-catchup"},
		{url + "&application_name=eu1", "", "eu1"},
	} {
		st, err := store.OpenPool(context.Background(), c.url, c.name, 3)
		if err != nil {
			t.Fatal(err)
		}
		var app string
		err = st.Pool.QueryRow(context.Background(), `SELECT current_setting('application_name')`).Scan(&app)
		if size := st.Pool.Config().MaxConns; size != 3 {
			t.Errorf("pool %q: MaxConns %d, want 3", c.name, size)
		}
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if app != c.want {
			t.Errorf("pool %q of %s: application_name %q, want %q", c.name, c.url, app, c.want)
		}
	}
}
