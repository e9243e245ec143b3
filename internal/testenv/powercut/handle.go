package powercut

import (
	"context"
	"io"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is an open file on the mount: a descriptor of the backing file and
// the file's state, where writes go.
type handle struct {
	pc    *FS
	st    *fileState
	f     *os.File // backing file, read-write when it could be opened so
	epoch uint64   // the cut epoch it was opened in
	// sync is set for O_SYNC and O_DSYNC opens: each write is synced
	// before it returns, as such a write is durable on a disk. The kernel
	// passes these flags at open (and per write, which go-fuse drops).
	sync bool
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// newHandle registers an open of the backing file f through node n.
func (pc *FS) newHandle(n *node, f *os.File, flags uint32) (*handle, syscall.Errno) {
	var s syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &s); err != nil {
		f.Close()
		return nil, errno(err)
	}
	st := pc.lockState(keyOf(&s), true)
	st.opens++
	st.node = n
	st.mu.Unlock()
	return &handle{
		pc:    pc,
		st:    st,
		f:     f,
		epoch: pc.epoch.Load(),
		sync:  flags&syscall.O_DSYNC != 0, // O_SYNC includes the O_DSYNC bit
	}, 0
}

// live tells if the handle was opened since the last cut. A handle from
// before a cut belongs to a process that lost power with the disk.
func (h *handle) live() bool { return h.epoch == h.pc.epoch.Load() }

// Read reads the file as the processes see it: dirty pages over the backing
// file.
func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !h.live() {
		return nil, syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if ov := h.st.ov; ov != nil {
		n, err := ov.read(h.f, buf, off)
		if err != nil {
			return nil, errno(err)
		}
		return fuse.ReadResultData(buf[:n]), 0
	}
	n, err := h.f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return nil, errno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

// Write puts the data into the file's dirty pages; the backing file is not
// touched until a sync (or a cut that keeps the pages).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.live() {
		return 0, syscall.EIO
	}
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := h.pc.ensureOverlayLocked(st, h.f); err != nil {
		return 0, errno(err)
	}
	added, err := st.ov.write(h.f, data, off)
	h.pc.dirty.Add(int64(added) * st.ov.ps)
	if err != nil {
		return 0, errno(err)
	}
	if h.sync {
		if err := h.pc.syncLocked(st); err != nil {
			return 0, errno(err)
		}
	}
	return uint32(len(data)), 0
}

// truncate sets the file's logical size in its overlay.
func (h *handle) truncate(size int64) syscall.Errno {
	if !h.live() {
		return syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if e := h.pc.truncateLocked(h.st, h.f, size); e != 0 {
		return e
	}
	if h.sync && h.st.ov != nil {
		return errno(h.pc.syncLocked(h.st))
	}
	return 0
}

// truncateLocked sets the logical size of the file, whose backing file fd
// is a writable descriptor of.
func (pc *FS) truncateLocked(st *fileState, fd *os.File, size int64) syscall.Errno {
	if st.ov == nil {
		fi, err := fd.Stat()
		if err != nil {
			return errno(err)
		}
		if fi.Size() == size {
			return 0
		}
	}
	if err := pc.ensureOverlayLocked(st, fd); err != nil {
		return errno(err)
	}
	dropped := st.ov.truncate(size)
	pc.dirty.Add(-int64(dropped) * st.ov.ps)
	return 0
}

// Flush is close(2): it persists nothing. close is not fsync.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !h.live() {
		return syscall.EIO
	}
	return 0
}

// Fsync (and fdatasync) makes the file's unsynced state durable: dirty
// pages and size to the backing file, then fsync of the backing file.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if !h.live() {
		return syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if h.st.ov == nil {
		// Nothing unsynced: the backing file is what the model calls
		// durable already.
		return 0
	}
	return errno(h.pc.syncLocked(h.st))
}

// Release closes the handle. It persists nothing; a file that is in no
// directory any more and is not open elsewhere loses its unsynced state.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	st := h.st
	st.mu.Lock()
	st.opens--
	last := st.opens == 0
	st.mu.Unlock()
	var s syscall.Stat_t
	err := syscall.Fstat(int(h.f.Fd()), &s)
	h.f.Close()
	if last && err == nil && s.Nlink == 0 {
		h.pc.reap(st.key)
	}
	h.pc.forgetIfIdle(st)
	return 0
}

// Getattr is fstat of the backing file with the logical size. It works on a
// handle from before a cut too: go-fuse answers a path stat through any
// open handle of the file.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	var s syscall.Stat_t
	if err := syscall.Fstat(int(h.f.Fd()), &s); err != nil {
		return errno(err)
	}
	out.FromStat(&s)
	h.pc.patchAttr(keyOf(&s), &out.Attr)
	return 0
}

const (
	seekData = 3
	seekHole = 4
)

// Lseek answers SEEK_DATA and SEEK_HOLE (the kernel does the other whences
// itself) as if the file had no holes, over its logical size.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	if !h.live() {
		return 0, syscall.EIO
	}
	var out fuse.AttrOut
	if e := h.Getattr(ctx, &out); e != 0 {
		return 0, e
	}
	switch whence {
	case seekData:
		if off >= out.Size {
			return 0, syscall.ENXIO
		}
		return off, 0
	case seekHole:
		if off > out.Size {
			return 0, syscall.ENXIO
		}
		return out.Size, 0
	}
	return 0, syscall.EINVAL
}

// falloc flags, from linux/falloc.h.
const fallocKeepSize = 0x01

// Allocate supports plain fallocate (mode 0: the logical size grows, a data
// change like a write of zeros) and FALLOC_FL_KEEP_SIZE (nothing the
// processes see changes); punching holes and the other modes are refused.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if !h.live() {
		return syscall.EIO
	}
	switch mode {
	case 0:
	case fallocKeepSize:
		return 0
	default:
		return syscall.EOPNOTSUPP
	}
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	end := int64(off + size)
	if st.ov == nil {
		fi, err := h.f.Stat()
		if err != nil {
			return errno(err)
		}
		if end <= fi.Size() {
			return 0
		}
	}
	if err := h.pc.ensureOverlayLocked(st, h.f); err != nil {
		return errno(err)
	}
	st.ov.extend(end)
	if h.sync {
		return errno(h.pc.syncLocked(st))
	}
	return 0
}
