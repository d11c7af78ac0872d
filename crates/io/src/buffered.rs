//! The kernel's page cache beside a device that writes with O_DIRECT: buffered reads of SSTs
//! ([`BufferedReader`]) and buffered writes of them ([`BufferedWriter`]).
//!
//! An engine that reads what it wrote with O_DIRECT only through its own block cache leaves
//! the rest of the machine's memory idle: data bigger than the block cache but smaller than
//! RAM goes to the device on every miss, where RocksDB (buffered reads by default) hits the
//! page cache. A [`BufferedReader`] is a second file descriptor on the same file or block
//! device, opened O_RDONLY without O_DIRECT, read with `pread`.
//!
//! A [`BufferedWriter`] is a third, opened O_RDWR without O_DIRECT: `pwrite` into the page
//! cache, then [`BufferedWriter::sync`] (`fdatasync`) before anything may rely on the bytes,
//! as RocksDB writes its SST files when `use_direct_io_for_flush_and_compaction` is false.
//! The written pages stay cached, so reads through a [`BufferedReader`] hit them at once.
//!
//! All descriptors on one file share one page cache (per inode, or per block device), so:
//! - a `pwrite` replaces the cached pages of its range, whatever they held: buffered writes
//!   followed by buffered reads are coherent, even where the range held other bytes before;
//! - O_DIRECT writes bypass the cache, so the caller owns a coherence rule for them: a range
//!   rewritten with O_DIRECT must have its cached pages dropped
//!   ([`BufferedReader::drop_cached`]) before anything reads the new bytes through a reader.
//!   Linux invalidates the cached pages of a range written with O_DIRECT as well, but a page
//!   it fails to invalidate (it only warns) would serve old bytes with a valid checksum;
//! - an O_DIRECT read of a range with dirty cached pages has the kernel write them back
//!   first, and after [`BufferedWriter::sync`] they are clean and on the device anyway.
//!
//! Write-back errors: Linux reports an error writing back a dirty page once to each open
//! file description that was open when it happened, at its next `fsync`/`fdatasync` (or a
//! waiting `sync_file_range`); a second call on the same descriptor returns success although
//! the page never reached the device. So a writer's syncs are serialized and the first
//! failure is sticky: every later sync fails too (docs/design.md, P5: a failed sync is never
//! retried and trusted). Where several threads write, each should write through a descriptor
//! of its own ([`BufferedWriter::reopen`]): an error is then reported to every one of them,
//! and none has to wait for the others' pages ([`BufferedWriter::sync_range`]).
//!
//! The reader's descriptor is advised `POSIX_FADV_RANDOM`: the kernel reads exactly the pages
//! asked for and no readahead around them, so a point read neither wastes device bandwidth nor
//! pulls in pages of neighbouring ranges that are about to be rewritten. Callers that scan
//! read large ranges themselves.

use std::cell::RefCell;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use io_uring::{IoUring, opcode, types};
use parking_lot::Mutex;

use crate::error::{Error, OpKind, PathOp, Result};

/// Reads in flight at once in [`BufferedReader::read_many`].
const BATCH_RING_ENTRIES: u32 = 64;

thread_local! {
    /// The ring of this thread's batch reads and ranged syncs, made at its first use; `None`
    /// where the kernel refuses one (the reads then run one by one, a ranged sync syncs the
    /// whole file).
    static BATCH_RING: RefCell<Option<IoUring>> =
        RefCell::new(IoUring::new(BATCH_RING_ENTRIES).ok());
}

/// A read-only, buffered (page-cache) descriptor on a file or block device.
pub struct BufferedReader {
    file: File,
    path: PathBuf,
}

impl fmt::Debug for BufferedReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferedReader").field("path", &self.path).finish()
    }
}

