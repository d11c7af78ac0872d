//! The pread/pwrite backend: one system call per request, inside `submit`.
//!
//! It is the fallback where io_uring or O_DIRECT is not available, and the baseline io_uring is
//! measured against. Requests run through [`InlineQueue`](crate::InlineQueue), so callers see
//! the same depth, tags and Busy as on io_uring, only without overlap.

use std::io;
use std::sync::Arc;

use crate::device::DeviceInfo;
use crate::error::{Error, OpKind, Result};
use crate::file::OpenFile;
use crate::inline::SyncBackend;

/// Retries of one request after EINTR/EAGAIN before it is failed; a signal storm that long
/// means something else is wrong.
const RETRIES_MAX: u32 = 64;

/// pread/pwrite over an open file.
pub(crate) struct PreadBackend {
    file: Arc<OpenFile>,
}

impl PreadBackend {
    pub(crate) fn new(file: Arc<OpenFile>) -> PreadBackend {
        PreadBackend { file }
    }

    /// Runs `call` (one pread/pwrite moving at most `remaining` bytes at `pos`) until all bytes
    /// moved, resubmitting the rest after a short transfer.
    fn transfer(
        &self,
        op: OpKind,
        offset: u64,
        len: usize,
        mut call: impl FnMut(usize, i64) -> isize,
    ) -> Result<()> {
        let mut done = 0usize;
        let mut retries = 0u32;
        while done < len {
            let pos = offset + done as u64;
            let file_pos = i64::try_from(pos)
                .map_err(|_| Error::InvalidArgument(format!("offset {pos} too large")))?;
            let n = call(done, file_pos);
            if n < 0 {
                let err = io::Error::last_os_error();
                let transient = matches!(err.raw_os_error(), Some(libc::EINTR | libc::EAGAIN));
                if transient && retries < RETRIES_MAX {
                    retries += 1;
                    continue;
                }
                return Err(Error::from_os(op, pos, err));
            }
            if n == 0 {
                // No progress and no error: the file ended under us (truncated by someone else).
                let kind = match op {
                    OpKind::Read => io::ErrorKind::UnexpectedEof,
                    _ => io::ErrorKind::WriteZero,
                };
                return Err(Error::from_os(op, pos, io::Error::new(kind, "no bytes moved")));
            }
            done += n as usize;
        }
        Ok(())
    }
}

impl SyncBackend for PreadBackend {
    fn info(&self) -> DeviceInfo {
        self.file.info()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let fd = self.file.fd();
        let len = buf.len();
        let ptr = buf.as_mut_ptr();
        self.transfer(OpKind::Read, offset, len, |done, pos| {
            // SAFETY: ptr+done..ptr+len lies inside `buf`, which is exclusively borrowed for the
            // whole call.
            unsafe { libc::pread(fd, ptr.add(done).cast(), len - done, pos) }
        })
    }

    fn write(&self, offset: u64, buf: &[u8], durable: bool) -> Result<()> {
        let fd = self.file.fd();
        let flags = if durable { libc::RWF_DSYNC } else { 0 };
        self.transfer(OpKind::Write, offset, buf.len(), |done, pos| {
            let rest = &buf[done..];
            let iov = libc::iovec { iov_base: rest.as_ptr() as *mut _, iov_len: rest.len() };
            // SAFETY: the iovec describes `rest`, which is borrowed for the call; pwritev2 only
            // reads through it.
            unsafe { libc::pwritev2(fd, &iov, 1, pos, flags) }
        })
    }

    fn flush(&self) -> Result<()> {
        loop {
            // SAFETY: fdatasync takes only the descriptor, which stays open while self lives.
            if unsafe { libc::fdatasync(self.file.fd()) } == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            // A failed sync is never retried: the kernel may have dropped the dirty pages (P5).
            // Only an interrupted call, which did nothing, is repeated.
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(Error::from_os(OpKind::Flush, 0, err));
            }
        }
    }
}
