package powercut

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

const ps = 4096

// mount mounts a power-cut filesystem over a fresh backing dir and returns
// it with the mountpoint and the backing dir.
func mount(t *testing.T, opts Options) (*FS, string, string) {
	t.Helper()
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return MountT(t, backing, mnt, opts), mnt, backing
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

// writeFile writes data to a new file at p through the mount, fsyncing it
// if sync is set, and closes it.
func writeFile(t *testing.T, p string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// appendFile appends data to the file at p through the mount.
func appendFile(t *testing.T, p string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sizeOf(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// same fails the test if got is not want, saying where they differ.
func same(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%s: %d bytes, want %d; first difference at byte %d", what, len(got), len(want), i)
}

func TestFsyncedDataSurvivesCut(t *testing.T) {
	f, mnt, backing := mount(t, Options{KeepNone: true})
	r := rand.New(rand.NewSource(1))
	data := randBytes(r, 3*ps+123)
	writeFile(t, filepath.Join(mnt, "synced"), data, true)
	more := randBytes(r, ps+7)
	appendFile(t, filepath.Join(mnt, "synced"), more, true)
	if d := f.Dirty(); d != 0 {
		t.Fatalf("Dirty after fsync = %d, want 0", d)
	}

	rep := f.Cut()
	if rep.FilesTouched != 0 {
		t.Fatalf("cut touched %d files, want 0: all was synced", rep.FilesTouched)
	}
	f.Resume()
	want := append(append([]byte{}, data...), more...)
	same(t, "backing file", readFile(t, filepath.Join(backing, "synced")), want)
	same(t, "file through the mount", readFile(t, filepath.Join(mnt, "synced")), want)
}

func TestUnsyncedDataIsGoneAfterCut(t *testing.T) {
	f, mnt, backing := mount(t, Options{KeepNone: true})
	r := rand.New(rand.NewSource(2))
	p := filepath.Join(mnt, "f")
	base := randBytes(r, 2*ps+500)
	writeFile(t, p, base, true)

	// Unsynced: an overwrite inside the synced part, and an append, closed.
	fd, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.WriteAt(randBytes(r, 300), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := fd.WriteAt(randBytes(r, 5*ps), int64(len(base))); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sizeOf(t, p); got != int64(len(base)+5*ps) {
		t.Fatalf("size before the cut = %d, want %d", got, len(base)+5*ps)
	}
	if f.Dirty() == 0 {
		t.Fatal("Dirty = 0 after unsynced writes")
	}

	// Unsynced: a synced file rewritten in place (open with O_TRUNC, the
	// truncation a data write like the others).
	q := filepath.Join(mnt, "rewritten")
	old := randBytes(r, ps+1)
	writeFile(t, q, old, true)
	if err := os.WriteFile(q, []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	same(t, "rewritten file before the cut", readFile(t, q), []byte("new content"))
	// syncfs(2) (sync -f, from coreutils) reaches no file's fsync (see the
	// package doc).
	if out, err := exec.Command("sync", "-f", mnt).CombinedOutput(); err != nil {
		t.Fatalf("sync -f: %v %s", err, out)
	}

	rep := f.Cut()
	if rep.FilesTouched != 2 || rep.PagesKept != 0 || rep.PagesDropped == 0 {
		t.Fatalf("cut report %+v: want two files, no page kept, pages dropped", rep)
	}
	if d := f.Dirty(); d != 0 {
		t.Fatalf("Dirty after cut = %d, want 0", d)
	}
	f.Resume()
	same(t, "backing file", readFile(t, filepath.Join(backing, "f")), base)
	same(t, "file through the mount", readFile(t, p), base)
	same(t, "rewritten file", readFile(t, q), old)
}

func TestCreatedUnsyncedFileHasSizeZeroAfterCut(t *testing.T) {
	f, mnt, backing := mount(t, Options{KeepNone: true})
	p := filepath.Join(mnt, "new")
	data := randBytes(rand.New(rand.NewSource(3)), 3*ps)
	writeFile(t, p, data, false) // written and closed: close is not fsync
	same(t, "before the cut", readFile(t, p), data)
	if fi, err := os.Stat(filepath.Join(backing, "new")); err != nil || fi.Size() != 0 {
		t.Fatalf("backing file before the cut: %v, %v; want it created, empty", fi, err)
	}

	f.Cut()
	f.Resume()
	if got := sizeOf(t, p); got != 0 {
		t.Fatalf("size after the cut = %d, want 0 (the name survives, the data does not)", got)
	}
}

// TestRenameOfUnsyncedTempOverSyncedFile: a rename is durable at once, the
// temp file's data only as far as it was synced; the old target's content is
// gone either way.
func TestRenameOfUnsyncedTempOverSyncedFile(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, tc := range []struct {
		name   string
		synced int // bytes of the temp file fsynced before the rest
	}{
		{"nothing synced", 0},
		{"part synced", ps + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mnt, _ := mount(t, Options{KeepNone: true})
			target, tmp := filepath.Join(mnt, "meta.inf"), filepath.Join(mnt, "meta.inf.tmp")
			old := randBytes(r, 2*ps)
			writeFile(t, target, old, true)

			data := randBytes(r, 3*ps+33)
			writeFile(t, tmp, data[:tc.synced], tc.synced > 0)
			appendFile(t, tmp, data[tc.synced:], false)
			if err := os.Rename(tmp, target); err != nil {
				t.Fatal(err)
			}
			same(t, "target before the cut", readFile(t, target), data)

			f.Cut()
			f.Resume()
			same(t, "target after the cut", readFile(t, target), data[:tc.synced])
			if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temp file after the cut: %v, want it gone (the rename survives)", err)
			}
		})
	}
}

// TestTornTailIsPrefixOfPages: with the seeded choice, after a cut the file
// is what was written up to the end of its last kept page (or its synced
// size when none was kept), and over the seeds both happen.
func TestTornTailIsPrefixOfPages(t *testing.T) {
	none, some, all := 0, 0, 0
	for seed := int64(1); seed <= 24; seed++ {
		r := rand.New(rand.NewSource(seed))
		f, mnt, backing := mount(t, Options{Seed: seed})
		p := filepath.Join(mnt, "log")
		base := randBytes(r, ps+ps/2)
		writeFile(t, p, base, true)
		more := randBytes(r, 10*ps+100)
		appendFile(t, p, more, false)
		written := append(append([]byte{}, base...), more...)

		rep := f.Cut()
		f.Resume()
		if len(rep.Files) != 1 {
			t.Fatalf("seed %d: cut report %+v, want one file", seed, rep)
		}
		fc := rep.Files[0]
		// Dirty pages: the synced tail's page (written into) to the last.
		firstDirty := len(base) / ps
		dirty := (len(written)-1)/ps - firstDirty + 1
		if fc.DirtyPages != dirty || fc.Path != "log" || fc.SyncedSize != int64(len(base)) || fc.LogicalSize != int64(len(written)) {
			t.Fatalf("seed %d: file cut %+v, want %d dirty pages of log, synced %d, logical %d",
				seed, fc, dirty, len(base), len(written))
		}
		k := fc.KeptPages
		wantLen := max(len(base), min((firstDirty+k)*ps, len(written)))

		got := readFile(t, filepath.Join(backing, "log"))
		if len(got) != wantLen || fc.SizeAfter != int64(wantLen) {
			t.Fatalf("seed %d: %d of %d pages kept: file is %d bytes (report %d), want %d",
				seed, k, dirty, len(got), fc.SizeAfter, wantLen)
		}
		same(t, "kept bytes", got, written[:len(got)])
		same(t, "through the mount", readFile(t, p), got)
		switch {
		case k == 0:
			none++
		case k == dirty:
			all++
		default:
			some++
		}
		if err := f.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("24 seeds: none kept %d, some kept %d, all kept %d", none, some, all)
	if none == 0 || some+all == 0 {
		t.Fatalf("over 24 seeds: none kept %d times, some or all %d times; want both", none, some+all)
	}
}

// TestReadsMergeUnsyncedWrites: before a cut, reads and stat see the
// unsynced writes over the synced file, including partial pages, a
// truncation and an extension past it; the backing file is untouched until
// fsync, which then makes it what was read.
func TestReadsMergeUnsyncedWrites(t *testing.T) {
	f, mnt, backing := mount(t, Options{})
	r := rand.New(rand.NewSource(5))
	p := filepath.Join(mnt, "f")
	base := randBytes(r, 3*ps+10)
	writeFile(t, p, base, true)
	model := append([]byte{}, base...)

	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	put := func(off int, n int) {
		t.Helper()
		b := randBytes(r, n)
		if _, err := fd.WriteAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + n; end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], b)
	}
	check := func(what string) {
		t.Helper()
		same(t, what+": whole file", readFile(t, p), model)
		if got := sizeOf(t, p); got != int64(len(model)) {
			t.Fatalf("%s: stat size %d, want %d", what, got, len(model))
		}
		// Odd windows through the open descriptor.
		for _, w := range [][2]int{{0, 1}, {ps - 3, 7}, {ps + 1, ps}, {2*ps - 1, 2}, {len(model) - 5, 100}} {
			if w[0] < 0 || w[0] >= len(model) {
				continue
			}
			buf := make([]byte, w[1])
			n, err := fd.ReadAt(buf, int64(w[0]))
			if err != nil && n != len(model)-w[0] {
				t.Fatalf("%s: read %v: %d, %v", what, w, n, err)
			}
			same(t, what+": window", buf[:n], model[w[0]:min(w[0]+w[1], len(model))])
		}
	}

	put(ps-10, 30) // across a page boundary
	put(5, 4)      // inside a page
	put(3*ps+8, 7) // over the synced end
	check("partial-page overwrites")

	if err := fd.Truncate(ps + 100); err != nil { // shrink mid-page
		t.Fatal(err)
	}
	model = model[:ps+100]
	check("truncate shrink")

	if err := os.Truncate(p, 3*ps+7); err != nil { // extend, by path
		t.Fatal(err)
	}
	model = append(model, make([]byte, 3*ps+7-len(model))...)
	check("truncate extend: zeros, not the old bytes")

	put(5*ps+3, 50) // past the end: a gap of zeros
	put(2*ps-2, 4)
	check("write past the end")

	same(t, "backing file before fsync", readFile(t, filepath.Join(backing, "f")), base)
	if f.Dirty() == 0 {
		t.Fatal("Dirty = 0 with unsynced writes")
	}
	if err := fd.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := f.Dirty(); d != 0 {
		t.Fatalf("Dirty after fsync = %d, want 0", d)
	}
	same(t, "backing file after fsync", readFile(t, filepath.Join(backing, "f")), model)
	check("after fsync")
}

func TestEIOAfterCutUntilResume(t *testing.T) {
	f, mnt, _ := mount(t, Options{KeepNone: true})
	p := filepath.Join(mnt, "f")
	writeFile(t, p, []byte("synced"), true)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	f.Cut()
	buf := make([]byte, 10)
	for name, op := range map[string]func() error{
		"stat":          func() error { _, err := os.Stat(p); return err },
		"stat root":     func() error { _, err := os.Stat(mnt); return err },
		"open":          func() error { _, err := os.ReadFile(p); return err },
		"create":        func() error { return os.WriteFile(filepath.Join(mnt, "g"), []byte("x"), 0o644) },
		"readdir":       func() error { _, err := os.ReadDir(mnt); return err },
		"mkdir":         func() error { return os.Mkdir(filepath.Join(mnt, "e"), 0o755) },
		"unlink":        func() error { return os.Remove(p) },
		"rename":        func() error { return os.Rename(p, filepath.Join(mnt, "h")) },
		"read open fd":  func() error { _, err := old.ReadAt(buf, 0); return err },
		"write open fd": func() error { _, err := old.WriteAt(buf, 0); return err },
		"fsync open fd": func() error { return old.Sync() },
		"Sync":          f.Sync,
	} {
		if err := op(); !errors.Is(err, syscall.EIO) {
			t.Errorf("after the cut, %s: %v, want EIO", name, err)
		}
	}

	f.Resume()
	if got := readFile(t, p); string(got) != "synced" {
		t.Fatalf("after Resume, read %q, want %q", got, "synced")
	}
	writeFile(t, filepath.Join(mnt, "g"), []byte("after"), false)
	if _, err := os.ReadDir(filepath.Join(mnt, "d")); err != nil {
		t.Fatalf("after Resume, readdir: %v", err)
	}
	// A descriptor from before the cut belongs to a process that lost
	// power: it stays dead.
	if _, err := old.ReadAt(buf, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("after Resume, read through a descriptor from before the cut: %v, want EIO", err)
	}
}

// TestOSyncWritesSurviveCut: a write on an O_SYNC descriptor is durable when
// it returns (nats-server's SyncAlways writes its meta files so).
func TestOSyncWritesSurviveCut(t *testing.T) {
	f, mnt, backing := mount(t, Options{KeepNone: true})
	data := randBytes(rand.New(rand.NewSource(6)), 2*ps+1)
	fd, err := os.OpenFile(filepath.Join(mnt, "osync"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	f.Cut()
	f.Resume()
	same(t, "backing file", readFile(t, filepath.Join(backing, "osync")), data)
}

// TestSyncMakesEverythingDurable: FS.Sync is the kernel's writeback run
// to the end: what was written before it survives a cut.
func TestSyncMakesEverythingDurable(t *testing.T) {
	f, mnt, _ := mount(t, Options{KeepNone: true})
	r := rand.New(rand.NewSource(7))
	a, b := randBytes(r, 3*ps), randBytes(r, 100)
	if err := os.MkdirAll(filepath.Join(mnt, "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "x", "y", "a"), a, false)
	writeFile(t, filepath.Join(mnt, "b"), b, false)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(mnt, "b"), []byte("lost"), false)
	if rep := f.Cut(); rep.FilesTouched != 1 || rep.Files[0].Path != "b" {
		t.Fatalf("cut report %+v, want only b touched", rep)
	}
	f.Resume()
	same(t, "a", readFile(t, filepath.Join(mnt, "x", "y", "a")), a)
	same(t, "b", readFile(t, filepath.Join(mnt, "b")), b)
}

// TestFallocateExtendsLogicalSize: fallocate grows the size the processes
// see, in the overlay only, and a cut takes it back.
func TestFallocateExtendsLogicalSize(t *testing.T) {
	f, mnt, backing := mount(t, Options{KeepNone: true})
	p := filepath.Join(mnt, "f")
	writeFile(t, p, []byte("synced"), true)
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := syscall.Fallocate(int(fd.Fd()), 0, 0, 3*ps); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("synced"), make([]byte, 3*ps-6)...)
	same(t, "after fallocate", readFile(t, p), want)
	if got := sizeOf(t, filepath.Join(backing, "f")); got != 6 {
		t.Fatalf("backing size after fallocate = %d, want 6", got)
	}
	if err := syscall.Fallocate(int(fd.Fd()), 0x02|0x01, 0, ps); !errors.Is(err, syscall.EOPNOTSUPP) { // punch hole
		t.Fatalf("punch hole: %v, want EOPNOTSUPP", err)
	}
	f.Cut()
	f.Resume()
	same(t, "after the cut", readFile(t, p), []byte("synced"))
}

// TestUnmountForcesBusyMount: Unmount with a file still open on the mount
// aborts and detaches it rather than failing; the open file then answers
// ENOTCONN.
func TestUnmountForcesBusyMount(t *testing.T) {
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt, Options{})
	if err != nil {
		t.Fatalf("cannot mount FUSE: %v", err)
	}
	fd, err := os.Create(filepath.Join(mnt, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := f.Unmount(); err != nil {
		t.Fatalf("Unmount of a busy mount: %v", err)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mounts, []byte(" "+mnt+" ")) {
		t.Fatalf("%s still mounted after Unmount", mnt)
	}
	if _, err := fd.Write([]byte("x")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("write to a file held across the unmount: %v, want ENOTCONN", err)
	}
}
