package gateway

import "testing"

// TestNewerLoginExactlyOneSurvives: of two logins of one device, each
// judging the other's kick, exactly one replaces the other (the later
// born; on equal times the greater session id), and a kick without a time
// (an older gateway) always replaces.
func TestNewerLoginExactlyOneSurvives(t *testing.T) {
	sess := func(born int64, id string) *session { return &session{id: id, c: &Conn{born: born}} }
	cases := []struct {
		name  string
		a, b  *session
		aWins bool
	}{
		{"later born wins", sess(200, "a"), sess(100, "b"), true},
		{"earlier born loses", sess(100, "z"), sess(200, "a"), false},
		{"tie broken by id", sess(100, "b"), sess(100, "a"), true},
	}
	for _, tc := range cases {
		bReplacesA := newerLogin(tc.a, tc.b.c.born, tc.b.id)
		aReplacesB := newerLogin(tc.b, tc.a.c.born, tc.a.id)
		if aReplacesB == bReplacesA {
			t.Errorf("%s: a replaces b %v, b replaces a %v: want exactly one", tc.name, aReplacesB, bReplacesA)
		}
		if aReplacesB != tc.aWins {
			t.Errorf("%s: a replaces b = %v, want %v", tc.name, aReplacesB, tc.aWins)
		}
	}
	if !newerLogin(sess(100, "a"), 0, "b") {
		t.Error("a kick without a time did not replace the session")
	}
}

// TestLoginWaitsForEndingSessionOfItsDevice: a session that closed on its
// own leaves the router's users at once (no more live entries, no kicks)
// but stays in its ending table until its final cursor is saved; a login
// of the same device meanwhile gets it back from register, to wait for,
// and a login of another device does not. (The e2e
// TestReloginRightAfterCloseStartsAtFinalCursor closes and redials; this
// window, the final save's one round trip, it hits only by chance.)
func TestLoginWaitsForEndingSessionOfItsDevice(t *testing.T) {
	g := &Gateway{opts: Options{MaxConnsPerUser: 4}}
	r := &router{g: g, users: map[int64]*userEntry{7: {}}, ending: map[string]*session{}}
	born := int64(0)
	sess := func(device string) *session {
		born++
		return &session{uid: 7, device: device, consumer: "d_7_" + device, id: device, c: &Conn{born: born}}
	}
	// The laptop stays: the user's entry (its subscriptions, none here)
	// lives while the user has a routed session.
	laptop := sess("laptop")
	old := sess("phone")
	for _, s := range []*session{laptop, old} {
		if _, ending, err := r.register(s); err != nil || ending != nil {
			t.Fatalf("first login of %s: ending %v, err %v", s.device, ending, err)
		}
	}
	r.leave(old)
	if got := r.sessionsOf(7); len(got) != 1 || got[0] != laptop {
		t.Fatalf("routed after the phone left: %v, want the laptop alone", got)
	}
	if _, ending, err := r.register(sess("laptop")); err != nil || ending != nil {
		t.Fatalf("another device's login: ending %v, err %v; want none", ending, err)
	}
	next := sess("phone")
	replaced, ending, err := r.register(next)
	if err != nil || ending != old || len(replaced) != 0 {
		t.Fatalf("the device's next login: replaced %d, ending %p (want the closing session %p), err %v", len(replaced), ending, old, err)
	}
	r.left(old)
	r.leave(next)
	r.left(old) // late: the newer ending session stays
	if r.ending[next.consumer] != next {
		t.Fatal("an older session's left removed the newer ending session")
	}
	r.left(next)
	if _, ending, _ := r.register(sess("phone")); ending != nil {
		t.Fatalf("after its final save, a login still waits for %p", ending)
	}
}
