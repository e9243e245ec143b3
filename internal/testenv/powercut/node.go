package powercut

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is go-fuse's loopback node with the data path taken over: opens
// return handles that write into the overlay, and every attribute answer
// carries the logical size. Directory and metadata operations are the
// loopback's, applied to the backing dir at once.
type node struct {
	*fs.LoopbackNode
	pc *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// WrapChild makes every node go-fuse creates under the root one of ours.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), pc: n.pc}
}

// backingPath is the node's path in the backing dir.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// Lookup is the loopback's, with the logical size.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, errno
	}
	n.patchEntry(filepath.Join(n.backingPath(), name), &out.Attr)
	return ch, 0
}

// patchEntry puts the logical size of the file at backing path p into a.
// The loopback's answer carries no device number, so stat again for the
// key; it costs a syscall only for regular files.
func (n *node) patchEntry(p string, a *fuse.Attr) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err == nil {
		n.pc.patchAttr(keyOf(&st), a)
	}
}

// Getattr reports the backing file's attributes with the logical size.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	var st syscall.Stat_t
	var err error
	if n.IsRoot() {
		err = syscall.Stat(n.backingPath(), &st)
	} else {
		err = syscall.Lstat(n.backingPath(), &st)
	}
	if err != nil {
		return errno(err)
	}
	out.FromStat(&st)
	n.pc.patchAttr(keyOf(&st), &out.Attr)
	return 0
}

// Statx answers ENOSYS: the kernel then stops sending STATX and asks with
// GETATTR, which reports the logical size (and no birth time).
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// Setattr sends a size change to the overlay (truncate is a data write) and
// everything else (mode, owner, times) to the backing file at once.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*handle)
	if size, ok := in.GetSize(); ok {
		var e syscall.Errno
		if h != nil {
			e = h.truncate(int64(size))
		} else {
			e = n.truncatePath(int64(size))
		}
		if e != 0 {
			return e
		}
	}
	rest := *in
	rest.Valid &^= fuse.FATTR_SIZE | fuse.FATTR_FH | fuse.FATTR_LOCKOWNER
	const meta = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_ATIME | fuse.FATTR_MTIME |
		fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME
	if rest.Valid&meta != 0 {
		if e := n.LoopbackNode.Setattr(ctx, nil, &rest, out); e != 0 {
			return e
		}
	}
	return n.Getattr(ctx, f, out)
}

// truncatePath is truncate(2) by path: no handle is open, so the overlay
// gets a descriptor of its own.
func (n *node) truncatePath(size int64) syscall.Errno {
	fd, err := os.OpenFile(n.backingPath(), os.O_RDWR, 0)
	if err != nil {
		return errno(err)
	}
	defer fd.Close()
	var s syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &s); err != nil {
		return errno(err)
	}
	st := n.pc.lockState(keyOf(&s), true)
	e := n.pc.truncateLocked(st, fd, size)
	st.mu.Unlock()
	n.pc.forgetIfIdle(st)
	return e
}

// backingFlags are the flags a backing file is opened with for open flags
// flags: read-write whatever was asked, so the overlay can read the rest of
// a page it dirties and a sync can write through any handle; no O_APPEND
// (the kernel sends explicit offsets), no O_TRUNC (a data write, done in
// the overlay), no O_DIRECT (the overlay's buffers are not aligned), no
// O_SYNC/O_DSYNC (the handle syncs the overlay itself).
func backingFlags(flags uint32) int {
	f := int(flags) &^ (syscall.O_ACCMODE | syscall.O_APPEND | syscall.O_TRUNC | syscall.O_DIRECT |
		syscall.O_SYNC | syscall.O_DSYNC | syscall.O_CREAT | syscall.O_EXCL | fuse.FMODE_EXEC)
	return f | syscall.O_RDWR | syscall.O_CLOEXEC
}

