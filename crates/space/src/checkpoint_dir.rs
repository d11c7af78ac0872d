//! Where a checkpoint is made: a new directory, built under a temporary name beside its
//! destination and renamed into place once it is complete.
//!
//! Every engine's checkpoint (the lsm engine's `Db::checkpoint`, the hash engine's
//! `HashStore::checkpoint`, the table engine's `TableStore::checkpoint`) writes a new store
//! of its own kind. What they share is here, in the layer below them, because the rules are
//! about directories, not keys: a crash or an error in the middle of a copy must never leave
//! at the destination something that opens as a complete checkpoint, and a destination that
//! holds anything must be refused untouched.
//!
//! Stages, in this order:
//! 1. [`CheckpointDir::begin`]: the destination must not exist, or be an empty directory,
//!    and its parent must be a directory; anything else (a file, a non-empty directory, a
//!    symbolic link, a device) is refused before anything is written. A staging directory
//!    `.NAME.checkpoint-PID-N` is then created in the parent.
//! 2. The engine writes its new store inside [`CheckpointDir::staging`] and closes it; the
//!    engine's close makes the store durable.
//! 3. [`CheckpointDir::commit`]: the staging directory is synced (its entries), renamed to
//!    the destination, and the parent synced, so the rename is durable. rename(2) replaces
//!    an empty directory in one step and fails on a non-empty one or on a file, so a
//!    destination filled while the copy ran is still refused, and left as it was.
//!
//! A `CheckpointDir` dropped without its commit (an error on the way) removes its staging
//! directory. A crash leaves it, under its dotted name in the destination's parent: it is
//! never taken for the checkpoint, and can be removed by hand.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use shale_io::PathOp;

use crate::error::{Error, Result};

/// Names tried for a staging directory before giving up: each name carries the process id
/// and a counter, so a clash means a leftover of a crashed process with the same id.
const STAGING_NAMES_MAX: u32 = 64;

/// Staging directories made by this process, so two checkpoints at once never share one.
static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A checkpoint's destination and the staging directory its store is built in.
#[derive(Debug)]
pub struct CheckpointDir {
    destination: PathBuf,
    staging: PathBuf,
    committed: bool,
}

impl CheckpointDir {
    /// Checks `destination` (missing, or an empty directory, in an existing directory) and
    /// makes the staging directory beside it.
    ///
    /// ```
    /// use shale_space::CheckpointDir;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let dst = dir.path().join("copy");
    /// let staged = CheckpointDir::begin(&dst)?;
    /// std::fs::write(staged.staging().join("volume.shale"), b"a store")?;
    /// assert!(!dst.exists(), "nothing at the destination until the commit");
    /// staged.commit()?;
    /// assert_eq!(std::fs::read(dst.join("volume.shale"))?, b"a store");
    /// assert!(shale_space::CheckpointDir::begin(&dst).is_err(), "a non-empty directory");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the destination when it holds anything, is not a
    /// directory, or has no parent directory; [`Error::Io`] when it cannot be examined or
    /// the staging directory cannot be made.
    pub fn begin(destination: &Path) -> Result<CheckpointDir> {
        check_destination(destination)?;
        let parent = parent_of(destination)?;
        let name = destination.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        for _ in 0..STAGING_NAMES_MAX {
            let n = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
            let staging = parent.join(format!(".{name}.checkpoint-{}-{n}", std::process::id()));
            match std::fs::create_dir(&staging) {
                Ok(()) => {
                    return Ok(CheckpointDir {
                        destination: destination.to_path_buf(),
                        staging,
                        committed: false,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(PathOp::CreateDir, &staging, e)),
            }
        }
        Err(Error::InvalidArgument(format!(
            "cannot find a free staging name for {} in {} ({STAGING_NAMES_MAX} tried: remove \
             the .{name}.checkpoint-* directories that crashed checkpoints left there)",
            destination.display(),
            parent.display()
        )))
    }

    /// The directory the engine builds its store in.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// The checkpoint's destination.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Makes the staging directory the destination, durably. The store inside must be
    /// closed (and so synced) first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the destination was filled (or made a file) while
    /// the copy ran; [`Error::Io`] when a sync or the rename fails. The staging directory
    /// is removed either way.
    pub fn commit(mut self) -> Result<PathBuf> {
        sync_dir(&self.staging)?;
        if let Err(e) = std::fs::rename(&self.staging, &self.destination) {
            return Err(match e.raw_os_error() {
                Some(libc::ENOTEMPTY | libc::EEXIST | libc::ENOTDIR | libc::EISDIR) => {
                    Error::InvalidArgument(format!(
                        "{} was filled while the checkpoint was made: a checkpoint is made \
                         only where nothing is ({e})",
                        self.destination.display()
                    ))
                }
                _ => io(PathOp::Rename, &self.destination, e),
            });
        }
        self.committed = true;
        sync_dir(parent_of(&self.destination)?)?;
        Ok(self.destination.clone())
    }
}

impl Drop for CheckpointDir {
    fn drop(&mut self) {
        if !self.committed
            && let Err(e) = std::fs::remove_dir_all(&self.staging)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::warn!(
                "cannot remove the unfinished checkpoint {}: {e}; remove it by hand",
                self.staging.display()
            );
        }
    }
}

/// Stage 1: the destination is missing or an empty directory. Read without following a
/// symbolic link: a link to an empty directory would be replaced, not filled.
fn check_destination(destination: &Path) -> Result<()> {
    let meta = match destination.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(PathOp::Stat, destination, e)),
    };
    let refuse = |what: &str| {
        Err(Error::InvalidArgument(format!(
            "{} {what}: a checkpoint is made only where nothing is (a missing path or an empty \
             directory); nothing was changed",
            destination.display()
        )))
    };
    if meta.file_type().is_symlink() {
        return refuse("is a symbolic link");
    }
    if !meta.is_dir() {
        return refuse("exists and is not a directory");
    }
    let mut entries =
        std::fs::read_dir(destination).map_err(|e| io(PathOp::ReadDir, destination, e))?;
    if entries.next().is_some() {
        return refuse("is a directory that is not empty");
    }
    Ok(())
}

