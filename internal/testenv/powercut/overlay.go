package powercut

import (
	"errors"
	"io"
	"os"
	"slices"
	"syscall"
)

// overlay is the unsynced state of one file: its dirty pages and its
// logical size. It exists only while the file has unsynced state, so the
// memory it takes is what is dirty. Its node's mutex guards it.
type overlay struct {
	// fd is a descriptor of the backing file of its own (a dup), opened for
	// writing, so a sync or a cut can reach the file whichever handles are
	// still open, and even when the file has been unlinked or renamed.
	fd *os.File
	ps int64
	// size is the logical size: what stat reports and where reads end.
	size int64
	// floor is the lowest size the file was truncated to since the last
	// sync: backing bytes at or past it are not part of the file any more
	// (read as zeros unless a dirty page covers them). floor <= size always.
	floor int64
	// pages are the dirty pages by index, each ps bytes. Bytes of a page past
	// size are zero.
	pages map[int64][]byte
}

func newOverlay(fd *os.File, pageSize int) (*overlay, error) {
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	return &overlay{
		fd:    fd,
		ps:    int64(pageSize),
		size:  st.Size(),
		floor: st.Size(),
		pages: make(map[int64][]byte),
	}, nil
}

// readBacking fills p with the backing file's bytes at off through r,
// zeros past the backing file's end or past floor.
func (o *overlay) readBacking(r *os.File, p []byte, off int64) error {
	clear(p)
	if off >= o.floor {
		return nil
	}
	n := min(int64(len(p)), o.floor-off)
	if _, err := r.ReadAt(p[:n], off); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// read fills p from off with the file as the processes see it: dirty pages
// over the backing file (read through r), ending at the logical size. It
// returns how many bytes it filled.
func (o *overlay) read(r *os.File, p []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, nil
	}
	end := min(off+int64(len(p)), o.size)
	p = p[:end-off]
	// Runs of clean pages are read from the backing file in one call.
	cleanFrom := int64(-1)
	flushClean := func(to int64) error {
		if cleanFrom < 0 {
			return nil
		}
		err := o.readBacking(r, p[cleanFrom-off:to-off], cleanFrom)
		cleanFrom = -1
		return err
	}
	for at := off; at < end; {
		idx := at / o.ps
		next := min((idx+1)*o.ps, end)
		if pg := o.pages[idx]; pg != nil {
			if err := flushClean(at); err != nil {
				return 0, err
			}
			copy(p[at-off:next-off], pg[at-idx*o.ps:])
		} else if cleanFrom < 0 {
			cleanFrom = at
		}
		at = next
	}
	if err := flushClean(end); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write puts p at off into dirty pages, reading the rest of a partly
// written page from the backing file (through r) the first time it is
// dirtied. It returns how many pages became dirty.
func (o *overlay) write(r *os.File, p []byte, off int64) (int, error) {
	added := 0
	for len(p) > 0 {
		idx := off / o.ps
		po := off - idx*o.ps
		n := min(int64(len(p)), o.ps-po)
		pg := o.pages[idx]
		if pg == nil {
			pg = make([]byte, o.ps)
			if po != 0 || n != o.ps {
				if err := o.readBacking(r, pg, idx*o.ps); err != nil {
					return added, err
				}
				// Backing bytes past the logical size are not the file's.
				if end := o.size - idx*o.ps; end < o.ps {
					clear(pg[max(end, 0):])
				}
			}
			o.pages[idx] = pg
			added++
		}
		copy(pg[po:], p[:n])
		p = p[n:]
		off += n
		o.size = max(o.size, off)
	}
	return added, nil
}

// truncate sets the logical size. It returns how many dirty pages it
// dropped (those wholly past a smaller size).
func (o *overlay) truncate(size int64) int {
	dropped := 0
	if size < o.size {
		for idx := range o.pages {
			if idx*o.ps >= size {
				delete(o.pages, idx)
				dropped++
			}
		}
		if pg := o.pages[size/o.ps]; pg != nil {
			clear(pg[size%o.ps:])
		}
		o.floor = min(o.floor, size)
	}
	o.size = size
	return dropped
}

// sortedPages returns the dirty page indexes in file order.
func (o *overlay) sortedPages() []int64 {
	idx := make([]int64, 0, len(o.pages))
	for i := range o.pages {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// pageBytes returns the part of dirty page idx that is inside the file.
func (o *overlay) pageBytes(idx int64) []byte {
	return o.pages[idx][:min(o.ps, o.size-idx*o.ps)]
}

// sync makes the backing file what the processes see (its dirty pages and
// its size) and fsyncs it.
func (o *overlay) sync() error {
	st, err := o.fd.Stat()
	if err != nil {
		return err
	}
	if o.floor < st.Size() {
		// The truncation's zeros first, then the pages over them.
		if err := o.fd.Truncate(o.floor); err != nil {
			return err
		}
	}
	for _, idx := range o.sortedPages() {
		if _, err := o.fd.WriteAt(o.pageBytes(idx), idx*o.ps); err != nil {
			return err
		}
	}
	if err := o.fd.Truncate(o.size); err != nil {
		return err
	}
	return o.fd.Sync()
}

// cutResult is what a cut did to one file.
type cutResult struct {
	kept, dropped           int
	keptBytes, droppedBytes int64
	syncedSize, sizeAfter   int64
}

// cut keeps the first k dirty pages in file order (writes them to the
// backing file, a page holding the logical end only up to it) and drops
// the rest along with any unsynced size change. The backing file grows to
// the end of the last kept page if that is past its synced size.
func (o *overlay) cut(k int) (cutResult, error) {
	var res cutResult
	st, err := o.fd.Stat()
	if err != nil {
		return res, err
	}
	res.syncedSize = st.Size()
	res.sizeAfter = res.syncedSize
	for i, idx := range o.sortedPages() {
		b := o.pageBytes(idx)
		if i >= k {
			res.dropped++
			res.droppedBytes += int64(len(b))
			continue
		}
		if _, err := o.fd.WriteAt(b, idx*o.ps); err != nil {
			return res, err
		}
		res.kept++
		res.keptBytes += int64(len(b))
		res.sizeAfter = max(res.sizeAfter, idx*o.ps+int64(len(b)))
	}
	return res, nil
}

// extend grows the logical size to end, as fallocate with mode 0 does; the
// bytes it adds read as zeros.
func (o *overlay) extend(end int64) {
	o.size = max(o.size, end)
}

// errno maps an error of the backing file to what the mount answers: its
// errno, or EIO for anything else (a short write, say).
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