// openBacking opens the backing file at p for open flags flags: read-write
// if it can, as asked if not (a file root may not write, say).
func openBacking(p string, flags uint32, extra int, mode uint32) (*os.File, error) {
	bf := backingFlags(flags) | extra
	fd, err := syscall.Open(p, bf, mode)
	if err == syscall.EACCES || err == syscall.EPERM || err == syscall.EROFS || err == syscall.ETXTBSY {
		fd, err = syscall.Open(p, bf&^syscall.O_ACCMODE|int(flags)&syscall.O_ACCMODE, mode)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Open opens the backing file and returns a handle on the overlay, with
// FOPEN_DIRECT_IO so the kernel caches none of the file's data.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	f, err := openBacking(n.backingPath(), flags, 0, 0)
	if err != nil {
		return nil, 0, errno(err)
	}
	h, e := n.pc.newHandle(n, f, flags)
	if e != 0 {
		return nil, 0, e
	}
	if flags&syscall.O_TRUNC != 0 {
		// Only with atomic O_TRUNC, which is not asked for; the kernel
		// sends a SETATTR instead. Handled the same way in case.
		if e := h.truncate(0); e != 0 {
			h.Release(ctx)
			return nil, 0, e
		}
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// Create creates the backing file at once (a metadata operation: the name
// survives a cut) and returns a handle on the overlay.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := filepath.Join(n.backingPath(), name)
	existed := false
	f, err := openBacking(p, flags, syscall.O_CREAT|syscall.O_EXCL, mode)
	if err == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		// A racing create, or a dentry the kernel did not know: open it.
		existed = true
		f, err = openBacking(p, flags, 0, 0)
	}
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if !existed && os.Getuid() == 0 {
		// As the loopback does: the file belongs to the caller.
		if caller, ok := fuse.FromContext(ctx); ok {
			_ = f.Chown(int(caller.Uid), int(caller.Gid))
		}
	}
	// The loopback's lookup gives the node the identity it gives the file
	// in every later lookup.
	ch, e := n.LoopbackNode.Lookup(ctx, name, out)
	if e != 0 {
		f.Close()
		return nil, nil, 0, e
	}
	h, e := n.pc.newHandle(ch.Operations().(*node), f, flags)
	if e != 0 {
		return nil, nil, 0, e
	}
	if existed && flags&syscall.O_TRUNC != 0 {
		if e := h.truncate(0); e != 0 {
			h.Release(ctx)
			return nil, nil, 0, e
		}
	}
	n.patchEntry(p, &out.Attr)
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
}

// Tmpfile is refused: an O_TMPFILE file has no path for the loopback to
// work on, and nothing here needs one.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// Unlink is the loopback's; a file it leaves in no directory and not open
// loses its unsynced state, which nothing can reach again.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p := filepath.Join(n.backingPath(), name)
	var st syscall.Stat_t
	victim := syscall.Lstat(p, &st) == nil
	if e := n.LoopbackNode.Unlink(ctx, name); e != 0 {
		return e
	}
	if victim {
		n.pc.reap(keyOf(&st))
	}
	return 0
}

// Rename is the loopback's, applied to the backing dir at once; a file it
// replaces is reaped as in Unlink.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var st syscall.Stat_t
	victim := false
	if np, ok := newParent.(*node); ok && flags&fs.RENAME_EXCHANGE == 0 {
		victim = syscall.Lstat(filepath.Join(np.backingPath(), newName), &st) == nil
	}
	if e := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); e != 0 {
		return e
	}
	if victim {
		n.pc.reap(keyOf(&st))
	}
	return 0
}

// Link is the loopback's, with the logical size.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, e := n.LoopbackNode.Link(ctx, target, name, out)
	if e != 0 {
		return nil, e
	}
	n.patchEntry(filepath.Join(n.backingPath(), name), &out.Attr)
	return ch, 0
}

// CopyFileRange answers ENOSYS, so the kernel copies through read and
// write, which go through the overlay.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
