package powercut

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options tune a mount. The zero value is a sensible default.
type Options struct {
	// PageSize is the granularity of dirty data and of what a cut keeps
	// (default 4096, the kernel's page).
	PageSize int
	// Seed seeds the choice of the pages a cut keeps, so a failing run can
	// be repeated.
	Seed int64
	// KeepNone makes every cut drop every unsynced page: the files go back
	// to exactly what was synced.
	KeepNone bool
	// Logf, if set, gets a line per cut and per unmount trouble.
	Logf func(format string, args ...any)
}

// FS is a mounted power-cut filesystem.
type FS struct {
	backing, mountpoint string
	opts                Options
	server              *fuse.Server

	// gate is held for reading by every FUSE operation and for writing by
	// Cut and Resume, so a cut happens between operations, never inside one.
	gate sync.RWMutex
	down bool // under gate: cut and not resumed
	rng  *rand.Rand
	// epoch counts cuts; a handle opened in an earlier epoch is dead.
	epoch atomic.Uint64

	mu    sync.Mutex
	files map[fileKey]*fileState // files that are open or dirty

	dirty atomic.Int64 // bytes in dirty pages
}

// fileKey identifies a backing file. Unsynced state is kept per backing
// file, not per go-fuse node, because go-fuse may make a new node for a file
// the kernel forgot while its data is still dirty.
type fileKey struct{ dev, ino uint64 }

func keyOf(st *syscall.Stat_t) fileKey { return fileKey{uint64(st.Dev), st.Ino} }

// fileState is what the mount knows of one backing file.
type fileState struct {
	mu    sync.Mutex
	key   fileKey
	ov    *overlay // nil when the file has no unsynced state
	opens int      // open handles, any epoch
	node  *node    // the node it was last opened through, for its path
	gone  bool     // removed from FS.files; look it up again
}

// CutReport tells what a cut did.
type CutReport struct {
	// FilesTouched is how many files had unsynced state.
	FilesTouched int
	// PagesKept and PagesDropped count dirty pages written back before the
	// power went and lost with it.
	PagesKept, PagesDropped int
	// BytesKept and BytesDropped are the bytes of those pages inside the
	// files (a page holding a file's end counts up to it).
	BytesKept, BytesDropped int64
	// TornFiles is how many files kept some but not all of their dirty
	// pages.
	TornFiles int
	// Files has a line per touched file, in the order the cut visited them.
	Files []FileCut
}

// FileCut is what a cut did to one file.
type FileCut struct {
	// Path is relative to the mount's root; empty for a file no longer in
	// any directory.
	Path string
	// DirtyPages and KeptPages count its dirty pages and those kept.
	DirtyPages, KeptPages int
	// SyncedSize is the backing file's size before the cut, LogicalSize
	// what the processes saw, SizeAfter the backing file's size after it.
	SyncedSize, LogicalSize, SizeAfter int64
}

