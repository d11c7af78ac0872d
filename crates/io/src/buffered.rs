//! Reads through the kernel's page cache, beside a device that writes with O_DIRECT.
//!
//! An engine that reads what it wrote with O_DIRECT only through its own block cache leaves
//! the rest of the machine's memory idle: data bigger than the block cache but smaller than
//! RAM goes to the device on every miss, where RocksDB (buffered reads by default) hits the
//! page cache. A [`BufferedReader`] is a second file descriptor on the same file or block
//! device, opened O_RDONLY without O_DIRECT, read with `pread`. Writes stay on the O_DIRECT
//! device.
//!
//! Two descriptors on one file share one page cache, and O_DIRECT writes bypass it, so the
//! caller owns the coherence rule: a range rewritten with O_DIRECT must have its cached pages
//! dropped ([`BufferedReader::drop_cached`]) before anything reads the new bytes through this
//! reader. Linux invalidates the cached pages of a range written with O_DIRECT as well, but a
//! page it fails to invalidate (it only warns) would serve old bytes with a valid checksum.
//!
//! The descriptor is advised `POSIX_FADV_RANDOM`: the kernel reads exactly the pages asked for
//! and no readahead around them, so a point read neither wastes device bandwidth nor pulls in
//! pages of neighbouring ranges that are about to be rewritten. Callers that scan read large
//! ranges themselves.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, OpKind, PathOp, Result};

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

    /// Exactly `len` bytes at `offset`, through the page cache. No alignment is needed.
    ///
    /// # Errors
    /// [`Error::Io`] (a read at `offset`) whose message names the path, for a failed read or
    /// one past the end of the file.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| Error::Io {
            op: OpKind::Read,
            offset,
            source: io::Error::new(
                e.kind(),
                format!("buffered read of {len} bytes from {}: {e}", self.path.display()),
            ),
        })?;
        Ok(buf)
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
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        // SAFETY: posix_fadvise only reads its integer arguments; the fd is open for the call.
        let rc = unsafe { libc::posix_fadvise(self.file.as_raw_fd(), off, len, advice) };
        // posix_fadvise returns the error number instead of setting errno.
        if rc == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(rc)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlignedBuf, FileOptions, QueueExt, QueueOptions, open_device};

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
    fn errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = BufferedReader::open(&missing).unwrap_err();
        assert!(matches!(err, Error::Path { op: PathOp::Open, .. }), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
        let path = dir.path().join("short");
        std::fs::write(&path, [1u8; 100]).unwrap();
        let r = BufferedReader::open(&path).unwrap();
        let err = r.read_at(50, 100).unwrap_err();
        assert!(matches!(err, Error::Io { op: OpKind::Read, offset: 50, .. }), "{err}");
        assert!(err.to_string().contains("short"), "{err}");
    }
}