impl BufferedReader {
    /// Opens `path` (a regular file or a block device) for buffered reads, advised random.
    ///
    /// ```
    /// use shale_io::BufferedReader;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("f");
    /// std::fs::write(&path, b"hello, page cache")?;
    /// let r = BufferedReader::open(&path)?;
    /// assert_eq!(r.read_at(7, 4)?, b"page");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Path`] naming the path when it cannot be opened; [`Error::Unsupported`] naming
    /// it when the kernel refuses the advice (something that is not a file, a pipe say).
    pub fn open(path: &Path) -> Result<BufferedReader> {
        // O_NONBLOCK: a FIFO put where a volume was expected must not block the open.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::at_path(PathOp::Open, path, e))?;
        let reader = BufferedReader { file, path: path.to_path_buf() };
        reader.advise(0, 0, libc::POSIX_FADV_RANDOM).map_err(|e| {
            Error::Unsupported(format!(
                "{}: posix_fadvise(POSIX_FADV_RANDOM) refused: {e}",
                reader.path.display()
            ))
        })?;
        Ok(reader)
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A second descriptor of the same open file (`dup`), for another thread: the same
    /// file even if its path was renamed or replaced since the open.
    ///
    /// # Errors
    /// [`Error::Path`] naming the path when the kernel refuses (out of descriptors).
    pub fn try_clone(&self) -> Result<BufferedReader> {
        let file =
            self.file.try_clone().map_err(|e| Error::at_path(PathOp::Open, &self.path, e))?;
        Ok(BufferedReader { file, path: self.path.clone() })
    }

    /// Exactly `len` bytes at `offset`, through the page cache. No alignment is needed.
    ///
    /// # Errors
    /// [`Error::Io`] (a read at `offset`) whose message names the path, for a failed read or
    /// one past the end of the file.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| self.read_error(offset, len, e))?;
        Ok(buf)
    }

    /// `len` bytes at `offset` if the page cache holds every one of them, read without
    /// waiting for the device (`preadv2(RWF_NOWAIT)`); `None` on a miss, a partial hit, or a
    /// kernel without the flag. For a thread that must not block on the device (an
    /// event loop, a worker with other requests to serve): it reads the ordinary way, or hands
    /// the read on, when this says `None`.
    pub fn read_at_cached(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_cached(offset, &mut buf).then_some(buf)
    }

