//! One writer or many readers per store: an open file description (OFD) lock on the store's
//! volume file or block device while a handle is open.
//!
//! Why on the volume, not on the path the caller named: a store has many names (its
//! directory, the volume file inside it, symlinks to either, bind mounts, `/dev/disk/by-id`
//! aliases of a device), and a lock on the name lets each name lock on its own. Every name
//! resolves to one inode, so the lock is taken there: a directory is first resolved to its
//! volume file ([`crate::volume_file`]), and the lock is placed on the file opened
//! through it, following symlinks. (Issue #9: `shale check D/volume.shale` took a lock on the
//! file while a writer held one on `D`, recovered the store under it and deleted the writer's
//! WAL tail; a kill -9 of the writer then lost about 10,000 acknowledged writes.)
//!
//! Why OFD locks (`fcntl(F_OFD_SETLK)`): they belong to the open file description, so two
//! handles in one process conflict just as two processes do (POSIX `F_SETLK` locks do not,
//! and one `close` of any fd of the file drops them), and the kernel drops them when the
//! process dies, so a killed process never leaves a stale lock. A read-write open takes a
//! write lock (`F_WRLCK`), a read-only open a read lock (`F_RDLCK`): readers share, a writer
//! excludes everyone. The locks are advisory: they bind shale, not other programs.
//!
//! Moved down from the lsm engine so that every engine's store (the lsm engine's, the hash
//! engine's) takes the same lock: engines share code by moving it down a layer.
//!
//! A block device is additionally opened with `O_EXCL` by a writer, which the kernel refuses
//! (EBUSY) while the device is mounted or opened `O_EXCL` by anyone, through any device node.
//! A reader does not take `O_EXCL` (two readers would exclude each other); it meets a writer
//! through the OFD lock, which lives on the device node's inode: a second device node made
//! with mknod for the same device would escape that, not the writer's `O_EXCL`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use shale_io::PathOp;

use crate::error::{Error, Result};
use crate::volume_path::volume_file;

/// Held while the store is open.
#[derive(Debug)]
pub struct StoreLock {
    /// Let go of explicitly when the lock drops (after the removal below: [`LockedFile`]).
    file: LockedFile,
    /// The empty volume file this lock made for a new store ([`StoreLock::acquire_creating`]).
    created: Option<PathBuf>,
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // A creation that failed (no room for the volume, say) leaves no empty file behind:
        // a store's volume file is never empty once made. Removed while still locked, so no
        // other handle can be using it.
        if let Some(p) = &self.created {
            if self.file.metadata().is_ok_and(|m| m.len() == 0) {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// What an open needs from the other handles of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A read-write open: no other handle at all.
    Exclusive,
    /// A read-only open: no read-write handle.
    Shared,
}

impl StoreLock {
    /// Locks the store at `path` (its directory, its volume file or its block device, which
    /// must exist) for a read-write handle.
    ///
    /// # Errors
    /// [`Error::InUse`] when another handle holds it, read-only or read-write, in this process
    /// or another; [`Error::InvalidArgument`] when `path` names no store;
    /// [`Error::ReadOnly`] on a read-only file system; [`Error::Io`] if it cannot be opened.
    pub fn acquire(path: &Path) -> Result<StoreLock> {
        take(path, Mode::Exclusive, false)
    }

    /// As [`StoreLock::acquire`], but a directory without a volume file gets an empty one to
    /// lock, which the volume then grows into a new volume ([`crate::Volume::open_path`]
    /// takes an empty volume file for a missing one). Two processes creating a store at once
    /// so meet on one lock.
    pub fn acquire_creating(path: &Path) -> Result<StoreLock> {
        take(path, Mode::Exclusive, true)
    }

    /// Locks the store at `path` for a read-only handle: other read-only handles may hold it
    /// too, a read-write one may not.
    ///
    /// # Errors
    /// As [`StoreLock::acquire`] ([`Error::InUse`] only for a read-write handle).
    pub fn acquire_shared(path: &Path) -> Result<StoreLock> {
        take(path, Mode::Shared, false)
    }
}

fn take(path: &Path, mode: Mode, create: bool) -> Result<StoreLock> {
    let target = volume_file(path);
    let named = || describe(path, &target);
    let meta = match std::fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.is_dir() => {
            if !create {
                return Err(Error::InvalidArgument(format!(
                    "{} holds no store ({} is missing)",
                    path.display(),
                    target.display()
                )));
            }
            None
        }
        Err(e) => return Err(shale_io::Error::at_path(PathOp::Open, path, e).into()),
    };
    let block_device = meta.as_ref().is_some_and(|m| m.file_type().is_block_device());
    if let Some(m) = &meta {
        let ft = m.file_type();
        if !ft.is_file() && !block_device {
            // Checked before opening: opening a FIFO waits for a writer.
            return Err(Error::InvalidArgument(format!(
                "{} is {}, not a store (a directory, a volume file or a block device)",
                named(),
                shale_io::file_kind(&ft)
            )));
        }
    }
    let mut options = OpenOptions::new();
    options.read(true);
    if mode == Mode::Exclusive {
        // F_WRLCK needs a descriptor open for writing.
        options.write(true).create(create && meta.is_none());
        if block_device {
            options.custom_flags(libc::O_EXCL);
        }
    }
    let file = options.open(&target).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) if block_device => Error::InUse(format!(
            "{} is in use: mounted, or opened exclusively by another program or handle",
            named()
        )),
        Some(libc::EROFS) => Error::ReadOnly(format!(
            "{} is on a read-only file system: open it read-only (the lsm engine's \
                 Db::open_read_only)",
            named()
        )),
        _ => shale_io::Error::at_path(PathOp::Open, &target, e).into(),
    })?;
    let file = LockedFile::lock(file, mode).map_err(|e| match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES) => Error::InUse(match mode {
            Mode::Exclusive => format!(
                "{} is open by another handle (read-only or read-write, in this process or \
                 another)",
                named()
            ),
            Mode::Shared => format!(
                "{} is open by another handle for writing (in this process or another)",
                named()
            ),
        }),
        _ => shale_io::Error::at_path(PathOp::Lock, &target, e).into(),
    })?;
    let created = (create && meta.is_none()).then_some(target);
    Ok(StoreLock { file, created })
}

