//! The mapping of a persistent memory file: a DAX mapping (`MAP_SYNC`) where the file lies
//! on a file system mounted with DAX over real persistent memory, else a plain shared
//! mapping of the page cache.
//!
//! Why `MAP_SYNC`: on a DAX file, stores go straight to the medium once their cache lines
//! are written back, but a page fault that allocates a block of a sparse file changes the
//! file's metadata, which only an `fsync` would make durable. A `MAP_SYNC` mapping has the
//! kernel make that metadata durable before the fault returns, so cache-line write-backs
//! and a fence are all a persist needs. The kernel accepts the flag (with
//! `MAP_SHARED_VALIDATE`, which refuses flags it does not know) only for files that support
//! it; anywhere else it answers `EOPNOTSUPP` (or `EINVAL` on kernels before 4.15), and the
//! file is mapped the ordinary way: that refusal is the detection.

use std::fs::File;
use std::os::fd::AsRawFd;

/// `MAP_SYNC` (Linux uapi, every architecture with DAX); the `libc` crate names it only for
/// some targets.
const MAP_SYNC: libc::c_int = 0x80000;

/// A writable shared mapping of a whole file.
pub(crate) enum Mapping {
    /// Of the page cache (tmpfs, a plain file, a file system without DAX).
    Paged(memmap2::MmapMut),
    /// A DAX mapping with `MAP_SYNC`.
    Dax(DaxMap),
}

/// A `MAP_SYNC` mapping: its address and length, unmapped on drop.
pub(crate) struct DaxMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is memory owned by this value alone (no other handle of the engine
// maps the file: its lock is held); moving it to another thread moves that ownership.
unsafe impl Send for DaxMap {}

impl Drop for DaxMap {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr + len` is the mapping this value made, unmapped once, here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl Mapping {
    /// Maps `file` (of `len` bytes, read-write, locked by the caller) with `MAP_SYNC` where
    /// the kernel accepts it, else as a shared mapping of the page cache.
    pub(crate) fn new(file: &File, len: usize) -> std::io::Result<Mapping> {
        // SAFETY: a new mapping of a file open read-write, at an address the kernel picks;
        // nothing aliases it yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED_VALIDATE | MAP_SYNC,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr != libc::MAP_FAILED {
            return Ok(Mapping::Dax(DaxMap { ptr: ptr.cast(), len }));
        }
        let e = std::io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) {
            return Err(e);
        }
        // SAFETY: as the caller's contract: the file is open read-write and locked against
        // every other handle of this engine, so no other Rust reference aliases the bytes.
        unsafe { memmap2::MmapOptions::new().len(len).map_mut(file) }.map(Mapping::Paged)
    }

    /// Whether this is a DAX mapping.
    pub(crate) fn is_dax(&self) -> bool {
        matches!(self, Mapping::Dax(_))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Mapping::Paged(m) => m,
            // SAFETY: the mapping's `len` bytes, readable and writable while it lives.
            Mapping::Dax(m) => unsafe { std::slice::from_raw_parts(m.ptr, m.len) },
        }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Mapping::Paged(m) => m,
            // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
            Mapping::Dax(m) => unsafe { std::slice::from_raw_parts_mut(m.ptr, m.len) },
        }
    }

    /// `msync` of the pages overlapping `offset..offset + len`.
    pub(crate) fn flush_range(&self, offset: usize, len: usize) -> std::io::Result<()> {
        match self {
            Mapping::Paged(m) => m.flush_range(offset, len),
            Mapping::Dax(m) => {
                let page = 4096;
                let start = offset / page * page;
                // SAFETY: a range of whole pages inside the mapping.
                let rc = unsafe {
                    libc::msync(m.ptr.add(start).cast(), offset + len - start, libc::MS_SYNC)
                };
                if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The detection on the file systems this machine has: /dev/shm (tmpfs) and the
    /// temporary directory's are not DAX, and map the ordinary way.
    #[test]
    fn a_file_without_dax_maps_through_the_page_cache() {
        for dir in [std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()] {
            if !dir.is_dir() {
                continue;
            }
            let f = tempfile::tempfile_in(&dir).unwrap();
            f.set_len(64 << 10).unwrap();
            let mut m = Mapping::new(&f, 64 << 10).unwrap();
            assert!(!m.is_dax(), "{} reported DAX", dir.display());
            m.bytes_mut()[100..104].copy_from_slice(b"shal");
            m.flush_range(100, 4).unwrap();
            assert_eq!(&m.bytes()[100..104], b"shal");
        }
    }
}
