//! Where the undo log lives, and which store instance a persistent memory file belongs to.
//!
//! The undo log is on the store's volume (its ring in the spill area, `spill.rs`) unless it
//! is in a file of persistent memory: one on a DAX mount (real persistent memory, found by
//! [`dax_at`]), or one the options ask for ([`UndoLogPlace::Pmem`]: emulated persistent
//! memory, a file in `/dev/shm` or anywhere, which a reboot may take away). A store whose log
//! is in a file says so in its catalog (`catalog.rs`), with the file's path and identity,
//! and the file's headers name the store instance it belongs to (`undo_log.rs`): the
//! identity of the store's volume file. So:
//!
//! - a missing file is noticed: the open refuses, naming it ([`Error::UndoLogMissing`]),
//!   instead of opening without the records that roll back a transaction in flight;
//! - a copy of the store (`cp -a`: a new volume file, a new inode and birth time) that finds
//!   the original's file at the path its catalog names refuses it untouched
//!   ([`Error::UndoLogOfOriginal`]): it never replays, moves or removes another instance's
//!   log; a copy whose file was copied with it (a new file too: in the store's directory,
//!   or at the `pmem_path` given) takes that file as its own;
//! - a rename of the store (or of its directory) keeps both identities, so the log follows.
//!
//! ```text
//! a file's identity (16 bytes; in the catalog for the log's file, in the log's headers for
//! the volume file)
//! offset  size  field
//!   0      8    inode number (u64 LE)
//!   8      8    birth time in nanoseconds since the epoch (statx), or, where the file
//!               system gives none, the device number with bit 63 set (u64 LE)
//! all zero: no file (a log in the spill area, on a device opened directly, or written
//! before the binding)
//! ```
//! The birth time rather than the device number wherever there is one: a device's number
//! may change across a reboot (its driver's enumeration order), which would make the
//! store's own log look like another's on real persistent memory, where the log survives
//! the reboot. `cp -a` keeps modification times but cannot set a birth time.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::options::{PMEM_FILE_NAME, TableOptions, UndoLogPlace};
use crate::undo_log::RING_OFFSET;

/// A file's identity: see the module's diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// Inode number.
    pub ino: u64,
    /// Birth time in ns, or the device number with bit 63 set.
    pub born: u64,
}

impl FileId {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        let born =
            match meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()) {
                Some(d) => (d.as_nanos() as u64) & !(1 << 63),
                None => meta.dev() | (1 << 63),
            };
        FileId { ino: meta.ino(), born }
    }

    /// The identity of the file at `path`.
    ///
    /// # Errors
    /// The operating system's error, with the path.
    pub fn of_path(path: &Path) -> Result<FileId> {
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
        Ok(FileId::of(&meta))
    }

    pub fn encode(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ino.to_le_bytes());
        b[8..].copy_from_slice(&self.born.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; 16]) -> FileId {
        FileId {
            ino: u64::from_le_bytes(b[..8].try_into().unwrap()),
            born: u64::from_le_bytes(b[8..].try_into().unwrap()),
        }
    }
}

/// The persistent memory file a store's undo log is in, as its catalog names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoFile {
    /// The file's path: relative to the store's directory unless absolute.
    pub path: PathBuf,
    /// The file's identity when the store bound it.
    pub file: FileId,
}

impl UndoFile {
    /// The path of the file for the store in `dir`.
    pub fn resolve(&self, dir: &Path) -> PathBuf {
        dir.join(&self.path)
    }

    /// The entry for the file at `path` (of identity `file`) of the store in `dir`:
    /// relative when it is the default file in the directory, so that it follows a rename
    /// of the directory.
    fn new(dir: &Path, path: &Path, file: FileId) -> UndoFile {
        let path = match path.strip_prefix(dir) {
            Ok(rel) if rel == Path::new(PMEM_FILE_NAME) => rel.to_path_buf(),
            _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        };
        UndoFile { path, file }
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Space(shale_io::Error::at_path(shale_io::PathOp::Open, path, e).into())
}

/// What a file at a path holds, read without opening it for writing (no lock, no mapping):
/// the refusals happen before anything of the file is touched.
pub(crate) enum Found {
    /// No file there.
    Missing,
    /// A file of zeros where the headers go (made and never written, or truncated).
    Blank,
    /// Headers that name a store: its volume id and instance binding, and the file's
    /// identity.
    Owned { volume_id: [u8; 16], binding: [u8; 16], file: FileId },
    /// Bytes that are not a log's headers: left for the log's open to call corruption.
    Damaged,
}

pub(crate) fn look(path: &Path) -> Result<Found> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(io_error(path, e)),
    };
    let meta = f.metadata().map_err(|e| io_error(path, e))?;
    let mut head = vec![0u8; RING_OFFSET];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]).map_err(|e| io_error(path, e))? {
            0 => break,
            n => got += n,
        }
    }
    if head.iter().all(|&b| b == 0) {
        return Ok(Found::Blank);
    }
    Ok(match crate::undo_log::owner_of(&head) {
        Some((volume_id, binding)) => Found::Owned { volume_id, binding, file: FileId::of(&meta) },
        None => Found::Damaged,
    })
}