/// The volume file, and the name it was reached by where that differs.
fn describe(path: &Path, target: &PathBuf) -> String {
    if path == target {
        target.display().to_string()
    } else {
        format!("{} (the store at {})", target.display(), path.display())
    }
}

/// Takes an OFD lock on the whole file without waiting (also the lsm WAL tail's lock).
///
/// Its holder lets go with [`unlock`] before dropping the file: closing the descriptor
/// alone is not enough (see there).
pub fn lock(file: &File, mode: Mode) -> std::io::Result<()> {
    set(file, mode_type(mode))
}

/// A file and the OFD lock [`lock`] took on it, let go explicitly ([`unlock`]) when dropped:
/// for a lock held as long as a value lives (a mapped WAL tail, an undo log).
#[derive(Debug)]
pub struct LockedFile(File);

impl LockedFile {
    /// Locks `file` ([`lock`]); the error is `lock`'s, the file then closed.
    pub fn lock(file: File, mode: Mode) -> std::io::Result<LockedFile> {
        lock(&file, mode)?;
        Ok(LockedFile(file))
    }
}

impl std::ops::Deref for LockedFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.0
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        unlock(&self.0);
    }
}

/// Releases the OFD lock [`lock`] took through `file`.
///
/// Why explicitly, not by closing: the kernel drops an OFD lock when the last descriptor of
/// its open file description closes, and a process forked meanwhile holds a duplicate of
/// every descriptor until its exec closes them (`O_CLOEXEC`). So while any thread of the
/// process spawns a child (a test harness's threads, a server starting a helper), a store
/// just closed still looked locked, and an open right after it was refused with
/// [`Error::InUse`] (seen in CI: a server restarted at once over its own store). Unlocking
/// acts on the description, whoever else holds it.
pub fn unlock(file: &File) {
    // Nothing to do on failure: the descriptor's close still releases the lock in the end.
    let _ = set(file, libc::F_UNLCK);
}

fn mode_type(mode: Mode) -> libc::c_int {
    match mode {
        Mode::Exclusive => libc::F_WRLCK,
        Mode::Shared => libc::F_RDLCK,
    }
}

/// `fcntl(F_OFD_SETLK)` of the whole file to `l_type`, retried on EINTR.
fn set(file: &File, l_type: libc::c_int) -> std::io::Result<()> {
    // SAFETY: an all-zero `flock` is a valid value of the plain C struct; the fields that
    // matter are set below (l_start = l_len = 0: the whole file; l_pid must be 0 for OFD locks).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = l_type as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: F_OFD_SETLK reads the `flock` through the pointer, which points at a live
        // value for the call; the fd is open for the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl as *const _) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}
