//! The owner trailer of a persistent memory file: the path of the volume file of the store
//! whose undo log the file holds, so that a file left behind (its store deleted by hand
//! after a crash, `/dev/shm` holding memory until a reboot) can be told from one in use,
//! by `shale orphans`, without the store's catalog.
//!
//! Why a trailer, after the log's bytes: the log's headers are one cache line each and full
//! (`undo_log.rs`), and the mapping of the log (`pmem.rs`) must stay exactly the log's
//! length, so the path goes past the mapped bytes, written with a plain `pwrite` at each
//! read-write open (a rename of the store while it is closed is seen at its next open, as
//! with the lsm engine's WAL tail, `wal/tail.rs`).
//!
//! ```text
//! a persistent memory file
//!   0          len       the undo log (headers, then the ring; `undo_log.rs`)
//!   len        4096      the owner trailer:
//!     0   8  magic b"SHPMOWN1"
//!     8   4  crc32c of bytes 12..4096
//!    12   4  n: bytes of the path (u32 LE, at most 4080)
//!    16   n  the absolute path of the store's volume file, as its last read-write open saw it
//!   16+n ..  zeros
//! ```
//! A file without a valid trailer (one made before the trailer, or whose last page is torn)
//! is a log of the file's whole length that names no store: never judged an orphan.

use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::undo_file::FileId;

/// Bytes of the trailer.
pub const OWNER_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"SHPMOWN1";
const PATH_AT: usize = 16;

/// The trailer for `volume_file`, or `None` when its path is too long to record.
pub(crate) fn encode(volume_file: &Path) -> Option<Vec<u8>> {
    let path = volume_file.as_os_str().as_bytes();
    if path.len() > OWNER_BYTES as usize - PATH_AT {
        return None;
    }
    let mut t = vec![0u8; OWNER_BYTES as usize];
    t[..8].copy_from_slice(MAGIC);
    t[12..16].copy_from_slice(&(path.len() as u32).to_le_bytes());
    t[PATH_AT..PATH_AT + path.len()].copy_from_slice(path);
    let crc = crc32c::crc32c(&t[12..]);
    t[8..12].copy_from_slice(&crc.to_le_bytes());
    Some(t)
}

/// The path a trailer names, if `t` is a valid one.
fn decode(t: &[u8]) -> Option<PathBuf> {
    if t.len() != OWNER_BYTES as usize || &t[..8] != MAGIC {
        return None;
    }
    if u32::from_le_bytes(t[8..12].try_into().unwrap()) != crc32c::crc32c(&t[12..]) {
        return None;
    }
    let n = u32::from_le_bytes(t[12..16].try_into().unwrap()) as usize;
    (n <= t.len() - PATH_AT)
        .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&t[PATH_AT..PATH_AT + n])))
}

/// The trailer of `file` (of `size` bytes), if it has a valid one.
pub(crate) fn read(file: &File, size: u64) -> Option<PathBuf> {
    let at = size.checked_sub(OWNER_BYTES)?;
    let mut t = vec![0u8; OWNER_BYTES as usize];
    file.read_exact_at(&mut t, at).ok()?;
    decode(&t)
}

/// Bytes of the log in a file of `size` bytes: all of them, less a valid trailer's.
pub(crate) fn log_bytes(file: &File, size: u64) -> u64 {
    match read(file, size) {
        Some(_) => size - OWNER_BYTES,
        None => size,
    }
}

/// Bytes of the log in the file at `path`: `None` when it is missing or empty.
pub(crate) fn log_bytes_at(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    (size > 0).then(|| log_bytes(&file, size))
}

/// A persistent memory file holding an undo log, as [`describe`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmemFile {
    /// The file.
    pub path: PathBuf,
    /// The volume id of the store whose log it is.
    pub volume_id: [u8; 16],
    /// That store's volume file's identity (inode, birth time), all zero when the log was
    /// written before stores named their instance.
    pub instance: [u8; 16],
    /// The store's volume file as its last read-write open saw it; `None` for a file
    /// without a trailer.
    pub volume_path: Option<PathBuf>,
    /// Bytes of the file (the log and its trailer).
    pub bytes: u64,
    /// A store has it open now (its lock is held).
    pub in_use: bool,
}

impl PmemFile {
    /// Whether the volume file at `volume` is the instance this log belongs to: the same
    /// volume id and the same file (a copy is another).
    pub fn belongs_to(&self, volume: &Path, volume_id: [u8; 16]) -> bool {
        volume_id == self.volume_id
            && self.instance != [0; 16]
            && FileId::of_path(volume).is_ok_and(|f| f.encode() == self.instance)
    }
}

/// What the file at `path` is: `Ok(None)` when it holds no undo log's headers.
///
/// # Errors
/// The file cannot be opened or read (the error names it).
pub fn describe(path: &Path) -> crate::Result<Option<PmemFile>> {
    let failed = |op| move |e| crate::Error::Space(shale_io::Error::at_path(op, path, e).into());
    let file = File::open(path).map_err(failed(shale_io::PathOp::Open))?;
    let size = file.metadata().map_err(failed(shale_io::PathOp::Stat))?.len();
    let mut headers = [0u8; crate::undo_log::RING_OFFSET];
    if size < headers.len() as u64 || file.read_exact_at(&mut headers, 0).is_err() {
        return Ok(None);
    }
    let Some((volume_id, instance)) = crate::undo_log::owner_of(&headers) else {
        return Ok(None);
    };
    let in_use =
        shale_space::store_lock::lock(&file, shale_space::store_lock::Mode::Shared).is_err();
    if !in_use {
        // A probe: let go at once, so a store opening the log meanwhile is not refused.
        shale_space::store_lock::unlock(&file);
    }
    Ok(Some(PmemFile {
        path: path.to_path_buf(),
        volume_id,
        instance,
        volume_path: read(&file, size),
        bytes: size,
        in_use,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailer_round_trips_and_a_damaged_one_names_nothing() {
        let p = Path::new("/srv/store/volume");
        let t = encode(p).unwrap();
        assert_eq!(decode(&t).as_deref(), Some(p));
        for at in [0, 9, 13, 20, 4095] {
            let mut d = t.clone();
            d[at] ^= 0x40;
            assert_eq!(decode(&d), None, "a flip at {at}");
        }
        let long = PathBuf::from("/".repeat(5000));
        assert_eq!(encode(&long), None);
        assert_eq!(decode(&[0u8; OWNER_BYTES as usize]), None);
    }
}
