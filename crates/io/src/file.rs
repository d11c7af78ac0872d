//! Devices over a regular file or a block device, served by io_uring or by pread/pwrite.
//!
//! Opening a device goes through these stages, in order:
//! 1. create the file if asked and absent (pre-allocated, so later writes cannot hit ENOSPC
//!    halfway through a volume that believes it owns the space), but for a range the caller
//!    asks to leave sparse and allocates itself as it fills it ([`Device::allocate_range`]);
//! 2. open it, with O_DIRECT when asked; under [`Backend::Auto`] a file system that refuses
//!    O_DIRECT (EINVAL) falls back to buffered pread/pwrite;
//! 3. find its size and block size (fstat for a file, ioctls for a block device);
//! 4. pick the backend; under [`Backend::Auto`] a kernel without io_uring (ENOSYS, or EPERM
//!    where a sandbox forbids it) falls back to pread/pwrite.
//!
//! Each fallback logs exactly one warning saying why, so a slow run can be explained.
//!
//! [`open_device_read_only`] runs stages 2 to 4 with O_RDONLY: it creates nothing, works on a
//! read-only mount, and the device refuses to grow. Every failure of these stages names the
//! path and the operation ([`Error::Path`]), never a byte offset no request was made at.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::device::{Device, DeviceInfo, DeviceRef, Queue, QueueOptions};
use crate::error::{Error, OpKind, PathOp, Result};
use crate::inline::InlineQueue;
use crate::pread::PreadBackend;
use crate::uring::UringQueue;

/// Block size of a device over a regular file: the page size, which every file system that
/// supports O_DIRECT accepts, and the unit space allocates in anyway.
pub const FILE_BLOCK_SIZE: u32 = 4096;

/// `BLKGETSIZE64` = `_IOR(0x12, 114, size_t)`; the libc crate does not export it.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// Which backend serves a file device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// io_uring with O_DIRECT where the system allows it, else pread/pwrite (with a warning).
    #[default]
    Auto,
    /// io_uring; fails if the kernel refuses it.
    Uring,
    /// pread/pwrite, one request at a time inside `submit`.
    Pread,
}

impl Backend {
    /// The name [`DeviceInfo::backend`] reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Uring => "uring",
            Backend::Pread => "pread",
        }
    }
}

/// Options for [`open_device`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// Which backend to use.
    pub backend: Backend,
    /// Open with O_DIRECT, bypassing the page cache (the engine has its own cache).
    pub direct: bool,
    /// If no file exists at the path, create a regular file of this many bytes (a multiple of
    /// [`FILE_BLOCK_SIZE`]), pre-allocated with fallocate. An existing file is used as it is.
    pub create_size: Option<u64>,
    /// A byte range of a file created by `create_size` to leave unallocated (a hole, reading
    /// as zeros): storage its user allocates piece by piece as it fills it, with
    /// [`Device::allocate_range`]. Block-aligned and within `create_size`; ignored when no
    /// file is created.
    pub create_sparse: Option<Range<u64>>,
}

impl Default for FileOptions {
    fn default() -> FileOptions {
        FileOptions { backend: Backend::Auto, direct: true, create_size: None, create_sparse: None }
    }
}

/// How the file was opened: with the page cache or around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caching {
    Direct,
    Buffered,
}

/// An open file or block device, shared by the device and all its queues.
pub(crate) struct OpenFile {
    file: File,
    /// The path it was opened by, for error messages.
    path: PathBuf,
    capacity: AtomicU64,
    block_size: u32,
    growable: bool,
    /// A block device rather than a regular file.
    block_device: bool,
    backend: Backend,
}

impl OpenFile {
    pub(crate) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    pub(crate) fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.capacity.load(Ordering::Acquire),
            block_size: self.block_size,
            backend: self.backend.name(),
            growable: self.growable,
        }
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

/// A device over a regular file or a block device.
pub struct FileDevice {
    file: Arc<OpenFile>,
    /// Serialises [`Device::grow`] so two growers cannot both extend from the same old size.
    grow_lock: Mutex<()>,
}

impl fmt::Debug for FileDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileDevice").field("info", &self.file.info()).finish()
    }
}

