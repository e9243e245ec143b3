package streams

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DeviceConsumer returns the durable consumer name of a device's cursor:
// d_<uid>_<first 16 hex digits of sha256(device)>. Device ids are arbitrary
// client strings; the hash keeps names free of '.', '*', '>' and spaces and
// bounded (at most 41 bytes). Postgres device_cursor holds the name under a
// unique index, so two devices of a user that collided would fail loudly
// rather than share a cursor (the chance is 2^-64 per pair).
func DeviceConsumer(uid int64, device string) string {
	h := sha256.Sum256([]byte(device))
	return "d_" + strconv.FormatInt(uid, 10) + "_" + hex.EncodeToString(h[:8])
}

// DeviceConsumerConfig returns the cursor consumer of (uid, device) in
// partition p, from jetstream/consumers/INBOX_device.json. startSeq 0
// delivers the user's whole retained inbox; otherwise delivery (and the
// lowest position the cursor can be reset to) starts at startSeq.
func DeviceConsumerConfig(p int, uid int64, device string, startSeq uint64, inactive time.Duration) (jetstream.ConsumerConfig, error) {
	return deviceConsumerConfig(p, uid, device, startSeq, time.Time{}, inactive)
}

// NewDeviceConsumerConfig returns the cursor consumer of a device seen for
// the first time: delivery starts at the first entry stored at or after
// since (the new-device window).
func NewDeviceConsumerConfig(p int, uid int64, device string, since time.Time, inactive time.Duration) (jetstream.ConsumerConfig, error) {
	return deviceConsumerConfig(p, uid, device, 0, since, inactive)
}

func deviceConsumerConfig(p int, uid int64, device string, startSeq uint64, since time.Time, inactive time.Duration) (jetstream.ConsumerConfig, error) {
	var c jetstream.ConsumerConfig
	if err := decode("consumers/INBOX_device.json", &c); err != nil {
		return c, err
	}
	if c.FilterSubject != "inbox.0.0" {
		return c, errors.New("streams: INBOX_device.json must be written for uid 0 in partition 0 (filter inbox.0.0)")
	}
	c.Durable = DeviceConsumer(uid, device)
	c.Name = c.Durable
	c.FilterSubject = InboxSubject(p, uid)
	c.Description = "inboxd device cursor: uid " + strconv.FormatInt(uid, 10)
	switch {
	case startSeq > 0:
		c.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		c.OptStartSeq = startSeq
	case !since.IsZero():
		c.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		c.OptStartTime = &since
	}
	if inactive > 0 {
		c.InactiveThreshold = inactive
	}
	return c, nil
}

// ArchiverConsumerConfig returns the archiver of INBOX_<p>, from
// jetstream/consumers/INBOX_archiver.json.
func ArchiverConsumerConfig() (jetstream.ConsumerConfig, error) {
	var c jetstream.ConsumerConfig
	err := decode("consumers/INBOX_archiver.json", &c)
	return c, err
}

// ArchiverGroup is the pinned priority group of the archivers.
const ArchiverGroup = "archiver"

// Per-user core NATS subjects (not stored): the fanout announces each new
// inbox entry on UserLive right after JetStream acknowledged it, and a
// gateway announces a device login on UserKick so that another gateway
// holding the same device closes its session. A gateway subscribes to
// UserLive (a literal subscription) for each user connected to it, and to
// every user's UserKick (AllUserKicks, one subscription).
func UserLive(p int, uid int64) string {
	return "inboxd.u." + strconv.Itoa(p) + "." + strconv.FormatInt(uid, 10) + ".live"
}

// UserKick is the subject of login announcements of uid.
func UserKick(p int, uid int64) string {
	return "inboxd.u." + strconv.Itoa(p) + "." + strconv.FormatInt(uid, 10) + ".kick"
}

// AllUserKicks matches every user's UserKick: a gateway holds one
// subscription to it for all its users.
const AllUserKicks = "inboxd.u.*.*.kick"

// UserWildcard matches UserLive and UserKick of uid.
func UserWildcard(p int, uid int64) string {
	return "inboxd.u." + strconv.Itoa(p) + "." + strconv.FormatInt(uid, 10) + ".*"
}