// Mount mounts a power-cut filesystem at mountpoint over backing dir (both
// existing dirs). Files are identified by their backing inode, so the
// backing tree should not be changed behind the mount's back while it is
// mounted.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = 4096
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	mountpoint, err = filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("powercut: backing dir: %w", err)
	}
	f := &FS{
		backing:    backing,
		mountpoint: mountpoint,
		opts:       opts,
		rng:        rand.New(rand.NewSource(opts.Seed)),
		files:      make(map[fileKey]*fileState),
	}
	lroot := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: lroot}, pc: f}
	lroot.RootNode = root

	// Zero timeouts: the kernel asks for every lookup and stat, so it never
	// holds a size the overlay has changed since, and after a cut every
	// path operation reaches the gate.
	var zero time.Duration
	fopts := &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName: "powercut:" + backing,
			Name:   "powercut",
			// As root, mount(2) directly: no fusermount binary needed.
			// Otherwise go-fuse falls back to fusermount.
			DirectMount: true,
			// The kernel's writeback cache stays off (go-fuse enables it
			// only on request) and every open gets FOPEN_DIRECT_IO (see
			// node.Open), so no file data is cached in the kernel.
		},
	}
	raw := fs.NewNodeFS(root, fopts)
	server, err := fuse.NewServer(&gate{RawFileSystem: raw, pc: f}, mountpoint, &fopts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("powercut: mount %s: %w", mountpoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		_ = server.Unmount()
		return nil, fmt.Errorf("powercut: mount %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// Mountpoint is where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Backing is the backing directory: after a cut, what survived.
func (f *FS) Backing() string { return f.backing }

// Dirty returns the bytes written and not yet synced, counted in whole
// dirty pages (the memory the overlay holds).
func (f *FS) Dirty() int64 { return f.dirty.Load() }

// Sync writes every file's unsynced state to the backing files and fsyncs
// them, as the kernel's periodic writeback or sync(1) would on a real disk:
// a test calls it to make "everything up to here is durable" true. It fails
// with EIO after a cut, until Resume.
func (f *FS) Sync() error {
	f.gate.RLock()
	defer f.gate.RUnlock()
	if f.down {
		return syscall.EIO
	}
	var errs []error
	for _, st := range f.dirtyFiles() {
		st.mu.Lock()
		if st.ov != nil {
			if err := f.syncLocked(st); err != nil {
				errs = append(errs, err)
			}
		}
		st.mu.Unlock()
		f.forgetIfIdle(st)
	}
	return errors.Join(errs...)
}

// Cut is the power cut: every file's unsynced state is dropped, except the
// dirty pages the model keeps (see the package doc), and every later
// operation on the mount fails with EIO until Resume. Handles open at the
// cut fail with EIO for good. A second Cut before Resume does nothing.
// Cut, Resume, Sync and Dirty may be called from any goroutine.
func (f *FS) Cut() CutReport {
	f.gate.Lock()
	defer f.gate.Unlock()
	var rep CutReport
	if f.down {
		return rep
	}
	f.down = true
	f.epoch.Add(1)

	type entry struct {
		st   *fileState
		path string
	}
	var files []entry
	for _, st := range f.dirtyFiles() {
		files = append(files, entry{st, st.path()})
	}
	// Path order, then inode: the same writes and the same seed give the
	// same cut.
	slices.SortFunc(files, func(a, b entry) int {
		if a.path != b.path {
			if a.path < b.path {
				return -1
			}
			return 1
		}
		if a.st.key.ino < b.st.key.ino {
			return -1
		}
		if a.st.key.ino > b.st.key.ino {
			return 1
		}
		return 0
	})
	for _, e := range files {
		st := e.st
		st.mu.Lock()
		ov := st.ov
		if ov == nil {
			st.mu.Unlock()
			continue
		}
		n := len(ov.pages)
		k := f.keep(n)
		res, err := ov.cut(k)
		if err != nil && f.opts.Logf != nil {
			f.opts.Logf("powercut: cut %s: writing kept pages: %v", e.path, err)
		}
		f.dropLocked(st)
		st.mu.Unlock()
		f.forgetIfIdle(st)

		rep.FilesTouched++
		rep.PagesKept += res.kept
		rep.PagesDropped += res.dropped
		rep.BytesKept += res.keptBytes
		rep.BytesDropped += res.droppedBytes
		if res.kept > 0 && res.dropped > 0 {
			rep.TornFiles++
		}
		rep.Files = append(rep.Files, FileCut{
			Path:        e.path,
			DirtyPages:  n,
			KeptPages:   res.kept,
			SyncedSize:  res.syncedSize,
			LogicalSize: ov.size,
			SizeAfter:   res.sizeAfter,
		})
	}
	if f.opts.Logf != nil {
		f.opts.Logf("powercut: cut %s: %d files touched, %d pages kept (%d bytes), %d dropped (%d bytes), %d torn",
			f.mountpoint, rep.FilesTouched, rep.PagesKept, rep.BytesKept, rep.PagesDropped, rep.BytesDropped, rep.TornFiles)
	}
	return rep
}

// keep draws how many of n dirty pages the kernel wrote back before the
// power went: none half the time, else 1..n uniformly.
func (f *FS) keep(n int) int {
	if f.opts.KeepNone || n == 0 {
		return 0
	}
	if f.rng.Intn(2) == 0 {
		return 0
	}
	return 1 + f.rng.Intn(n)
}

// Resume is the power coming back: the mount serves the backing directory
// as it now is. Descriptors opened before the cut stay dead.
func (f *FS) Resume() {
	f.gate.Lock()
	f.down = false
	f.gate.Unlock()
}

// Unmount unmounts the filesystem, forcing it (and detaching it lazily) if
// it is busy. What is still unsynced is then written back, as on a clean
// shutdown; after a cut without Resume nothing is.
func (f *FS) Unmount() error {
	err := f.server.Unmount()
	if err != nil {
		// Busy: abort the FUSE connection (open files get ENOTCONN) and
		// detach the mount; then the serve loop ends.
		ferr := syscall.Unmount(f.mountpoint, syscall.MNT_FORCE|syscall.MNT_DETACH)
		if f.opts.Logf != nil {
			f.opts.Logf("powercut: unmount %s: %v; forced: %v", f.mountpoint, err, ferr)
		}
		if ferr != nil {
			return fmt.Errorf("powercut: unmount %s: %w; forced: %w", f.mountpoint, err, ferr)
		}
		err = nil
	}
	f.server.Wait()

	f.gate.Lock()
	down := f.down
	f.down = true
	f.gate.Unlock()
	var errs []error
	for _, st := range f.dirtyFiles() {
		st.mu.Lock()
		if st.ov != nil {
			if !down {
				if serr := st.ov.sync(); serr != nil {
					errs = append(errs, serr)
				}
			}
			f.dropLocked(st)
		}
		st.mu.Unlock()
	}
	return errors.Join(errs...)
}

// dirtyFiles returns the files that have unsynced state now.
func (f *FS) dirtyFiles() []*fileState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fileState
	for _, st := range f.files {
		st.mu.Lock()
		if st.ov != nil {
			out = append(out, st)
		}
		st.mu.Unlock()
	}
	return out
}

// state returns the file's state, making it if create is set (else nil when
// the mount holds nothing for the file). The caller locks it and must check
// gone.
func (f *FS) state(k fileKey, create bool) *fileState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.files[k]
	if st == nil && create {
		st = &fileState{key: k}
		f.files[k] = st
	}
	return st
}

// lockState returns the file's state locked, made if create is set; nil if
// there is none and create is not set.
func (f *FS) lockState(k fileKey, create bool) *fileState {
	for {
		st := f.state(k, create)
		if st == nil {
			return nil
		}
		st.mu.Lock()
		if !st.gone {
			return st
		}
		st.mu.Unlock()
	}
}

// forgetIfIdle removes a file's state when it is neither open nor dirty.
func (f *FS) forgetIfIdle(st *fileState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.gone && st.opens == 0 && st.ov == nil && f.files[st.key] == st {
		delete(f.files, st.key)
		st.gone = true
	}
}

// ensureOverlayLocked gives the file an overlay if it has none, with a
// duplicate of fd (a writable descriptor of the backing file).
func (f *FS) ensureOverlayLocked(st *fileState, fd *os.File) error {
	if st.ov != nil {
		return nil
	}
	nfd, err := syscall.Dup(int(fd.Fd()))
	if err != nil {
		return err
	}
	syscall.CloseOnExec(nfd)
	dup := os.NewFile(uintptr(nfd), fd.Name())
	ov, err := newOverlay(dup, f.opts.PageSize)
	if err != nil {
		dup.Close()
		return err
	}
	st.ov = ov
	return nil
}

// syncLocked makes the file's unsynced state durable and drops the overlay.
func (f *FS) syncLocked(st *fileState) error {
	if err := st.ov.sync(); err != nil {
		return err
	}
	f.dropLocked(st)
	return nil
}

// dropLocked forgets the file's overlay.
func (f *FS) dropLocked(st *fileState) {
	f.dirty.Add(-int64(len(st.ov.pages)) * st.ov.ps)
	st.ov.fd.Close()
	st.ov = nil
}

// reap drops the unsynced state of a file that is in no directory any more
// and not open: nothing can reach its data again.
func (f *FS) reap(k fileKey) {
	st := f.lockState(k, false)
	if st == nil {
		return
	}
	if st.ov != nil && st.opens == 0 {
		var s syscall.Stat_t
		if err := syscall.Fstat(int(st.ov.fd.Fd()), &s); err == nil && s.Nlink == 0 {
			f.dropLocked(st)
		}
	}
	st.mu.Unlock()
	f.forgetIfIdle(st)
}

// logicalSize returns the size the processes see for the file, if the mount
// holds unsynced state for it.
func (f *FS) logicalSize(k fileKey) (int64, bool) {
	st := f.lockState(k, false)
	if st == nil {
		return 0, false
	}
	defer st.mu.Unlock()
	if st.ov == nil {
		return 0, false
	}
	return st.ov.size, true
}

// patchAttr puts the logical size into attributes read from the backing
// file.
func (f *FS) patchAttr(k fileKey, a *fuse.Attr) {
	if size, ok := f.logicalSize(k); ok {
		a.Size = uint64(size)
		a.Blocks = max(a.Blocks, (a.Size+511)/512)
	}
}

// path returns the file's path relative to the mount's root, or "" if it is
// in no directory.
func (st *fileState) path() string {
	if st.node == nil {
		return ""
	}
	in := st.node.EmbeddedInode()
	if in.IsRoot() {
		return ""
	}
	if _, parent := in.Parent(); parent == nil {
		return ""
	}
	return in.Path(nil)
}
