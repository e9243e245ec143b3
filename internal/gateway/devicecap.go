package gateway

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// The device cap. Every new device id costs a durable consumer (about
// 46 KB and 3 files in the NATS server) and a device_cursor row, so a user
// may have at most MaxDevicesPerUser devices. A device counts while its
// row was seen within DeviceIdleReap (last_seen_at, refreshed while it is
// connected): those are the devices whose consumers still exist. One that
// counts always gets in; a new one, or one unused longer than that (its
// consumer is gone and would be created again), gets in only below the
// cap, and is otherwise refused at hello, before its consumer or row is
// created.
//
// The rows are written by the cursor mirror about a second after a login,
// so each gateway also counts the devices it admitted in the last
// recentDevice. Between gateways that second remains: a user logging in
// new devices on N gateways at once may end with up to N × the cap, once;
// from then on the rows count them all.

// deviceStore is where the device cap finds a user's recently seen devices.
type deviceStore interface {
	ActiveDevices(ctx context.Context, uid int64, device string, since time.Time, limit int) ([]string, error)
}

// recentDevice is how long a gateway counts a device it admitted itself:
// well past the mirror's one-second flush, and a flush retried through a
// short Postgres hiccup.
const recentDevice = time.Minute

type deviceCap struct {
	max     int
	seen    time.Duration // a device seen within it counts
	st      deviceStore
	refused prometheus.Counter

	mu    sync.Mutex
	users map[int64]*userDevices
}

// userDevices is what a gateway remembers of one user's devices.
type userDevices struct {
	admit   sync.Mutex // one admission of the user at a time here: its query and decision
	recent  []admitted // guarded by deviceCap.mu: devices admitted here, and when
	pending int        // guarded by deviceCap.mu: admissions under way (keeps the entry)
}

// admitted is a device a gateway admitted, and when. A user has a few
// devices, so a slice rather than a map: after a wave of logins every
// connected user has an entry for recentDevice, and a map of one device
// cost 475 bytes of it (`inboxbench conns --profile`).
type admitted struct {
	device string
	at     time.Time
}

// admittedAt returns when device was admitted here (ok false: not recently).
func (u *userDevices) admittedAt(device string) (time.Time, bool) {
	for _, a := range u.recent {
		if a.device == device {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// record notes device as admitted at now.
func (u *userDevices) record(device string, now time.Time) {
	for i := range u.recent {
		if u.recent[i].device == device {
			u.recent[i].at = now
			return
		}
	}
	u.recent = append(u.recent, admitted{device, now})
}

func newDeviceCap(max int, seen time.Duration, st deviceStore, refused prometheus.Counter) *deviceCap {
	return &deviceCap{max: max, seen: seen, st: st, refused: refused, users: make(map[int64]*userDevices)}
}

// admit reports whether uid's device may log in. A device admitted here
// within recentDevice gets in without a query; any other asks Postgres.
func (d *deviceCap) admit(ctx context.Context, uid int64, device string) (bool, error) {
	now := time.Now()
	d.mu.Lock()
	u := d.users[uid]
	if u == nil {
		u = &userDevices{}
		d.users[uid] = u
	}
	if t, ok := u.admittedAt(device); ok && now.Sub(t) < recentDevice {
		d.mu.Unlock()
		return true, nil
	}
	u.pending++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		u.pending--
		d.mu.Unlock()
	}()

	// Two new devices of one user logging in here at once must not both
	// take the last place.
	u.admit.Lock()
	defer u.admit.Unlock()
	rows, err := d.st.ActiveDevices(ctx, uid, device, now.Add(-d.seen), d.max+1)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// ActiveDevices puts device first when it counts; it may also have
	// got in here meanwhile (a retried hello of the same device).
	if t, ok := u.admittedAt(device); (ok && now.Sub(t) < recentDevice) || (len(rows) > 0 && rows[0] == device) {
		u.record(device, now)
		return true, nil
	}
	active := make(map[string]bool, len(rows)+len(u.recent))
	for _, r := range rows {
		active[r] = true
	}
	for _, a := range u.recent {
		if now.Sub(a.at) < recentDevice {
			active[a.device] = true
		}
	}
	if len(active) >= d.max {
		d.refused.Inc()
		return false, nil
	}
	u.record(device, now)
	return true, nil
}

// sweep forgets admissions older than recentDevice, and users left with none.
func (d *deviceCap) sweep(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for uid, u := range d.users {
		u.recent = slices.DeleteFunc(u.recent, func(a admitted) bool { return now.Sub(a.at) >= recentDevice })
		if len(u.recent) == 0 && u.pending == 0 {
			delete(d.users, uid)
		}
	}
}

// admitDevice applies the device cap at hello, after the token named the
// device and before its session opens (the consumer and the row come with
// it). A refusal is a fatal LIMIT_EXCEEDED.
func (c *Conn) admitDevice() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := c.g.limits.devices
	ok, err := d.admit(ctx, c.id.UID, c.id.Device)
	if err != nil {
		c.loginFailed(wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot check the user's devices now; retry"), err)
		return false
	}
	if !ok {
		c.loginFailed(wire.Errorf(pb.ErrorCode_LIMIT_EXCEEDED,
			"user %d already has %d devices used within %s (--max-devices-per-user); a new device gets in once one of them has been unused that long",
			c.id.UID, d.max, d.seen), nil)
		return false
	}
	return true
}
