package powercut

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// gate wraps go-fuse's node filesystem at the protocol level so that, after
// a cut, every request fails with EIO until Resume, whatever node or handle
// it is for. Each request holds the gate for reading while it runs, so Cut
// (which takes it for writing) happens between requests. FORGET, RELEASE,
// RELEASEDIR, INIT and unmount pass through: they have no answer to fail,
// and the kernel must be able to let go of what it holds.
type gate struct {
	fuse.RawFileSystem
	pc *FS
}

// enter takes the gate for a request; false means the power is off.
func (g *gate) enter() bool {
	g.pc.gate.RLock()
	if g.pc.down {
		g.pc.gate.RUnlock()
		return false
	}
	return true
}

func (g *gate) leave() { g.pc.gate.RUnlock() }

func (g *gate) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Lookup(c, h, name, out)
}

func (g *gate) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.GetAttr(c, in, out)
}

func (g *gate) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.SetAttr(c, in, out)
}

func (g *gate) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Mknod(c, in, name, out)
}

func (g *gate) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Mkdir(c, in, name, out)
}

func (g *gate) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Unlink(c, h, name)
}

func (g *gate) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Rmdir(c, h, name)
}

func (g *gate) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Rename(c, in, oldName, newName)
}

func (g *gate) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Link(c, in, name, out)
}

func (g *gate) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Symlink(c, h, target, name, out)
}

func (g *gate) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if !g.enter() {
		return nil, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Readlink(c, h)
}

func (g *gate) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Access(c, in)
}

func (g *gate) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if !g.enter() {
		return 0, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.GetXAttr(c, h, attr, dest)
}

func (g *gate) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if !g.enter() {
		return 0, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.ListXAttr(c, h, dest)
}

func (g *gate) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (g *gate) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.RemoveXAttr(c, h, attr)
}

func (g *gate) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Create(c, in, name, out)
}

func (g *gate) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Tmpfile(c, in, out)
}

func (g *gate) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Open(c, in, out)
}

func (g *gate) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if !g.enter() {
		return nil, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Read(c, in, buf)
}

func (g *gate) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Lseek(c, in, out)
}

func (g *gate) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.GetLk(c, in, out)
}

func (g *gate) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.SetLk(c, in)
}

// SetLkw may block for long, so it only checks the gate (a cut must not
// wait for a lock holder). Locks are left to the kernel anyway (go-fuse
// does not ask for them to be forwarded), so it is not sent.
func (g *gate) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	g.leave()
	return g.RawFileSystem.SetLkw(c, in)
}

func (g *gate) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if !g.enter() {
		return 0, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Write(c, in, data)
}

func (g *gate) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if !g.enter() {
		return 0, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Writev(c, in, data)
}

func (g *gate) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if !g.enter() {
		return 0, fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.CopyFileRange(c, in)
}

func (g *gate) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Ioctl(c, in, inbuf, out, outbuf)
}

func (g *gate) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Flush(c, in)
}

func (g *gate) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Fsync(c, in)
}

func (g *gate) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Fallocate(c, in)
}

func (g *gate) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.OpenDir(c, in, out)
}

func (g *gate) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.ReadDir(c, in, out)
}

func (g *gate) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.ReadDirPlus(c, in, out)
}

func (g *gate) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.FsyncDir(c, in)
}

func (g *gate) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.StatFs(c, h, out)
}

func (g *gate) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if !g.enter() {
		return fuse.EIO
	}
	defer g.leave()
	return g.RawFileSystem.Statx(c, in, out)
}