/// Opens the file or block device at `path` as a device.
///
/// ```
/// use shale_io::{open_device, Device, FileOptions, QueueExt, QueueOptions, AlignedBuf};
///
/// let dir = tempfile::tempdir()?;
/// let opts = FileOptions { create_size: Some(1 << 20), ..FileOptions::default() };
/// let dev = open_device(&dir.path().join("volume"), &opts)?;
/// let mut queue = dev.open_queue(&QueueOptions::default())?;
/// queue.write_at(0, AlignedBuf::padded_copy(b"hello", 4096), true)?;
/// assert_eq!(&queue.read_at(0, 4096)?[..5], b"hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for a path that is neither a regular file nor a block device, or
/// a `create_size` that is not block-aligned; [`Error::Unsupported`] when an explicitly chosen
/// backend or O_DIRECT is refused; [`Error::NoSpace`] if the file cannot be pre-allocated;
/// [`Error::Io`] for other failures of the operating system.
pub fn open_device(path: &Path, opts: &FileOptions) -> Result<DeviceRef> {
    if let Some(size) = opts.create_size {
        create_if_absent(path, size, opts.create_sparse.clone())?;
    }
    let (file, caching) = open_with_fallback(path, opts, open_file)?;
    let backend = pick_backend(opts.backend, caching, UringQueue::probe)?;
    let open = describe(file, path, backend)?;
    Ok(Arc::new(FileDevice { file: Arc::new(open), grow_lock: Mutex::new(()) }))
}

/// Opens the file or block device at `path` for reading only (O_RDONLY): nothing is created,
/// a read-only mount is fine, [`Device::grow`] is refused, and a write request fails in the
/// operating system (EBADF). `opts.create_size` must be `None`.
///
/// # Errors
/// As [`open_device`]; [`Error::InvalidArgument`] for a `create_size`.
pub fn open_device_read_only(path: &Path, opts: &FileOptions) -> Result<DeviceRef> {
    if let Some(size) = opts.create_size {
        return Err(Error::InvalidArgument(format!(
            "a read-only open creates nothing (create_size {size} given for {})",
            path.display()
        )));
    }
    let (file, caching) = open_with_fallback(path, opts, open_file_read_only)?;
    let backend = pick_backend(opts.backend, caching, UringQueue::probe)?;
    let mut open = describe(file, path, backend)?;
    open.growable = false;
    Ok(Arc::new(FileDevice { file: Arc::new(open), grow_lock: Mutex::new(()) }))
}

/// Stage 1: creates a file of `size` bytes unless one exists, pre-allocated but for `sparse`.
/// An empty regular file counts as absent: the store lock makes the volume file empty before
/// creating a store in it (so that two creators meet on one lock), and a crash can leave it so.
fn create_if_absent(path: &Path, size: u64, sparse: Option<Range<u64>>) -> Result<()> {
    let bs = u64::from(FILE_BLOCK_SIZE);
    if size == 0 || size % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "create_size {size} is not a positive multiple of {FILE_BLOCK_SIZE}"
        )));
    }
    let hole = sparse.unwrap_or(size..size);
    if hole.start > hole.end || hole.end > size || hole.start % bs != 0 || hole.end % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "create_sparse {hole:?} is not a range of {FILE_BLOCK_SIZE}-byte blocks within \
             create_size {size}"
        )));
    }
    let file = match std::fs::metadata(path) {
        // Something is there: it is used as it is (a non-file is refused when described).
        Ok(m) if !m.is_file() || m.len() > 0 => return Ok(()),
        Ok(_) => OpenOptions::new().write(true).open(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            OpenOptions::new().write(true).create_new(true).open(path)
        }
        Err(e) => return Err(Error::at_path(PathOp::Stat, path, e)),
    };
    let file = match file {
        Ok(file) => file,
        // Another creator won the race between the check and the open: use its file.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(Error::at_path(PathOp::Create, path, e)),
    };
    // Allocating past the end extends the file, so the part after the hole makes it whole;
    // a hole at the very end needs the size set.
    let allocated = allocate(&file, 0, hole.start)
        .and_then(|()| allocate(&file, hole.end, size - hole.end))
        .and_then(|()| match file.set_len(size) {
            Ok(()) => Ok(()),
            Err(source) => Err(Error::Io { op: OpKind::Write, offset: size, source }),
        });
    if let Err(e) = allocated {
        // Leave no half-allocated file behind: an empty one reads as absent next time.
        let _ = file.set_len(0);
        return Err(match e {
            Error::Io { source, .. } => {
                Error::at_path(PathOp::Allocate { bytes: size }, path, source)
            }
            other => other,
        });
    }
    file.sync_all().map_err(|e| Error::at_path(PathOp::Sync, path, e))?;
    // The new directory entry must be durable too, or a crash could lose the whole file.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::at_path(PathOp::Sync, dir, e))?;
    }
    Ok(())
}

