package powercut

import (
	"testing"
)

// MountT mounts a power-cut filesystem at mountpoint over backing (both
// existing dirs) for a test, and unmounts it when the test ends (forcing
// and detaching it if something still holds it). It fails the test when
// FUSE cannot be mounted: a test that needs a power cut must not pass
// without one. opts, at most one, tunes the mount; its Logf defaults to
// t.Logf.
func MountT(t testing.TB, backing, mountpoint string, opts ...Options) *FS {
	t.Helper()
	var o Options
	if len(opts) > 1 {
		t.Fatalf("powercut: MountT takes at most one Options")
	}
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	f, err := Mount(backing, mountpoint, o)
	if err != nil {
		t.Fatalf("powercut: cannot mount FUSE (needs /dev/fuse, and root or fusermount): %v", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("powercut: %v", err)
		}
	})
	return f
}