/// Whether a file made in `dir` would be mapped with DAX (real persistent memory): an
/// unnamed temporary file there is mapped as the log would be, and the kernel's acceptance
/// of `MAP_SYNC` is the answer (`pmem_map.rs`). False where `dir` does not exist or takes no
/// temporary file.
pub fn dax_at(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) =
        std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).open(dir)
    else {
        return false;
    };
    const PROBE_BYTES: usize = 4096;
    f.set_len(PROBE_BYTES as u64).is_ok()
        && crate::pmem_map::Mapping::new(&f, PROBE_BYTES).is_ok_and(|m| m.is_dax())
}

/// What the open does with the undo log of the store in a directory.
#[derive(Debug)]
pub(crate) struct UndoPlan {
    /// The file the log is in, or is read from at the open (its records rolled back): its
    /// path, and whether the open may make it (a new log).
    pub file: Option<PathBuf>,
    /// New records go to the log's ring on the volume; a `file` is then read at the open
    /// and retired after it: the catalog stops naming it, and it is removed.
    pub on_volume: bool,
    /// The catalog's entry after the open, when it changes (`Some(None)`: it names no
    /// file any more).
    pub record: Option<Option<UndoFile>>,
}

/// Decides where the undo log of the store in `dir` is read from and goes to, refusing a
/// missing file or one of another instance. `bound` is the file the catalog names;
/// `volume_id` and `instance` those of the store's volume (file).
///
/// # Errors
/// [`Error::UndoLogMissing`], [`Error::UndoLogOfOriginal`], [`Error::InvalidArgument`] for
/// a file of another store where a new log would go.
pub(crate) fn plan(
    dir: &Path,
    opts: &TableOptions,
    bound: Option<&UndoFile>,
    volume_id: [u8; 16],
    instance: FileId,
) -> Result<UndoPlan> {
    let default_path = opts.pmem_path.clone().unwrap_or_else(|| dir.join(PMEM_FILE_NAME));
    let ours = |binding: [u8; 16]| binding == [0; 16] || binding == instance.encode();
    // The file to read at the open, if any, and whether the store bound it.
    let mut read: Option<PathBuf> = None;
    // A file the open must neither use nor touch (the original's, for a copy).
    let mut foreign: Option<PathBuf> = None;
    match bound {
        Some(b) => {
            // A `pmem_path` given names where the log is now (moved, or copied with the
            // store); else the catalog's path.
            let path = opts.pmem_path.clone().unwrap_or_else(|| b.resolve(dir));
            match look(&path)? {
                Found::Missing | Found::Blank if !opts.accept_lost_undo_log => {
                    return Err(Error::UndoLogMissing { path });
                }
                Found::Missing | Found::Blank => {}
                Found::Owned { volume_id: v, .. } if v != volume_id => {
                    return Err(Error::InvalidArgument(format!(
                        "{} holds the undo log of another store",
                        path.display()
                    )));
                }
                Found::Owned { binding, file, .. } if !ours(binding) && file == b.file => {
                    // The very file the store bound, written by another instance: this
                    // store is a copy of that one, and the log is the original's.
                    if !opts.accept_lost_undo_log {
                        return Err(Error::UndoLogOfOriginal { path });
                    }
                    foreign = Some(path);
                }
                // Ours, or a copy of the log made with this copy of the store (both files
                // new): this instance's log.
                Found::Owned { .. } | Found::Damaged => read = Some(path),
            }
        }
        None => {
            // A store that never bound a file: one left by an open from before the binding
            // (a log of this volume with no instance named) is still read and rolled back.
            // One naming another instance of this store was bound by that instance (whose
            // catalog entry a crash kept from being written, or which this store is a copy
            // of): never this store's.
            if let Found::Owned { volume_id: v, binding, .. } = look(&default_path)? {
                match (v == volume_id, ours(binding)) {
                    (true, true) => read = Some(default_path.clone()),
                    (true, false) => foreign = Some(default_path.clone()),
                    (false, _) => {}
                }
            }
        }
    }
    let pmem_target = match opts.undo_log {
        UndoLogPlace::Volume => None,
        UndoLogPlace::Pmem => Some(read.clone().unwrap_or_else(|| default_path.clone())),
        UndoLogPlace::Auto => match (&read, bound) {
            // The store's own file, kept where it was chosen.
            (Some(p), Some(_)) => Some(p.clone()),
            _ => {
                let parent = default_path.parent().unwrap_or(Path::new("."));
                dax_at(parent).then(|| default_path.clone())
            }
        },
    };
    if let (Some(t), Some(f)) = (&pmem_target, &foreign) {
        if t == f {
            return Err(Error::InvalidArgument(format!(
                "{} is the undo log of the store this one is a copy of; give the copy a \
                 persistent memory file of its own (pmem_path) or put its log on the volume",
                t.display()
            )));
        }
    }
    Ok(match pmem_target {
        // The catalog's entry is settled once the file exists (`TableStore::open`).
        Some(path) => UndoPlan { file: Some(path), on_volume: false, record: None },
        None => UndoPlan { file: read, on_volume: true, record: bound.is_some().then_some(None) },
    })
}