/// Makes `[offset, offset + len)` of the file allocated, extending its size. A failure is an
/// [`Error::Io`] write at `offset` holding the operating system's error (ENOSPC included:
/// callers name the path and the sizes).
fn allocate(file: &File, offset: u64, len: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let failed = |source| Error::Io { op: OpKind::Write, offset, source };
    match fallocate(file, 0, offset, len) {
        Ok(()) => Ok(()),
        // Some file systems cannot pre-allocate; a sparse extension still gives the size.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            file.set_len(offset + len).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

pub(crate) fn open_file(path: &Path, caching: Caching) -> io::Result<File> {
    let mut flags = libc::O_CLOEXEC;
    if caching == Caching::Direct {
        flags |= libc::O_DIRECT;
    }
    OpenOptions::new().read(true).write(true).custom_flags(flags).open(path)
}

/// As [`open_file`], O_RDONLY. O_NONBLOCK too: reading a FIFO would otherwise block until
/// a writer came; regular files and block devices ignore it.
pub(crate) fn open_file_read_only(path: &Path, caching: Caching) -> io::Result<File> {
    let mut flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    if caching == Caching::Direct {
        flags |= libc::O_DIRECT;
    }
    OpenOptions::new().read(true).custom_flags(flags).open(path)
}

/// Stage 2: opens the file, falling back from O_DIRECT to buffered I/O under `Auto`.
/// `open` is a parameter so tests can play a file system that refuses O_DIRECT.
pub(crate) fn open_with_fallback(
    path: &Path,
    opts: &FileOptions,
    open: impl Fn(&Path, Caching) -> io::Result<File>,
) -> Result<(File, Caching)> {
    let os_error = |e| Error::at_path(PathOp::Open, path, e);
    if !opts.direct {
        return Ok((open(path, Caching::Buffered).map_err(os_error)?, Caching::Buffered));
    }
    match open(path, Caching::Direct) {
        Ok(file) => Ok((file, Caching::Direct)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && opts.backend == Backend::Auto => {
            log::warn!(
                "{}: the file system refuses O_DIRECT ({e}); falling back to pread/pwrite \
                 through the page cache",
                path.display()
            );
            Ok((open(path, Caching::Buffered).map_err(os_error)?, Caching::Buffered))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Error::Unsupported(format!(
            "{}: O_DIRECT refused by the file system ({e})",
            path.display()
        ))),
        Err(e) => Err(os_error(e)),
    }
}

/// Stage 4: resolves `Auto` to a concrete backend. A buffered fallback already happened in
/// stage 2 and logged its reason, so it goes straight to pread without a second warning.
pub(crate) fn pick_backend(
    requested: Backend,
    caching: Caching,
    probe: impl Fn() -> io::Result<()>,
) -> Result<Backend> {
    match requested {
        Backend::Pread => Ok(Backend::Pread),
        Backend::Uring => match probe() {
            Ok(()) => Ok(Backend::Uring),
            Err(e) => Err(Error::Unsupported(format!("io_uring setup failed: {e}"))),
        },
        Backend::Auto if caching == Caching::Buffered => Ok(Backend::Pread),
        Backend::Auto => match probe() {
            Ok(()) => Ok(Backend::Uring),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                log::warn!("io_uring is not available ({e}); falling back to pread/pwrite");
                Ok(Backend::Pread)
            }
            Err(e) => Err(Error::Unsupported(format!("io_uring setup failed: {e}"))),
        },
    }
}

/// Stage 3: size, block size and growability of what was opened.
pub(crate) fn describe(file: File, path: &Path, backend: Backend) -> Result<OpenFile> {
    let meta = file.metadata().map_err(|e| Error::at_path(PathOp::Stat, path, e))?;
    let ft = meta.file_type();
    let (capacity, block_size, growable) = if ft.is_block_device() {
        let (capacity, block_size) = block_device_geometry(&file, path)?;
        (capacity, block_size, false)
    } else if ft.is_file() {
        // A tail shorter than a block cannot be addressed by an aligned request.
        let capacity = meta.len() - meta.len() % u64::from(FILE_BLOCK_SIZE);
        (capacity, FILE_BLOCK_SIZE, true)
    } else {
        return Err(Error::InvalidArgument(format!(
            "{} is {}, not a regular file or a block device",
            path.display(),
            file_kind(&ft)
        )));
    };
    let path = path.to_path_buf();
    let block_device = ft.is_block_device();
    let capacity = AtomicU64::new(capacity);
    Ok(OpenFile { file, path, capacity, block_size, growable, block_device, backend })
}

/// What kind of file `ft` is, as a phrase for messages ("a directory").
pub fn file_kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a regular file"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "a file of an unknown kind"
    }
}

