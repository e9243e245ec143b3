package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A device's revocation is its own or its user's, whichever is later; a
// second revocation moves revoked_at on; Login reads it with the summary
// and the device's mirrored cursor;
// RecentRevocations returns those of the window; a bad uid or device is
// refused.
func TestRevocations(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	if at, err := st.RevokedAt(ctx, 7, "phone"); err != nil || !at.IsZero() {
		t.Fatalf("no revocation: %v %v, want zero", at, err)
	}
	phone, err := st.Revoke(ctx, 7, "phone")
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := st.RevokedAt(ctx, 7, "laptop"); !at.IsZero() {
		t.Fatalf("the phone's revocation covers the laptop: %v", at)
	}
	if at, _ := st.RevokedAt(ctx, 8, "phone"); !at.IsZero() {
		t.Fatalf("uid 7's revocation covers uid 8: %v", at)
	}
	time.Sleep(10 * time.Millisecond)
	user, err := st.Revoke(ctx, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"phone", "laptop"} {
		if at, _ := st.RevokedAt(ctx, 7, dev); !at.Equal(user) {
			t.Fatalf("%s: revoked at %v, want the user's later revocation %v", dev, at, user)
		}
	}
	again, err := st.Revoke(ctx, 7, "phone")
	if err != nil || !again.After(phone) {
		t.Fatalf("revoking again: %v %v, want a later revoked_at than %v", again, err, phone)
	}
	ls, err := st.Login(ctx, 7, "phone")
	if err != nil || !ls.RevokedAt.Equal(again) || len(ls.Convs) != 0 || ls.More || ls.CursorFound {
		t.Fatalf("Login: %+v %v, want revoked at %v, an empty summary and no cursor", ls, err, again)
	}
	// Login reads the device's mirrored cursor too, as GetDeviceCursor does.
	if err := st.SaveDeviceCursors(ctx, []store.DeviceCursor{{UID: 7, Device: "phone", Consumer: "d_7_x", AckSeq: 42, Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	ls, err = st.Login(ctx, 7, "phone")
	want, found, gerr := st.GetDeviceCursor(ctx, 7, "phone")
	if err != nil || gerr != nil || !found || !ls.CursorFound || ls.Cursor != want || ls.Cursor.AckSeq != 42 || ls.Cursor.Epoch != 3 || ls.Cursor.Consumer != "d_7_x" {
		t.Fatalf("Login after a cursor was saved: %+v %v; GetDeviceCursor %+v %v %v", ls.Cursor, err, want, found, gerr)
	}
	if ls, err := st.Login(ctx, 7, "laptop"); err != nil || ls.CursorFound || ls.Cursor.UID != 7 || ls.Cursor.Device != "laptop" {
		t.Fatalf("Login of a device without a cursor: %+v %v", ls.Cursor, err)
	}
	recent, err := st.RecentRevocations(ctx, time.Minute)
	if err != nil || len(recent) != 2 {
		t.Fatalf("recent revocations: %v %v, want the two rows of uid 7", recent, err)
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE revocation SET revoked_at = now() - interval '1 hour' WHERE device = ''`); err != nil {
		t.Fatal(err)
	}
	if recent, _ := st.RecentRevocations(ctx, time.Minute); len(recent) != 1 || recent[0].Device != "phone" {
		t.Fatalf("recent revocations of the last minute: %v, want only the phone's", recent)
	}
	for _, bad := range []struct {
		uid    int64
		device string
	}{{0, "x"}, {-1, ""}, {7, string([]byte{0xff})}, {7, string(make([]byte, 129))}} {
		if _, err := st.Revoke(ctx, bad.uid, bad.device); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Revoke(%d, %q): %v, want ErrInvalid", bad.uid, bad.device, err)
		}
	}
}
