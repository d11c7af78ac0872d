//! Destroying a store: removing the files of a shale store, and nothing else (as RocksDB's
//! `DestroyDB`).
//!
//! Why a library function: a tool that empties a store before a benchmark must never delete
//! what is not a store (promise P6: nothing already stored is lost), nor a store another
//! handle has open. Both checks belong beside the code that knows what a store looks like and
//! how it is locked, not in each tool.
//!
//! Stages, in this order (each refusal leaves every byte as it was):
//! 1. Look at the path without opening it: missing means nothing to destroy; a directory
//!    names its volume file ([`VOLUME_FILE_NAME`]) inside; only a regular file can be
//!    destroyed. A block device is refused (shale does not erase devices), and so is anything
//!    else (a FIFO, whose open would block, a character device, a socket).
//! 2. Take the store lock, as [`crate::Db::open`] takes it, so a store open anywhere is
//!    [`Error::InUse`] and stays untouched.
//! 3. Prove the file is an lsm store: one of its two format-header copies must decode as a
//!    valid header of a format this build reads (the space layer's [`Header::decode`]), and
//!    name the lsm engine (a volume older than format 3, which names none, must not hold
//!    another engine's version log). A hash or table store is refused: a tool of one engine
//!    never replaces another engine's store.
//! 4. Remove the volume file, then this store instance's WAL tail in `/dev/shm` (named after
//!    the volume id read in stage 3 and the volume file's instance id, so a copy's or the
//!    original's tail stays). The volume goes first: should the process die in between, what
//!    remains is an orphaned tail of a volume that no longer exists, never a volume whose
//!    unsynced writes were thrown away while it survived.
//!
//! The directory itself is left in place, with whatever else it holds: it is the caller's (a
//! mount point, a directory shared with other files).

use std::fs::{File, FileType};
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use shale_space::header::{Header, HeaderCopy};
use shale_space::{AREA_ALIGN, HEADER_AREA_BYTES, VOLUME_FILE_NAME};

use crate::error::{Error, Result};
use crate::wal::tail::{SHM_DIR, TailOwner, tail_path};
use shale_space::{EngineKind, StoreLock};
/// First bytes of a WAL tail file (`wal/tail.rs`'s layout): a file in `/dev/shm` is removed
/// only if it starts with them.
const TAIL_MAGIC: &[u8; 8] = b"SHALTAIL";

/// Removes the store at `path`: a directory's volume file, or a volume file named directly,
/// and the store's WAL tail in `/dev/shm`. A missing path, or a directory without a volume
/// file, holds nothing to destroy and is `Ok`.
///
/// ```
/// use shale_lsm::{Db, Options};
///
/// let dir = tempfile::tempdir()?;
/// Db::open(dir.path(), Options::small_for_tests())?.close()?;
/// shale_lsm::destroy(dir.path())?;
/// assert!(!dir.path().join("volume.shale").exists());
/// assert!(dir.path().exists(), "the directory is the caller's");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// - [`Error::InUse`] while the store is open, in this process or another.
/// - [`Error::InvalidArgument`] when the path holds something that is not a shale store (a
///   foreign or empty file, a damaged or newer-format volume, a block device, a FIFO, ...);
///   the message names the path and what was found there, and nothing is changed.
/// - [`Error::Io`] when the path cannot be examined, read or removed; the message names the
///   path and the operation, and the operating system's error is its source.
pub fn destroy(path: &Path) -> Result<()> {
    let Some(volume) = volume_to_destroy(path)? else {
        return Ok(());
    };
    let _lock = StoreLock::acquire(path)?;
    let header = read_header(&volume)?;
    refuse_other_engine(&volume, &header)?;
    let owner = TailOwner {
        volume_id: header.volume_id,
        instance_id: Some(shale_space::instance_id(&volume)?),
    };
    std::fs::remove_file(&volume).map_err(|e| io_error(&volume, "removing the volume file", e))?;
    remove_tail(&tail_path(Path::new(SHM_DIR), &owner))
}