/// The directory holding `path` (the current directory for a bare name).
fn parent_of(path: &Path) -> Result<&Path> {
    let no_parent = || {
        Error::InvalidArgument(format!(
            "{} names no directory entry a checkpoint can be renamed to",
            path.display()
        ))
    };
    if path.file_name().is_none() {
        return Err(no_parent());
    }
    let parent = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return Err(no_parent()),
    };
    if !parent.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} is not a directory: a checkpoint's parent directory must exist",
            parent.display()
        )));
    }
    Ok(parent)
}

/// Makes a directory's entries durable.
fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| io(PathOp::Open, dir, e))?;
    f.sync_all().map_err(|e| io(PathOp::Sync, dir, e))
}

fn io(op: PathOp, path: &Path, e: std::io::Error) -> Error {
    Error::from(shale_io::Error::at_path(op, path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_file_and_a_non_empty_directory_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"data").unwrap();
        assert!(matches!(CheckpointDir::begin(&file), Err(Error::InvalidArgument(_))));
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("x"), b"x").unwrap();
        assert!(matches!(CheckpointDir::begin(&full), Err(Error::InvalidArgument(_))));
        assert_eq!(std::fs::read(full.join("x")).unwrap(), b"x");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2, "no staging directory left behind");
    }

    #[test]
    fn an_empty_directory_is_replaced_and_a_dropped_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("empty");
        std::fs::create_dir(&dst).unwrap();
        let staged = CheckpointDir::begin(&dst).unwrap();
        std::fs::write(staged.staging().join("v"), b"1").unwrap();
        staged.commit().unwrap();
        assert_eq!(std::fs::read(dst.join("v")).unwrap(), b"1");

        let other = dir.path().join("other");
        let staged = CheckpointDir::begin(&other).unwrap();
        let staging = staged.staging().to_path_buf();
        drop(staged);
        assert!(!staging.exists() && !other.exists());
    }

    #[test]
    fn a_destination_filled_during_the_copy_is_refused_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("d");
        let staged = CheckpointDir::begin(&dst).unwrap();
        std::fs::create_dir(&dst).unwrap();
        std::fs::write(dst.join("theirs"), b"t").unwrap();
        assert!(matches!(staged.commit(), Err(Error::InvalidArgument(_))));
        assert_eq!(std::fs::read(dst.join("theirs")).unwrap(), b"t");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
