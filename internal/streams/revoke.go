package streams

import (
	"strconv"
	"strings"
	"time"
)

// A revocation is announced on the user's UserKick subject, so that every
// gateway holding a connection of the user hears it on the subscription
// it has anyway: "revoke <revoked_at unix ms> <device>", the device last
// (it may hold spaces; empty: every device of the user). A login
// announcement starts with a consumer name ("d_…"), never with "revoke ",
// and a gateway that does not know revocations finds no session of a
// consumer named "revoke" and ignores it.
const revokePrefix = "revoke "

// RevokeAnnouncement encodes the revocation of device (empty: every
// device) at at.
func RevokeAnnouncement(device string, at time.Time) []byte {
	return []byte(revokePrefix + strconv.FormatInt(at.UnixMilli(), 10) + " " + device)
}

// ParseRevokeAnnouncement decodes a RevokeAnnouncement; ok is false for
// anything else on the kick subject (a login announcement).
func ParseRevokeAnnouncement(b []byte) (device string, at time.Time, ok bool) {
	rest, ok := strings.CutPrefix(string(b), revokePrefix)
	if !ok {
		return "", time.Time{}, false
	}
	ms, device, ok := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return "", time.Time{}, false
	}
	return device, time.UnixMilli(n), true
}