/// The catalog's entry for the log file at `path` of the store in `dir`, as it is now.
///
/// # Errors
/// The operating system's error, with the path.
pub(crate) fn entry(dir: &Path, path: &Path) -> Result<UndoFile> {
    Ok(UndoFile::new(dir, path, FileId::of_path(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::{FilePmem, FilePmemOptions};
    use crate::undo_log::{ReclaimPolicy, UndoLog};

    const POLICY: ReclaimPolicy = ReclaimPolicy { batch: 4, percent: 60, wrap_after: u64::MAX };

    /// Writes a log's headers into `path` for volume `id`, naming instance `binding`.
    fn log_file(path: &Path, id: [u8; 16], binding: [u8; 16]) {
        let pmem =
            FilePmem::open(path, RING_OFFSET as u64 + (64 << 10), FilePmemOptions::default())
                .unwrap();
        drop(UndoLog::open_bound(Box::new(pmem), id, binding, POLICY).unwrap());
    }

    #[test]
    fn a_file_from_before_the_binding_is_read_and_one_of_another_instance_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let instance = FileId { ino: 7, born: 9 };
        let default = dir.path().join(PMEM_FILE_NAME);
        let opts = TableOptions::default();
        // No file: nothing to read; the volume unless DAX.
        let p = plan(dir.path(), &opts, None, [1; 16], instance).unwrap();
        assert_eq!((p.file, p.on_volume, p.record), (None, true, None));
        // A log written before bindings (no instance named): read, then retired.
        log_file(&default, [1; 16], [0; 16]);
        let p = plan(dir.path(), &opts, None, [1; 16], instance).unwrap();
        assert_eq!((p.file.as_deref(), p.on_volume), (Some(default.as_path()), true));
        // Asked for persistent memory, it is kept as the log.
        let pmem = TableOptions { undo_log: UndoLogPlace::Pmem, ..TableOptions::default() };
        let p = plan(dir.path(), &pmem, None, [1; 16], instance).unwrap();
        assert_eq!((p.file.as_deref(), p.on_volume), (Some(default.as_path()), false));
        // Another store's file is not read; another instance's is refused as a log.
        assert_eq!(plan(dir.path(), &opts, None, [2; 16], instance).unwrap().file, None);
        std::fs::remove_file(&default).unwrap();
        log_file(&default, [1; 16], FileId { ino: 8, born: 9 }.encode());
        assert_eq!(plan(dir.path(), &opts, None, [1; 16], instance).unwrap().file, None);
        let r = plan(dir.path(), &pmem, None, [1; 16], instance);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }

    #[test]
    fn identities_round_trip_and_tell_files_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::copy(&a, &b).unwrap();
        let (ia, ib) = (FileId::of_path(&a).unwrap(), FileId::of_path(&b).unwrap());
        assert_ne!(ia, ib, "a copy is another file");
        assert_eq!(FileId::decode(&ia.encode()), ia);
        let renamed = dir.path().join("c");
        std::fs::rename(&a, &renamed).unwrap();
        assert_eq!(FileId::of_path(&renamed).unwrap(), ia, "a rename keeps the identity");
    }
}