    /// Whether the page cache holds every page of `[offset, offset + len)`, asked without
    /// reading anything (`cachestat(2)`, Linux 6.5; a `preadv2(RWF_NOWAIT)` probe is no such
    /// question: on a miss the kernel starts reading the pages before it says no). `None`
    /// where the kernel has no `cachestat` or refuses it.
    pub fn holds_cached(&self, offset: u64, len: u64) -> Option<bool> {
        /// `struct cachestat_range`.
        #[repr(C)]
        struct Range {
            off: u64,
            len: u64,
        }
        /// `struct cachestat`: pages cached, dirty, under write-back, evicted, recently evicted.
        #[repr(C)]
        #[derive(Default)]
        struct Stat {
            nr_cache: u64,
            nr_dirty: u64,
            nr_writeback: u64,
            nr_evicted: u64,
            nr_recently_evicted: u64,
        }
        /// Its number in the generic syscall table, the same on every architecture.
        const SYS_CACHESTAT: libc::c_long = 451;
        if len == 0 {
            return Some(true);
        }
        let range = Range { off: offset, len };
        let mut stat = Stat::default();
        // SAFETY: the kernel reads `range` and writes `stat`, both live for the call; flags 0.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                self.file.as_raw_fd(),
                &range as *const Range,
                &mut stat as *mut Stat,
                0u32,
            )
        };
        if rc != 0 {
            return None;
        }
        let page = 4096u64;
        let pages = (offset + len).div_ceil(page) - offset / page;
        Some(stat.nr_cache >= pages)
    }

    /// Several reads at once: `reqs` are `(offset, len)` pairs, answered in order, each
    /// exactly as [`BufferedReader::read_at`] would.
    ///
    /// Each is first tried as a read that only takes what the page cache holds
    /// (`preadv2(RWF_NOWAIT)`: a hit costs what a `pread` does). The rest go to the kernel
    /// together through an io_uring of the calling thread, so the device reads them
    /// concurrently (the kernel's io-wq workers take them) rather than one after another: a
    /// batch of lookups that miss (a multi-get) waits for about one device read instead of
    /// one per key. Where no ring can be had, they are read one by one.
    pub fn read_many(&self, reqs: &[(u64, usize)]) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Option<Result<Vec<u8>>>> = Vec::with_capacity(reqs.len());
        let mut missed = Vec::new();
        for (i, &(offset, len)) in reqs.iter().enumerate() {
            let mut buf = vec![0u8; len];
            if self.read_cached(offset, &mut buf) {
                out.push(Some(Ok(buf)));
            } else {
                out.push(None);
                missed.push(i);
            }
        }
        for chunk in missed.chunks(BATCH_RING_ENTRIES as usize) {
            let wanted: Vec<(u64, usize)> = chunk.iter().map(|&i| reqs[i]).collect();
            let done = if wanted.len() < 2 {
                None
            } else {
                BATCH_RING.with(|ring| match ring.borrow_mut().as_mut() {
                    Some(ring) => self.read_batch(ring, &wanted),
                    None => None,
                })
            };
            let results =
                done.unwrap_or_else(|| wanted.iter().map(|&(o, l)| self.read_at(o, l)).collect());
            for (&i, r) in chunk.iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|r| r.expect("every read was answered")).collect()
    }

    /// Fills `buf` from `offset` if the page cache holds all of it, without waiting for the
    /// device (`preadv2` with `RWF_NOWAIT`); false otherwise (a miss, a partial hit, or a
    /// kernel without the flag), and the caller reads it the ordinary way.
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Ok(off) = libc::off_t::try_from(offset) else { return false };
        let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: the iovec names `buf`, writable for its length, for the length of the call.
        let n = unsafe { libc::preadv2(self.file.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) };
        usize::try_from(n).is_ok_and(|n| n == buf.len())
    }

    /// One batch of at most [`BATCH_RING_ENTRIES`] reads through `ring`; `None` if the ring
    /// failed before any read was submitted (the caller reads them one by one).
    fn read_batch(
        &self,
        ring: &mut IoUring,
        reqs: &[(u64, usize)],
    ) -> Option<Vec<Result<Vec<u8>>>> {
        let fd = types::Fd(self.file.as_raw_fd());
        let mut bufs: Vec<Vec<u8>> = reqs.iter().map(|&(_, len)| vec![0u8; len]).collect();
        for (i, (buf, &(offset, len))) in bufs.iter_mut().zip(reqs).enumerate() {
            let sqe = opcode::Read::new(fd, buf.as_mut_ptr(), u32::try_from(len).ok()?)
                .offset(offset)
                .build()
                .user_data(i as u64);
            // SAFETY: each buffer lives, unmoved, until its completion is reaped below (or is
            // leaked if the ring breaks with reads in flight).
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                return None;
            }
        }
        let mut results: Vec<Option<i32>> = vec![None; reqs.len()];
        let mut reaped = 0;
        while reaped < reqs.len() {
            match ring.submit_and_wait(reqs.len() - reaped) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    log::warn!("buffered batch read on {}: ring failed: {e}", self.path.display());
                    // The kernel may still write into the buffers: they are never freed.
                    std::mem::forget(bufs);
                    return None;
                }
            }
            for cqe in ring.completion() {
                // Not one of these reads: a ranged sync's that was given up on ([`fsync_range`]).
                let Some(slot) = results.get_mut(cqe.user_data() as usize) else { continue };
                if slot.replace(cqe.result()).is_none() {
                    reaped += 1;
                }
            }
        }
        let answered =
            bufs.into_iter().zip(reqs).zip(results).map(|((mut buf, &(offset, len)), res)| {
                let res = res.expect("every read was reaped");
                if res < 0 {
                    return Err(self.read_error(offset, len, io::Error::from_raw_os_error(-res)));
                }
                // A short read (the end of the file, or a signal): the rest as a plain read does.
                let got = res as usize;
                if got < len {
                    self.file
                        .read_exact_at(&mut buf[got..], offset + got as u64)
                        .map_err(|e| self.read_error(offset, len, e))?;
                }
                Ok(buf)
            });
        Some(answered.collect())
    }

    fn read_error(&self, offset: u64, len: usize, e: io::Error) -> Error {
        Error::Io {
            op: OpKind::Read,
            offset,
            source: io::Error::new(
                e.kind(),
                format!("buffered read of {len} bytes from {}: {e}", self.path.display()),
            ),
        }
    }

    /// Drops the cached pages of `[offset, offset + len)` (`POSIX_FADV_DONTNEED`). This
    /// descriptor never writes, so the pages are clean and go at once; pages another
    /// descriptor dirtied would be written back first. Call it before the range is rewritten
    /// through another descriptor, so no old page can be read afterwards.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path if the kernel refuses (it does not for a file or a block
    /// device open for reading).
    pub fn drop_cached(&self, offset: u64, len: u64) -> Result<()> {
        self.advise(offset, len, libc::POSIX_FADV_DONTNEED).map_err(|e| Error::Io {
            op: OpKind::Read,
            offset,
            source: io::Error::new(
                e.kind(),
                format!(
                    "posix_fadvise(POSIX_FADV_DONTNEED) of {len} bytes on {}: {e}",
                    self.path.display()
                ),
            ),
        })
    }

    /// Asks the kernel to read `[offset, offset + len)` into the page cache in the
    /// background (`POSIX_FADV_WILLNEED`), so later reads of it hit memory.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path if the kernel refuses.
    pub fn prefetch(&self, offset: u64, len: u64) -> Result<()> {
        self.advise(offset, len, libc::POSIX_FADV_WILLNEED).map_err(|e| Error::Io {
            op: OpKind::Read,
            offset,
            source: io::Error::new(
                e.kind(),
                format!(
                    "posix_fadvise(POSIX_FADV_WILLNEED) of {len} bytes on {}: {e}",
                    self.path.display()
                ),
            ),
        })
    }

    fn advise(&self, offset: u64, len: u64, advice: libc::c_int) -> io::Result<()> {
        advise(&self.file, offset, len, advice)
    }
}

