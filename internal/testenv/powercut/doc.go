// Package powercut is a test-only filesystem that models a power cut: a
// FUSE passthrough over a backing directory that keeps every write not yet
// fsynced in memory and drops it at a cut, while what was fsynced stays on
// the backing directory. It is the project's equivalent of Jepsen's LazyFS,
// written in Go on go-fuse's loopback nodes.
//
// A test mounts it (Mount, or MountT in a test), points a process at the
// mount (a nats-server's JetStream store dir, say), lets it work, calls Cut,
// stops the process (which sees EIO from the cut on), calls Resume and starts
// the process again on what survived.
//
// # The model
//
// Data writes are volatile until fsynced. write, truncate/ftruncate of the
// size (also the truncation of an open with O_TRUNC), and fallocate of plain
// extent (mode 0 or FALLOC_FL_KEEP_SIZE; other modes are refused with
// EOPNOTSUPP) go to an in-memory overlay per file: its dirty pages
// (Options.PageSize bytes each, whole pages) and its logical size. The
// backing file is not touched. Reads merge the dirty pages over the backing
// file, stat reports the logical size. A shrinking truncate hides the
// backing bytes past the new size until the next sync, so a file shrunk and
// extended again reads zeros there, as it would on a disk. Memory use is the
// dirty pages only: a synced file has no overlay.
//
// fsync and fdatasync of a file with unsynced state write its dirty pages
// and its size to the backing file and fsync the backing file; after that
// the file's data is durable and it has no overlay (of a file without
// unsynced state they do nothing: the backing file is durable already). A write on a descriptor opened with O_SYNC
// or O_DSYNC is synced the same way before it returns (nats-server's
// SyncAlways writes its meta files with O_SYNC). close is not fsync: FLUSH
// and RELEASE persist nothing.
//
// fsync of a directory fsyncs the backing directory and flushes no file's
// data: directory entries are durable at once anyway (below). sync(2) and
// syncfs(2) send the filesystem no fsync of any file (the kernel's
// FUSE_SYNCFS request goes to virtiofs only), so they persist nothing here,
// unlike on a real disk: a test that wants "everything up to now is
// durable", as the kernel's periodic writeback would have made it, calls
// FS.Sync.
//
// Metadata operations — create, mkdir, mknod, unlink, rmdir, rename, link,
// symlink, chmod, chown, utimes, xattrs — go straight to the backing
// directory at once and survive any cut. This is roughly what ext4 with
// data=ordered gives after a crash (its journal commits the names; data
// blocks not yet written back are lost), made strict. Consequences:
//   - a file created and written and never synced survives a cut with size 0
//     (or with only the pages that were synced, or kept by the cut);
//   - the write-to-temp-then-rename pattern without an fsync of the temp file
//     (os.WriteFile plus os.Rename) leaves, after a cut, the target name on
//     the temp file's synced content only: an empty file when nothing of it
//     was synced. The old target's content is gone either way: the rename
//     was durable, the new data was not. (ext4's auto_da_alloc heuristic,
//     which flushes on such a rename, is not modelled.)
//
// # The cut
//
// At Cut each file with unsynced state loses it, except that the kernel may
// have written some dirty pages back before the power went: for each such
// file a number k of its dirty pages, taken in file order, is kept (written
// to the backing file) and the rest dropped. k is drawn from a generator
// seeded by Options.Seed, biased towards losing most: k is 0 with
// probability one half, otherwise uniform in 1..n for n dirty pages.
// Options.KeepNone makes every cut drop all unsynced pages. A kept page that
// holds the logical end of the file is written only up to the logical size,
// and the backing file's size becomes the larger of its synced size and the
// end of the last kept page: the file can end in the middle of a record, a
// torn tail. Unsynced size changes (truncations) are dropped with the pages.
// Files are visited in path order, so a seed gives the same cut for the same
// writes.
//
// After Cut every operation on the mount fails with EIO until Resume, and
// descriptors opened before the cut keep failing with EIO after it: the
// processes that used the mount are expected to be stopped right after the
// cut, and a process started after Resume opens files anew. Resume serves
// the backing directory as it now is.
//
// # Kernel caching
//
// Every open is answered with FOPEN_DIRECT_IO and the kernel's writeback
// cache is not enabled, so every read and write reaches the overlay and no
// data sits in the kernel's page cache; entry, attribute and negative
// timeouts are zero, so stat and lookups always ask the filesystem (which
// answers with the logical size). A consequence of direct I/O is that a
// shared mmap (MAP_SHARED) of a file on the mount is refused (ENODEV);
// private maps work. nats-server's filestore (v2.15.2) needs neither: its message
// blocks are opened O_RDWR and written with WriteAt, fsynced (os.File.Sync)
// after each write with SyncAlways, else from a timer (sync_interval, two
// minutes by default); meta.inf, meta.sum and the consumers' o.dat go to a
// .tmp file (opened with O_SYNC under SyncAlways) that is closed and renamed
// over the name, with a directory fsync under SyncAlways; the stream's
// index.db is rewritten in place with os.WriteFile (O_TRUNC, unsynced).
// O_TMPFILE is refused. STATX is answered ENOSYS, so the kernel asks with
// GETATTR instead (no birth time).
//
// The mount is made with the mount(2) call when the process is root (no
// fusermount needed), through fusermount otherwise; MountT fails the test
// when FUSE cannot be mounted.
package powercut