/// Stage 3's second half: a volume of another engine is refused, named by its kind.
fn refuse_other_engine(volume: &Path, header: &Header) -> Result<()> {
    let found = match header.engine {
        Some(kind) => kind,
        // Older than format 3: the version log says (the lsm engine's own recovery check,
        // whose refusal names what it found there).
        None => {
            let opts = shale_space::VolumeOptions { engine: None, ..Default::default() };
            let opened =
                shale_space::Volume::open_path_read_only(volume, &opts, &Default::default())?;
            crate::db::refuse_other_engine(&opened.versions, &opened.volume.layout()).map_err(
                |e| {
                    let e = shale_io::Chain(&e);
                    Error::NotLsmStore(format!("{}: {e}; nothing was deleted", volume.display()))
                },
            )?;
            EngineKind::Lsm
        }
    };
    if found != EngineKind::Lsm {
        return Err(Error::NotLsmStore(format!(
            "{} is {}, not an lsm store; nothing was deleted (destroy it with its own engine's \
             tools)",
            volume.display(),
            found.a_store()
        )));
    }
    Ok(())
}

/// Stage 1: the volume file `path` names, or `None` if there is nothing to destroy. Only file
/// metadata is read: opening a FIFO would block.
fn volume_to_destroy(path: &Path) -> Result<Option<PathBuf>> {
    let Some(meta) = metadata(path)? else {
        return Ok(None);
    };
    let volume = if meta.is_dir() {
        let inside = path.join(VOLUME_FILE_NAME);
        match metadata(&inside)? {
            None => return Ok(None),
            Some(m) => check_kind(&inside, m.file_type())?,
        }
        inside
    } else {
        check_kind(path, meta.file_type())?;
        path.to_path_buf()
    };
    // A symlink named directly is followed: removing the link would leave the store it
    // points to in place while the caller believes it gone.
    let volume =
        std::fs::canonicalize(&volume).map_err(|e| io_error(&volume, "resolving the path", e))?;
    Ok(Some(volume))
}

/// Metadata of `path`, following symlinks; `None` if nothing is there (a dangling symlink
/// included: it stores nothing).
fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, "examining", e)),
    }
}

/// Refuses anything but a regular file as a volume to remove.
fn check_kind(path: &Path, kind: FileType) -> Result<()> {
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_block_device() {
        "a block device: shale does not erase devices (zero its first 8 KiB to reuse it)"
    } else {
        shale_io::file_kind(&kind)
    };
    Err(not_a_store(path, what))
}

/// Stage 3: the volume's header, proving the file is a shale volume this build can read.
fn read_header(volume: &Path) -> Result<Header> {
    let mut file =
        File::open(volume).map_err(|e| io_error(volume, "opening the volume file", e))?;
    let len = file.metadata().map_err(|e| io_error(volume, "examining", e))?.len();
    if len < HEADER_AREA_BYTES {
        return Err(not_a_store(
            volume,
            &format!("a file of {len} bytes, shorter than a shale volume header"),
        ));
    }
    let mut area = vec![0u8; HEADER_AREA_BYTES as usize];
    file.read_exact(&mut area).map_err(|e| io_error(volume, "reading the volume header", e))?;
    let half = AREA_ALIGN as usize;
    match [Header::decode(&area[..half]), Header::decode(&area[half..])] {
        [HeaderCopy::Valid(h), _] | [_, HeaderCopy::Valid(h)] => Ok(h),
        [HeaderCopy::Newer(v), _] | [_, HeaderCopy::Newer(v)] => Err(not_a_store(
            volume,
            &format!("a shale volume of format version {v}, newer than this build reads"),
        )),
        [HeaderCopy::Blank, HeaderCopy::Blank] => Err(not_a_store(
            volume,
            &format!("a file of {len} bytes whose first 8 KiB are zero (no volume header)"),
        )),
        [HeaderCopy::Foreign, _] | [_, HeaderCopy::Foreign] => Err(not_a_store(
            volume,
            &format!("a file of {len} bytes that does not start with a shale volume header"),
        )),
        _ => Err(not_a_store(
            volume,
            "a shale volume whose header copies are both damaged or unfinished; remove it \
             by hand if it is disposable",
        )),
    }
}

