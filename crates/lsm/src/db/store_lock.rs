//! One open store per volume: an exclusive `flock` on the store's path while it is open.
//!
//! Why: two handles on one volume would allocate the same slots and append to the same WAL
//! and WAL tail. The lock is advisory (it binds shale, not other programs), is taken before
//! the volume is read, and is released by the kernel when the process dies, so a killed
//! process never leaves a stale lock behind. `shale inspect` reads without it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};

/// Held while the store is open.
#[derive(Debug)]
pub(crate) struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Locks `path` (a directory, a volume file or a block device), which must exist.
    ///
    /// # Errors
    /// [`Error::InUse`] when another handle holds it; [`Error::Io`] if it cannot be opened.
    pub fn acquire(path: &Path) -> Result<StoreLock> {
        let file = File::open(path)
            .map_err(|e| Error::Io(shale_io::Error::from_os(shale_io::OpKind::Read, 0, e)))?;
        loop {
            // SAFETY: flock reads only its integer arguments; the fd is open for the call.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(StoreLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => {
                    return Err(Error::InUse(format!(
                        "{} is open by another handle (in this process or another)",
                        path.display()
                    )));
                }
                _ => {
                    return Err(Error::Io(shale_io::Error::from_os(
                        shale_io::OpKind::Read,
                        0,
                        err,
                    )));
                }
            }
        }
    }
}