/// The tag of a ranged sync on a thread's ring (reads are tagged by their index).
const FSYNC_TAG: u64 = u64::MAX;

/// One ranged `fdatasync` of `file` through `ring`, waited for; `None` if the ring failed
/// before the request was submitted (the caller syncs another way).
fn fsync_range(ring: &mut IoUring, file: &File, offset: u64, len: u32) -> Option<io::Result<()>> {
    let sqe = opcode::Fsync::new(types::Fd(file.as_raw_fd()))
        .offset(offset)
        .len(len)
        .flags(types::FsyncFlags::DATASYNC)
        .build()
        .user_data(FSYNC_TAG);
    // SAFETY: the request names no memory; the descriptor stays open until it is reaped.
    unsafe { ring.submission().push(&sqe) }.ok()?;
    let mut submitted = false;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => submitted = true,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            // Not in the kernel's hands: the caller's whole-file sync covers the range. The
            // request may still sit in the queue and go with the thread's next submission,
            // a harmless sync whose completion nobody waits for (reads skip its tag).
            Err(_) if !submitted => return None,
            Err(e) => return Some(Err(e)),
        }
        // Only this request is in flight on the thread's ring, but skip anything else.
        if let Some(cqe) = ring.completion().find(|c| c.user_data() == FSYNC_TAG) {
            let res = cqe.result();
            return Some(if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(()) });
        }
    }
}

fn advise(file: &File, offset: u64, len: u64, advice: libc::c_int) -> io::Result<()> {
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open for the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, advice) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(rc)) }
}

/// A read-write, buffered (page-cache) descriptor on a file or block device, for writes that
/// are made durable by [`BufferedWriter::sync`] before anything relies on them (see the
/// module's comment on write-back errors).
pub struct BufferedWriter {
    file: File,
    path: PathBuf,
    /// Held across each `fdatasync`; true once one failed (sticky, see the module's comment).
    sync_failed: Mutex<bool>,
}