/// Stage 4's second half: the WAL tail, if it is there and is one.
fn remove_tail(tail: &Path) -> Result<()> {
    let file = match std::fs::OpenOptions::new().read(true).write(true).open(tail) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(tail, "opening the WAL tail", e)),
        Ok(f) => f,
    };
    // A store holding the tail is a copy of this volume (same id, same tail name) that is
    // open elsewhere: the tail is that store's now, and stays (`wal/tail.rs`).
    // Held to the end, let go explicitly (`store_lock::unlock`) where the file stays.
    let Ok(file) =
        shale_space::store_lock::LockedFile::lock(file, shale_space::store_lock::Mode::Exclusive)
    else {
        log::info!("{} is held by another store (a copy of this volume): left", tail.display());
        return Ok(());
    };
    let mut magic = [0u8; 8];
    match (&*file).read_exact(&mut magic) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
        Err(e) => return Err(io_error(tail, "reading the WAL tail", e)),
        Ok(()) if &magic != TAIL_MAGIC => return Ok(()),
        Ok(()) => {}
    }
    // Removed while its lock is held, so no store can be mapping it meanwhile.
    match std::fs::remove_file(tail) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io_error(tail, "removing the WAL tail", e))
        }
        _ => Ok(()),
    }
}

/// The refusal of something that is not a shale store.
fn not_a_store(path: &Path, found: &str) -> Error {
    Error::InvalidArgument(format!(
        "{} is not a shale store ({found}); nothing was deleted",
        path.display()
    ))
}

/// An operating-system error, named by path and operation, keeping the OS error as source.
/// Removals count as writes, everything else as reads.
fn io_error(path: &Path, op: &str, source: std::io::Error) -> Error {
    let kind = source.kind();
    let io_op =
        if op.starts_with("removing") { shale_io::OpKind::Write } else { shale_io::OpKind::Read };
    let context = PathContext { what: format!("{op} {}", path.display()), source };
    Error::Io(shale_io::Error::Io {
        op: io_op,
        offset: 0,
        source: std::io::Error::new(kind, context),
    })
}

/// An OS error with the path and operation it happened on.
#[derive(Debug)]
struct PathContext {
    what: String,
    source: std::io::Error,
}

impl std::fmt::Display for PathContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The OS error is the source, printed by whoever prints the chain.
        f.write_str(&self.what)
    }
}

impl std::error::Error for PathContext {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    fn make_store(dir: &Path) {
        let db = Db::open(dir, Options::small_for_tests()).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
    }

