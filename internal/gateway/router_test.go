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