fn block_device_geometry(file: &File, path: &Path) -> Result<(u64, u32)> {
    let failed = || Error::at_path(PathOp::Stat, path, io::Error::last_os_error());
    let mut capacity: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which points at a live u64.
    if unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut capacity as *mut u64) } != 0 {
        return Err(failed());
    }
    let mut block_size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer, which points at a live c_int.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut block_size as *mut _) } != 0 {
        return Err(failed());
    }
    let block_size = u32::try_from(block_size)
        .ok()
        .filter(|b| b.is_power_of_two() && *b >= 512)
        .ok_or_else(|| Error::InvalidArgument(format!("odd logical block size {block_size}")))?;
    Ok((capacity - capacity % u64::from(block_size), block_size))
}

impl Device for FileDevice {
    fn info(&self) -> DeviceInfo {
        self.file.info()
    }

    fn open_queue(&self, opts: &QueueOptions) -> Result<Box<dyn Queue>> {
        opts.validate()?;
        match self.file.backend {
            Backend::Uring => Ok(Box::new(UringQueue::new(self.file.clone(), opts)?)),
            _ => {
                let backend = Arc::new(PreadBackend::new(self.file.clone()));
                Ok(Box::new(InlineQueue::new(backend, opts.depth as usize)))
            }
        }
    }

    fn grow(&self, capacity: u64) -> Result<()> {
        if !self.file.growable {
            return Err(Error::Unsupported(format!(
                "{} cannot grow (a block device, or opened read-only)",
                self.file.path.display()
            )));
        }
        if capacity % u64::from(self.file.block_size) != 0 {
            return Err(Error::InvalidArgument(format!(
                "capacity {capacity} not a multiple of {}",
                self.file.block_size
            )));
        }
        let _guard = self.grow_lock.lock();
        let current = self.file.capacity.load(Ordering::Acquire);
        if capacity <= current {
            return Ok(());
        }
        let path = &self.file.path;
        // A sparse extension: the new range takes no storage until it is allocated, range by
        // range, before it is written (the volume allocates each extent it hands out). Growing
        // with fallocate gave storage to the whole new range at once, so a volume grown by a
        // quarter kept that quarter on disk as free slots: 1.4 GB beyond 5.6 GB of SSTs in
        // BENCHMARKS.md's regime (c).
        self.file
            .file()
            .set_len(capacity)
            .map_err(|e| Error::at_path(PathOp::Grow { from: current, to: capacity }, path, e))?;
        // The new size is file metadata: only a full fsync makes it survive a crash.
        self.file.file().sync_all().map_err(|e| Error::at_path(PathOp::Sync, path, e))?;
        self.file.capacity.store(capacity, Ordering::Release);
        Ok(())
    }

    /// The file system's blocks free to unprivileged users (statvfs `f_bavail`), for a
    /// regular file; `None` for a block device (all its storage is its own) or when the file
    /// system cannot tell.
    fn free_storage(&self) -> Option<u64> {
        if self.file.block_device {
            return None;
        }
        // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: fstatvfs writes only into `st`; the fd is open for the call.
        if unsafe { libc::fstatvfs(self.file.file().as_raw_fd(), &mut st) } != 0 {
            return None;
        }
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// fallocate(mode 0) within the file's size. A block device has all its storage from
    /// the start: nothing to do. A file system without fallocate (EOPNOTSUPP) gets nothing
    /// either: its writes allocate as they come, as they did in a file created sparse.
    fn allocate_range(&self, offset: u64, len: u64) -> Result<()> {
        crate::device::check_range(&self.info(), "allocation", offset, len)?;
        if self.file.block_device || len == 0 {
            return Ok(());
        }
        match fallocate(self.file.file(), 0, offset, len) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => Err(Error::NoSpace { offset }),
            Err(source) => Err(Error::Io { op: OpKind::Write, offset, source }),
            Ok(()) => Ok(()),
        }
    }