    fn assert_refused_unchanged(path: &Path, bytes: &[u8], want: &str) {
        let err = destroy(path).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()) && text.contains(want), "{text}");
        assert_eq!(std::fs::read(path).unwrap(), bytes, "the file is untouched");
    }

    #[test]
    fn a_store_directory_loses_its_volume_file_only() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        std::fs::write(dir.path().join("notes.txt"), b"keep me").unwrap();
        destroy(dir.path()).unwrap();
        assert!(!dir.path().join(VOLUME_FILE_NAME).exists());
        assert_eq!(std::fs::read(dir.path().join("notes.txt")).unwrap(), b"keep me");
        // A new store can be made there again.
        make_store(dir.path());
    }

    #[test]
    fn a_volume_file_named_directly_or_through_a_symlink_is_destroyed() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        let volume = dir.path().join(VOLUME_FILE_NAME);
        destroy(&volume).unwrap();
        assert!(!volume.exists());
        make_store(dir.path());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&volume, &link).unwrap();
        destroy(&link).unwrap();
        assert!(!volume.exists(), "the store the link names is gone");
    }

    #[test]
    fn a_missing_path_or_empty_directory_is_nothing_to_destroy() {
        let dir = tempfile::tempdir().unwrap();
        destroy(&dir.path().join("absent")).unwrap();
        destroy(dir.path()).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("absent"), &dangling).unwrap();
        destroy(&dangling).unwrap();
        assert!(dir.path().exists());
    }

    #[test]
    fn foreign_files_are_refused_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("n.txt");
        std::fs::write(&text, b"hi\n").unwrap();
        assert_refused_unchanged(&text, b"hi\n", "not a shale store");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_refused_unchanged(&empty, b"", "0 bytes");
        let random: Vec<u8> =
            (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let binary = dir.path().join("random.bin");
        std::fs::write(&binary, &random).unwrap();
        assert_refused_unchanged(&binary, &random, "does not start with a shale volume header");
        let zeros = dir.path().join("zeros");
        std::fs::write(&zeros, vec![0u8; 65536]).unwrap();
        assert_refused_unchanged(&zeros, &vec![0u8; 65536], "are zero");
        // A foreign file where a directory's volume file should be.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join(VOLUME_FILE_NAME), b"not a volume").unwrap();
        assert!(matches!(destroy(&sub), Err(Error::InvalidArgument(_))));
        assert_eq!(std::fs::read(sub.join(VOLUME_FILE_NAME)).unwrap(), b"not a volume");
    }

    #[test]
    fn a_damaged_or_newer_volume_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        let volume = dir.path().join(VOLUME_FILE_NAME);
        let mut bytes = std::fs::read(&volume).unwrap();
        // Both header copies damaged: the checksummed bytes of each flipped.
        bytes[30] ^= 0xff;
        bytes[AREA_ALIGN as usize + 30] ^= 0xff;
        std::fs::write(&volume, &bytes).unwrap();
        assert_refused_unchanged(&volume, &bytes, "damaged");
        // A newer format version, in both copies.
        bytes[30] ^= 0xff;
        bytes[AREA_ALIGN as usize + 30] ^= 0xff;
        for copy in [0, AREA_ALIGN as usize] {
            bytes[copy + 12..copy + 16].copy_from_slice(&99u32.to_le_bytes());
        }
        std::fs::write(&volume, &bytes).unwrap();
        assert_refused_unchanged(&volume, &bytes, "format version 99");
    }

    #[test]
    fn an_open_store_is_in_use_through_either_name() {
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join(VOLUME_FILE_NAME);
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        assert!(matches!(destroy(dir.path()), Err(Error::InUse(_))));
        assert!(matches!(destroy(&volume), Err(Error::InUse(_))));
        assert!(volume.exists());
        db.close().unwrap();
        let db = Db::open(&volume, Options::small_for_tests()).unwrap();
        assert!(matches!(destroy(dir.path()), Err(Error::InUse(_))));
        assert!(matches!(destroy(&volume), Err(Error::InUse(_))));
        db.put(b"still", b"here").unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        assert_eq!(db.get(b"still").unwrap(), Some(b"here".to_vec()));
        db.close().unwrap();
        destroy(dir.path()).unwrap();
    }

    #[test]
    fn other_kinds_of_file_are_refused_without_opening_them() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening the FIFO would block this test forever; refusing it must not open it.
        let err = destroy(&fifo).unwrap_err().to_string();
        assert!(err.contains("a FIFO"), "{err}");
        let err = destroy(Path::new("/dev/null")).unwrap_err().to_string();
        assert!(err.contains("a character device"), "{err}");
    }

    #[test]
    fn an_unexaminable_path_names_itself_and_keeps_the_os_error() {
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(5000)));
        let err = destroy(&long).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "{err:?}");
        assert!(shale_io::Chain(&err).to_string().contains("examining /tmp/xxx"), "{err}");
        let mut source = std::error::Error::source(&err);
        let mut os = None;
        while let Some(s) = source {
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                os = os.or(io.raw_os_error());
            }
            source = s.source();
        }
        assert_eq!(os, Some(libc::ENAMETOOLONG));
    }

    #[test]
    fn the_wal_tail_left_by_a_crash_goes_with_its_store() {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path());
        let volume = dir.path().join(VOLUME_FILE_NAME);
        let id = read_header(&volume).unwrap().volume_id;
        // What a killed process leaves in /dev/shm: a tail named after the volume id and
        // the volume file's instance.
        let owner = TailOwner {
            volume_id: id,
            instance_id: Some(shale_space::instance_id(&volume).unwrap()),
        };
        let tail = tail_path(Path::new(SHM_DIR), &owner);
        let written = std::fs::write(&tail, [&TAIL_MAGIC[..], &[0u8; 56]].concat());
        if shale_testkit::prerequisite::require("a writable /dev/shm", written).is_none() {
            return;
        }
        destroy(dir.path()).unwrap();
        assert!(!tail.exists(), "the tail went with its volume");
    }

    #[test]
    fn only_a_wal_tail_is_removed_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("shale-0000.tail");
        std::fs::write(&foreign, b"NOTATAILxxxxxxxx").unwrap();
        remove_tail(&foreign).unwrap();
        assert!(foreign.exists(), "a file without the tail's magic stays");
        let tail = dir.path().join("shale-0001.tail");
        std::fs::write(&tail, [&TAIL_MAGIC[..], &[0u8; 56]].concat()).unwrap();
        remove_tail(&tail).unwrap();
        assert!(!tail.exists());
        remove_tail(&tail).unwrap();
    }
}