impl fmt::Debug for BufferedWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferedWriter").field("path", &self.path).finish()
    }
}

impl BufferedWriter {
    /// Opens `path` (an existing regular file or block device) for buffered writes.
    ///
    /// ```
    /// use shale_io::{BufferedReader, BufferedWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("f");
    /// std::fs::write(&path, [0u8; 8192])?;
    /// let w = BufferedWriter::open(&path)?;
    /// w.write_at(4096, b"through the page cache")?;
    /// w.sync()?;
    /// assert_eq!(BufferedReader::open(&path)?.read_at(4096 + 12, 4)?, b"page");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Path`] naming the path when it cannot be opened for writing.
    pub fn open(path: &Path) -> Result<BufferedWriter> {
        // O_NONBLOCK: a FIFO put where a volume was expected must not block the open.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::at_path(PathOp::Open, path, e))?;
        Ok(BufferedWriter { file, path: path.to_path_buf(), sync_failed: Mutex::new(false) })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes all of `data` at `offset` into the page cache (`pwrite`). No alignment is
    /// needed; nothing is durable until [`BufferedWriter::sync`] returns.
    ///
    /// # Errors
    /// [`Error::Io`] (a write at `offset`) whose message names the path.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file.write_all_at(data, offset).map_err(|e| Error::Io {
            op: OpKind::Write,
            offset,
            source: io::Error::new(
                e.kind(),
                format!("buffered write of {} bytes to {}: {e}", data.len(), self.path.display()),
            ),
        })
    }

    /// Starts writing back the dirty pages of `[offset, offset + len)` without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a long write streams to the device
    /// instead of piling up for [`BufferedWriter::sync`]. It makes nothing durable and
    /// reports no write-back error (that is left to `sync`, which sees every one).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path if the kernel refuses the call.
    pub fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        self.sync_file_range(offset, len, libc::SYNC_FILE_RANGE_WRITE)
    }

    /// `sync_file_range(2)` of `[offset, offset + len)` with `flags`.
    fn sync_file_range(&self, offset: u64, len: u64, flags: libc::c_uint) -> Result<()> {
        let (Ok(off), Ok(n)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len))
        else {
            return Err(self.flush_error(offset, io::Error::from_raw_os_error(libc::EINVAL)));
        };
        // SAFETY: sync_file_range only reads its integer arguments; the fd is open.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, flags) };
        if rc == 0 { Ok(()) } else { Err(self.flush_error(offset, io::Error::last_os_error())) }
    }

    /// A writer of its own on the same file or device: a new open file description, opened
    /// through `/proc/self/fd` (so a path renamed or replaced since does not matter), with
    /// its own record of write-back errors (see the module's comment). Each thread that
    /// writes and syncs a range of its own should hold one.
    ///
    /// # Errors
    /// [`Error::Path`] naming the path when the kernel refuses the open.
    pub fn reopen(&self) -> Result<BufferedWriter> {
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&proc_path)
            .map_err(|e| Error::at_path(PathOp::Open, &self.path, e))?;
        Ok(BufferedWriter { file, path: self.path.clone(), sync_failed: Mutex::new(false) })
    }

    /// Waits until the write-back already started of `[offset, offset + len)` is done
    /// (`sync_file_range(SYNC_FILE_RANGE_WAIT_BEFORE)`), starting none. A writer that calls
    /// it for the range some bytes behind the one it just started keeps at most those bytes
    /// queued at the device: on a device slower than the writers, another writer's pages
    /// (a flush's, behind a compaction's) then wait behind a few megabytes, not behind
    /// everything the page cache let this one write ahead. An error reported here is sticky:
    /// the kernel reports it once, and the next sync must not succeed.
    ///
    /// # Errors
    /// [`Error::Io`] (a flush) naming the path for a write-back error, this one or an earlier.
    pub fn wait_writeback(&self, offset: u64, len: u64) -> Result<()> {
        let mut failed = self.sync_failed.lock();
        if *failed {
            return Err(self.earlier_failure());
        }
        let waited = self.sync_file_range(offset, len, libc::SYNC_FILE_RANGE_WAIT_BEFORE);
        *failed = waited.is_err();
        waited
    }

    /// Makes the writes of `[offset, offset + len)` through this writer durable, as
    /// [`BufferedWriter::sync`] does for all of them, without writing back or waiting for
    /// any other dirty page of the file: a ranged `fdatasync` (io_uring's `IORING_OP_FSYNC`
    /// with a range, which the kernel turns into `vfs_fsync_range`: the range's pages, the
    /// metadata needed to read them, a flush of the device's volatile cache). Where no ring
    /// can be had, or the range is longer than one request can name, it syncs the whole file.
    /// Sticky as [`BufferedWriter::sync`]; a write-back error anywhere in the file since this
    /// descriptor was opened is reported, not only one in the range.
    ///
    /// # Errors
    /// [`Error::Io`] (a flush) naming the path, for this failure or an earlier one.
    pub fn sync_range(&self, offset: u64, len: u64) -> Result<()> {
        let mut failed = self.sync_failed.lock();
        if *failed {
            return Err(self.earlier_failure());
        }
        let ranged = match u32::try_from(len) {
            Ok(len) if len > 0 => BATCH_RING.with(|ring| match ring.borrow_mut().as_mut() {
                Some(ring) => fsync_range(ring, &self.file, offset, len),
                None => None,
            }),
            _ => None,
        };
        let result = match ranged {
            Some(r) => r,
            None => self.file.sync_data(),
        };
        result.map_err(|e| {
            *failed = true;
            self.flush_error(offset, e)
        })
    }

    /// Makes every write through this writer so far durable (`fdatasync`: the dirty pages,
    /// the file's block mapping, and a flush of the device's volatile cache). Syncs are
    /// serialized; after one failure every later call fails too, without syncing again.
    ///
    /// # Errors
    /// [`Error::Io`] (a flush) naming the path, for this failure or an earlier one.
    pub fn sync(&self) -> Result<()> {
        let mut failed = self.sync_failed.lock();
        if *failed {
            return Err(self.earlier_failure());
        }
        self.file.sync_data().map_err(|e| {
            *failed = true;
            self.flush_error(0, e)
        })
    }

    /// Drops the cached pages of `[offset, offset + len)` (`POSIX_FADV_DONTNEED`), as
    /// [`BufferedReader::drop_cached`] does: clean pages go at once; dirty ones are written
    /// back first and may stay.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path if the kernel refuses.
    pub fn drop_cached(&self, offset: u64, len: u64) -> Result<()> {
        advise(&self.file, offset, len, libc::POSIX_FADV_DONTNEED).map_err(|e| Error::Io {
            op: OpKind::Read,
            offset,
            source: io::Error::new(
                e.kind(),
                format!(
                    "posix_fadvise(POSIX_FADV_DONTNEED) of {len} bytes on {}: {e}",
                    self.path.display()
                ),
            ),
        })
    }

    fn earlier_failure(&self) -> Error {
        self.flush_error(
            0,
            io::Error::other("an earlier sync failed; buffered writes are not trusted"),
        )
    }

    fn flush_error(&self, offset: u64, e: io::Error) -> Error {
        Error::Io {
            op: OpKind::Flush,
            offset,
            source: io::Error::new(
                e.kind(),
                format!("sync of buffered writes to {}: {e}", self.path.display()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlignedBuf, FileOptions, QueueExt, QueueOptions, open_device};

    #[test]
    fn read_at_cached_answers_from_the_page_cache_and_never_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 13) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        // A read the ordinary way brings the pages in; then the cached read answers.
        assert_eq!(r.read_at(4000, 9000).unwrap(), &data[4000..13_000]);
        assert_eq!(r.read_at_cached(4000, 9000).as_deref(), Some(&data[4000..13_000]));
        // Past the end it is never a short answer.
        assert_eq!(r.read_at_cached(19_990, 100), None);
    }

    #[test]
    fn holds_cached_asks_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 64 << 10]).unwrap();
        let w = BufferedWriter::open(&path).unwrap();
        w.sync().unwrap();
        let r = BufferedReader::open(&path).unwrap();
        // Clean pages dropped: none cached, and asking twice brings none in (a RWF_NOWAIT
        // probe would have started reading them).
        r.drop_cached(0, 64 << 10).unwrap();
        // `None` only on a kernel before 6.5 (the engine then reads as it did before
        // `cachestat`); this project's machines run newer ones, so that is a failure here.
        assert_eq!(r.holds_cached(0, 64 << 10), Some(false), "cachestat(2) refused or absent");
        assert_eq!(r.holds_cached(8192, 4096), Some(false), "the first ask read nothing");
        assert_eq!(r.read_at(8192, 100).unwrap(), vec![7u8; 100]);
        assert_eq!(r.holds_cached(8192, 4096), Some(true), "the page read is cached");
        assert_eq!(r.holds_cached(8192 + 100, 50), Some(true), "a range inside one page");
        assert_eq!(r.holds_cached(4096, 8192), Some(false), "a partial hit is no hit");
        assert_eq!(r.holds_cached(0, 0), Some(true));
    }

    #[test]
    fn read_many_answers_each_range_as_read_at_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        // More ranges than the ring holds, of odd sizes and offsets, one past the end.
        let mut reqs: Vec<(u64, usize)> =
            (0..150u64).map(|i| ((i * 1999) % 290_000, 1 + (i as usize * 97) % 9000)).collect();
        reqs.push((299_990, 10));
        reqs.push((299_995, 10));
        // Twice: first with nothing cached (the pages written back and dropped, so every
        // read misses and goes through the ring), then with everything cached.
        File::open(&path).unwrap().sync_all().unwrap();
        r.drop_cached(0, 0).unwrap();
        for pass in ["cold", "cached"] {
            let got = r.read_many(&reqs);
            assert_eq!(got.len(), reqs.len());
            for (&(offset, len), got) in reqs.iter().zip(&got) {
                let start = offset as usize;
                match data.get(start..start + len) {
                    Some(want) => assert_eq!(got.as_ref().unwrap(), want, "{pass}: {offset}+{len}"),
                    None => {
                        let err = crate::Chain(got.as_ref().unwrap_err()).to_string();
                        assert!(err.contains("buffered read of 10 bytes"), "{pass}: {err}");
                    }
                }
            }
        }
        assert!(r.read_many(&[]).is_empty());
        assert_eq!(r.read_many(&[(5, 3)])[0].as_ref().unwrap(), &data[5..8]);
    }

    #[test]
    fn reads_what_an_o_direct_device_wrote_over_a_dropped_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let opts = FileOptions { create_size: Some(1 << 20), ..FileOptions::default() };
        let dev = open_device(&path, &opts).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(8192, AlignedBuf::padded_copy(b"old", 4096), true).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        assert_eq!(r.read_at(8192, 3).unwrap(), b"old");
        // The page of "old" is cached now; drop it, rewrite the range, read the new bytes.
        r.drop_cached(8192, 4096).unwrap();
        q.write_at(8192, AlignedBuf::padded_copy(b"new", 4096), true).unwrap();
        assert_eq!(r.read_at(8192, 3).unwrap(), b"new");
        assert_eq!(r.read_at(8193, 5).unwrap(), b"ew\0\0\0");
    }

    #[test]
    fn buffered_writes_replace_cached_pages_and_reach_o_direct_reads_after_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let opts = FileOptions { create_size: Some(1 << 20), ..FileOptions::default() };
        let dev = open_device(&path, &opts).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        let w = BufferedWriter::open(&path).unwrap();
        w.write_at(8192, &[b'o'; 4096]).unwrap();
        w.sync().unwrap();
        // The old bytes are cached now (written, then read); a rewrite replaces them there.
        assert_eq!(r.read_at(8192, 3).unwrap(), b"ooo");
        w.write_at(8192, &[b'n'; 4096]).unwrap();
        assert_eq!(r.read_at(8192, 3).unwrap(), b"nnn", "a buffered read of a rewrite");
        w.start_writeback(8192, 4096).unwrap();
        w.sync().unwrap();
        assert_eq!(&q.read_at(8192, 4096).unwrap()[..], &[b'n'; 4096][..], "O_DIRECT read");
        w.drop_cached(8192, 4096).unwrap();
        assert_eq!(r.read_at(12287, 1).unwrap(), b"n");
    }

    #[test]
    fn a_failed_sync_is_never_retried_and_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        let w = BufferedWriter::open(&path).unwrap();
        w.sync().unwrap();
        // As a failed fdatasync leaves it: the kernel would report the error only once.
        *w.sync_failed.lock() = true;
        w.write_at(0, b"x").unwrap();
        let err = w.sync().unwrap_err();
        assert!(matches!(err, Error::Io { op: OpKind::Flush, .. }), "{err}");
        assert!(crate::Chain(&err).to_string().contains("earlier sync failed"), "{err}");
        assert!(w.sync().is_err(), "the failure is sticky");
    }

    #[test]
    fn a_reopened_writer_syncs_its_range_and_keeps_its_own_failures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let opts = FileOptions { create_size: Some(4 << 20), ..FileOptions::default() };
        let dev = open_device(&path, &opts).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let shared = BufferedWriter::open(&path).unwrap();
        // Renamed after the open: a reopen goes through the descriptor, not the path.
        let moved = dir.path().join("moved");
        std::fs::rename(&path, &moved).unwrap();
        let (a, b) = (shared.reopen().unwrap(), shared.reopen().unwrap());
        assert_eq!(a.path(), path.as_path(), "errors name the path the store was opened by");
        // Each writes a range of its own, streams it, bounds its write-back and syncs it.
        a.write_at(0, &[b'a'; 1 << 20]).unwrap();
        b.write_at(2 << 20, &[b'b'; 1 << 20]).unwrap();
        for (w, at) in [(&a, 0u64), (&b, 2 << 20)] {
            w.start_writeback(at, 1 << 20).unwrap();
            w.wait_writeback(at, 1 << 19).unwrap();
            w.sync_range(at, 1 << 20).unwrap();
        }
        assert_eq!(&q.read_at(0, 4096).unwrap()[..], &[b'a'; 4096][..], "O_DIRECT read");
        assert_eq!(&q.read_at(2 << 20, 4096).unwrap()[..], &[b'b'; 4096][..], "O_DIRECT read");
        // A range too long for one request, or empty, syncs the whole file.
        a.write_at(8192, b"whole").unwrap();
        a.sync_range(0, 1 << 40).unwrap();
        a.sync_range(0, 0).unwrap();
        assert_eq!(&q.read_at(8192, 4096).unwrap()[..5], b"whole");
        // A failure is sticky on its descriptor (the kernel reports it once) and on no other.
        *a.sync_failed.lock() = true;
        for err in [a.sync_range(0, 4096).unwrap_err(), a.wait_writeback(0, 4096).unwrap_err()] {
            assert!(matches!(err, Error::Io { op: OpKind::Flush, .. }), "{err}");
            assert!(crate::Chain(&err).to_string().contains("earlier sync failed"), "{err}");
        }
        b.sync_range(2 << 20, 4096).unwrap();
        shared.sync().unwrap();
    }

    #[test]
    fn errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = BufferedReader::open(&missing).unwrap_err();
        assert!(matches!(err, Error::Path { op: PathOp::Open, .. }), "{err}");
        assert!(crate::Chain(&err).to_string().contains("missing"), "{err}");
        let path = dir.path().join("short");
        std::fs::write(&path, [1u8; 100]).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        let err = r.read_at(50, 100).unwrap_err();
        assert!(matches!(err, Error::Io { op: OpKind::Read, offset: 50, .. }), "{err}");
        assert!(crate::Chain(&err).to_string().contains("short"), "{err}");
    }
}