    /// fallocate(PUNCH_HOLE | KEEP_SIZE): the range reads as zeros and its storage goes back
    /// to the file system; the file keeps its size. Ignored where the file system cannot
    /// punch holes (EOPNOTSUPP): the bytes stay, which the contract allows. A block device
    /// does nothing: its size is fixed whatever it holds, and a discard (BLKDISCARD) would
    /// need care, since some devices do not zero discarded blocks and others lose
    /// performance to it; a released range keeps its old bytes there, which the contract
    /// allows too.
    fn release_range(&self, offset: u64, len: u64) -> Result<()> {
        crate::device::check_range(&self.info(), "release", offset, len)?;
        if self.file.block_device || len == 0 {
            return Ok(());
        }
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        match fallocate(self.file.file(), mode, offset, len) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            Err(source) => Err(Error::Io { op: OpKind::Write, offset, source }),
            Ok(()) => Ok(()),
        }
    }
}

/// fallocate(2) on `[offset, offset + len)` with `mode`, retried on EINTR.
fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(size)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: fallocate only reads its integer arguments; the fd is open for the call.
        if unsafe { libc::fallocate(file.as_raw_fd(), mode, off, size) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QueueExt;

    fn refuse_direct(path: &Path, caching: Caching) -> io::Result<File> {
        match caching {
            Caching::Direct => Err(io::Error::from_raw_os_error(libc::EINVAL)),
            Caching::Buffered => open_file(path, caching),
        }
    }

    /// Records warnings so tests can check the fallbacks explain themselves exactly once.
    struct Capture;

    static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static CAPTURE: Capture = Capture;

    impl log::Log for Capture {
        fn enabled(&self, meta: &log::Metadata) -> bool {
            meta.level() <= log::Level::Warn
        }
        fn log(&self, record: &log::Record) {
            if self.enabled(record.metadata()) {
                WARNINGS.lock().push(record.args().to_string());
            }
        }
        fn flush(&self) {}
    }

    /// Warnings logged so far that contain `needle` (tests run in parallel in one process).
    fn warnings_about(needle: &str) -> Vec<String> {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            log::set_logger(&CAPTURE).expect("no other logger in unit tests");
            log::set_max_level(log::LevelFilter::Warn);
        });
        WARNINGS.lock().iter().filter(|w| w.contains(needle)).cloned().collect()
    }

    #[test]
    fn auto_falls_back_to_buffered_when_o_direct_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        create_if_absent(&path, 8192, None).unwrap();
        let name = path.display().to_string();
        assert!(warnings_about(&name).is_empty());
        let (_, caching) =
            open_with_fallback(&path, &FileOptions::default(), refuse_direct).unwrap();
        assert_eq!(caching, Caching::Buffered);
        let warnings = warnings_about(&name);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("O_DIRECT"), "{}", warnings[0]);
        assert_eq!(
            pick_backend(Backend::Auto, caching, || panic!("no probe when buffered")).unwrap(),
            Backend::Pread
        );
    }

    #[test]
    fn explicit_backend_does_not_fall_back_from_o_direct() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        create_if_absent(&path, 8192, None).unwrap();
        let opts = FileOptions { backend: Backend::Uring, ..FileOptions::default() };
        let err = open_with_fallback(&path, &opts, refuse_direct).unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err}");
    }

    #[test]
    fn auto_falls_back_to_pread_without_io_uring() {
        let before = warnings_about("io_uring is not available").len();
        for errno in [libc::ENOSYS, libc::EPERM] {
            let probe = || Err(io::Error::from_raw_os_error(errno));
            assert_eq!(
                pick_backend(Backend::Auto, Caching::Direct, probe).unwrap(),
                Backend::Pread
            );
            let err = pick_backend(Backend::Uring, Caching::Direct, probe).unwrap_err();
            assert!(matches!(err, Error::Unsupported(_)), "{err}");
        }
        // One warning per fallback; the explicit choice fails instead of warning.
        assert_eq!(warnings_about("io_uring is not available").len(), before + 2);
    }

    #[test]
    fn create_size_must_be_block_aligned_and_existing_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert!(matches!(create_if_absent(&path, 1000, None), Err(Error::InvalidArgument(_))));
        create_if_absent(&path, 3 * 4096, None).unwrap();
        create_if_absent(&path, 4096, None).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 4096);
    }

    /// Bytes the file system has allocated to the file.
    fn allocated_bytes(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn a_sparse_range_is_left_unallocated_and_allocated_and_released_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mib = 1u64 << 20;
        let opts = FileOptions {
            create_size: Some(8 * mib),
            create_sparse: Some(mib..7 * mib),
            direct: false,
            ..FileOptions::default()
        };
        let dev = open_device(&path, &opts).unwrap();
        assert_eq!(dev.info().capacity, 8 * mib);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8 * mib);
        // Where fallocate works (ext4, xfs, btrfs, tmpfs): the hole takes no space.
        let allocated = allocated_bytes(&path);
        assert!(allocated <= 2 * mib, "{allocated} bytes allocated");
        dev.allocate_range(mib, 2 * mib).unwrap();
        assert!(allocated_bytes(&path) >= allocated + 2 * mib);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(mib, crate::AlignedBuf::padded_copy(b"data", 4096), true).unwrap();
        dev.release_range(mib, 2 * mib).unwrap();
        assert_eq!(allocated_bytes(&path), allocated);
        assert!(q.read_at(mib, 4096).unwrap().iter().all(|&b| b == 0), "a hole reads as zeros");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8 * mib, "the size is kept");
        for bad in [(100, 4096), (0, 100), (8 * mib - 4096, 8192)] {
            let e = dev.release_range(bad.0, bad.1).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            let e = dev.allocate_range(bad.0, bad.1).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        let bad = FileOptions { create_sparse: Some(0..9 * mib), ..opts };
        let e = open_device(&dir.path().join("g"), &bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn capacity_ignores_a_partial_tail_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 4096 + 100]).unwrap();
        let dev = open_device(&path, &FileOptions::default()).unwrap();
        assert_eq!(dev.info().capacity, 4096);
    }

    #[test]
    fn a_directory_is_not_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileOptions { direct: false, ..FileOptions::default() };
        let err = open_device(dir.path(), &opts).unwrap_err();
        // Opening a directory read-write fails in the OS (EISDIR) before the type check can;
        // the error names the path and the operation, not a byte offset.
        assert!(matches!(err, Error::Path { op: PathOp::Open, .. }), "{err}");
        assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
        // Read-only, the open succeeds and the type check refuses it.
        let err = open_device_read_only(dir.path(), &opts).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(ref s) if s.contains("a directory")), "{err}");
    }

    #[test]
    fn a_read_only_device_reads_and_refuses_to_grow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let dev = open_device_read_only(&path, &FileOptions::default()).unwrap();
        assert_eq!(dev.info().capacity, 8192);
        assert!(!dev.info().growable);
        assert!(matches!(dev.grow(16384), Err(Error::Unsupported(_))));
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        assert_eq!(&q.read_at(0, 4096).unwrap()[..], &[7u8; 4096][..]);
        let buf = crate::AlignedBuf::padded_copy(b"x", 4096);
        assert!(q.write_at(0, buf, false).is_err(), "a read-only device took a write");
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 8192]);
        let opts = FileOptions { create_size: Some(4096), ..FileOptions::default() };
        assert!(matches!(open_device_read_only(&path, &opts), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn a_full_file_system_names_the_file_and_the_size() {
        // An ENOSPC from pre-allocation, as `create_if_absent` reports it.
        let e = Error::at_path(
            PathOp::Allocate { bytes: 8 << 20 },
            "/mnt/db/volume.shale",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(e.is_no_space());
        let msg = crate::Chain(&e).to_string();
        assert!(msg.starts_with("cannot pre-allocate 8388608 bytes for /mnt/db/volume.shale: "));
        let e = Error::at_path(
            PathOp::Grow { from: 4096, to: 12288 },
            "/v",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(e.to_string().starts_with("cannot grow /v from 4096 to 12288 bytes (8192 more)"));
        let source = std::error::Error::source(&e).unwrap().downcast_ref::<io::Error>().unwrap();
        assert_eq!(source.raw_os_error(), Some(libc::ENOSPC));
    }
}
