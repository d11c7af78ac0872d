//! Opening a volume by path: a directory gets a volume file inside it, a regular file or a
//! block device is used as it is.

use std::path::{Path, PathBuf};

use shale_io::{DeviceRef, FileOptions, PathOp, open_device, open_device_read_only};

use crate::error::{Error, Result};
use crate::layout::{HEADER_AREA_BYTES, Layout};
use crate::store_lock::StoreLock;
use crate::volume::{Opened, Volume, VolumeOptions};

/// Name of the volume file inside a directory.
pub const VOLUME_FILE_NAME: &str = "volume.shale";

/// Where a path's volume lives: the path itself, or the volume file inside a directory.
pub fn volume_file(path: &Path) -> PathBuf {
    if path.is_dir() { path.join(VOLUME_FILE_NAME) } else { path.to_path_buf() }
}

impl Volume {
    /// Opens the volume at `path`, creating it if it is missing and the options allow:
    /// - a directory (created if `path` does not exist) holds the volume in a file named
    ///   [`VOLUME_FILE_NAME`], pre-allocated to `initial_slots` slots and grown on demand; its
    ///   version log and WAL area are left sparse, for the volume and the engine to allocate
    ///   and release
    ///   ([`shale_io::Device::allocate_range`]);
    /// - an existing regular file or block device is opened as it is (a block device whole).
    ///
    /// ```
    /// use shale_space::{Volume, VolumeOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let opts = VolumeOptions::small_for_tests();
    /// let first = Volume::open_path(dir.path(), &opts, &Default::default())?;
    /// assert!(first.created);
    /// drop(first);
    /// assert!(!Volume::open_path(dir.path(), &opts, &Default::default())?.created);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Volume::open`], plus [`Error::Io`] holding a [`shale_io::Error::Path`] when the
    /// path does not exist (and may not be created) or the directory or file cannot be made,
    /// [`Error::NoSpace`] naming the size when the file system has no room for a new volume
    /// file, and [`Error::InvalidArgument`] for a file too short to be a volume.
    pub fn open_path(path: &Path, opts: &VolumeOptions, file: &FileOptions) -> Result<Opened> {
        if opts.create_if_blank {
            opts.layout.validate()?;
        }
        let layout = Layout::new(&opts.layout, shale_io::FILE_BLOCK_SIZE);
        let device = open_device_at(path, opts.create_if_blank, layout, opts.initial_slots, file)?;
        let opened = Volume::open(device, opts).map_err(|e| name_volume(e, path))?;
        with_instance(opened, path)
    }

    /// Opens the volume at `path` for a read-write handle under the store lock, as the hash
    /// and table engines open their stores: with `opts.create_if_blank`, a missing `path`
    /// becomes a directory (a dangling symlink is left to the lock, which names its target),
    /// and the lock is taken creating the volume file for a new store, so two processes
    /// creating one store meet on it; then [`Volume::open_path`]. The lock is held as long
    /// as the returned [`StoreLock`] lives.
    ///
    /// # Errors
    /// As [`StoreLock::acquire`] (`Error::InUse` for a store open elsewhere) and
    /// [`Volume::open_path`]; [`Error::Io`] naming the path when its directory cannot be made.
    pub fn open_path_locked(
        path: &Path,
        opts: &VolumeOptions,
        file: &FileOptions,
    ) -> Result<(Opened, StoreLock)> {
        if opts.create_if_blank && !path.exists() && path.symlink_metadata().is_err() {
            std::fs::create_dir_all(path)
                .map_err(|e| shale_io::Error::at_path(PathOp::CreateDir, path, e))?;
        }
        let lock = if opts.create_if_blank {
            StoreLock::acquire_creating(path)?
        } else {
            StoreLock::acquire(path)?
        };
        Ok((Volume::open_path(path, opts, file)?, lock))
    }

    /// Opens the tiered store whose fast volume is at `fast` and capacity volume at
    /// `capacity` (each a directory, a volume file or a block device, as for
    /// [`Volume::open_path`]), creating both where nothing is stored yet
    /// ([`Volume::open_tiered`]). A capacity path is created only for a new store: for an
    /// existing one, a missing capacity volume is an error, never a new blank one.
    ///
    /// ```
    /// use shale_space::{Error, Tier, Volume, VolumeOptions};
    ///
    /// let (fast, capacity) = (tempfile::tempdir()?, tempfile::tempdir()?);
    /// let opts = VolumeOptions::small_for_tests();
    /// let files = Default::default();
    /// let v = Volume::open_path_tiered(fast.path(), capacity.path(), &opts, &files)?.volume;
    /// assert_eq!(v.tiers(), &[Tier::Fast, Tier::Capacity]);
    /// drop(v);
    /// // The fast volume alone is refused, and so is the capacity volume as the fast one.
    /// assert!(matches!(Volume::open_path(fast.path(), &opts, &files), Err(Error::Tiers(_))));
    /// assert!(matches!(Volume::open_path(capacity.path(), &opts, &files), Err(Error::Tiers(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Volume::open_path`] and [`Volume::open_tiered`]; [`Error::InvalidArgument`] when
    /// both paths name the same volume file or device; [`Error::Tiers`] when the store exists
    /// and its capacity path does not.
    pub fn open_path_tiered(
        fast: &Path,
        capacity: &Path,
        opts: &VolumeOptions,
        file: &FileOptions,
    ) -> Result<Opened> {
        if opts.create_if_blank {
            opts.layout.validate()?;
        }
        // Checked before anything is made, and again once both exist.
        refuse_same_volume(fast, capacity)?;
        let layout = Layout::new(&opts.layout, shale_io::FILE_BLOCK_SIZE);
        let fast_device =
            open_device_at(fast, opts.create_if_blank, layout, opts.initial_slots, file)?;
        refuse_same_volume(fast, capacity)?;
        let lenient = VolumeOptions { create_if_blank: true, ..opts.clone() };
        let new_store = Volume::read_header(&fast_device, false, &lenient)?.header.is_none();
        if !new_store && !capacity.exists() {
            return Err(Error::Tiers(format!(
                "the store at {} has a capacity volume, and {} does not exist",
                fast.display(),
                capacity.display()
            )));
        }
        let cap_layout = crate::volume::capacity_layout(layout.slot_bytes, layout.sector_bytes);
        let create = new_store && opts.create_if_blank;
        let capacity_device =
            open_device_at(capacity, create, cap_layout, opts.initial_slots, file)?;
        let opened = Volume::open_tiered(fast_device, capacity_device, opts)
            .map_err(|e| name_tiers(e, fast, capacity))?;
        with_instance(opened, fast)
    }

    /// [`Volume::open_path_tiered`] without writing anything, as
    /// [`Volume::open_path_read_only`].
    ///
    /// # Errors
    /// As [`Volume::open_path_read_only`] and [`Volume::open_tiered_read_only`].
    pub fn open_path_tiered_read_only(
        fast: &Path,
        capacity: &Path,
        opts: &VolumeOptions,
        file: &FileOptions,
    ) -> Result<Opened> {
        refuse_same_volume(fast, capacity)?;
        let fast_device = open_device_read_only_at(fast, file)?;
        let capacity_device = open_device_read_only_at(capacity, file)?;
        let opened = Volume::open_tiered_read_only(fast_device, capacity_device, opts)
            .map_err(|e| name_tiers(e, fast, capacity))?;
        with_instance(opened, fast)
    }

    /// Opens the volume at `path` (a directory holding a volume file, a volume file or a block
    /// device) without writing anything: the device is opened O_RDONLY, nothing is created,
    /// and the volume refuses allocations and commits ([`Volume::open_read_only`]). Works on
    /// a read-only mount and on a full file system.
    ///
    /// # Errors
    /// As [`Volume::open_path`]; [`Error::Foreign`] for a blank device.
    pub fn open_path_read_only(
        path: &Path,
        opts: &VolumeOptions,
        file: &FileOptions,
    ) -> Result<Opened> {
        let device = open_device_read_only_at(path, file)?;
        let opened = Volume::open_read_only(device, opts).map_err(|e| name_volume(e, path))?;
        with_instance(opened, path)
    }
}

/// A tiered store's volume opened alone (its fast volume without `--capacity_path`, or its
/// capacity volume as a store), naming the path beside the volume ids.
fn name_volume(e: Error, path: &Path) -> Error {
    match e {
        Error::Tiers(why) => Error::Tiers(format!("the volume at {}: {why}", path.display())),
        other => other,
    }
}

/// A refusal of two volumes that do not form one store, naming the paths as the caller gave
/// them beside the volume ids the space layer knows.
fn name_tiers(e: Error, fast: &Path, capacity: &Path) -> Error {
    match e {
        Error::Tiers(why) => Error::Tiers(format!(
            "fast volume at {}, capacity volume at {}: {why}",
            fast.display(),
            capacity.display()
        )),
        other => other,
    }
}

/// Records the identity of the volume file at `path` (a store directory or the file itself)
/// in the opened volume.
fn with_instance(mut opened: Opened, path: &Path) -> Result<Opened> {
    let file = volume_file(path);
    let id = crate::instance::instance_id(&file)?;
    let canonical = std::fs::canonicalize(&file).unwrap_or(file);
    opened.volume.set_instance(id, canonical);
    Ok(opened)
}

/// Opens the device of the volume at `path`: a directory (made if missing and `create`)
/// holds a volume file, made with `layout` and `slots` slots if missing and `create`; a
/// regular file or a block device is opened as it is.
fn open_device_at(
    path: &Path,
    create: bool,
    layout: Layout,
    slots: u32,
    file: &FileOptions,
) -> Result<DeviceRef> {
    let mut file = file.clone();
    if !path.exists() {
        if !create {
            return Err(not_found(path));
        }
        std::fs::create_dir_all(path)
            .map_err(|e| shale_io::Error::at_path(PathOp::CreateDir, path, e))?;
    }
    if path.is_dir() && create {
        // The sector size of a file is 4 KiB whatever the backend, so the size is known
        // before the device is opened.
        file.create_size = Some(layout.capacity_for(slots.max(1)));
        // The version log and the WAL area get storage as they are written (the version
        // log's chunks, the WAL's pages): left as a hole, a new volume takes disk space
        // for its header and slots only.
        file.create_sparse = Some(layout.version_log_offset..layout.slot_offset);
    }
    let target = volume_file(path);
    if file.create_size.is_none() && !target.exists() {
        return Err(Error::InvalidArgument(format!(
            "{} holds no volume ({} is missing)",
            path.display(),
            target.display()
        )));
    }
    if file.create_size.is_none() {
        check_size(&target)?;
    }
    Ok(open_device(&target, &file)?)
}

/// Opens the device of the volume at `path` read-only, creating nothing.
fn open_device_read_only_at(path: &Path, file: &FileOptions) -> Result<DeviceRef> {
    if !path.exists() {
        return Err(not_found(path));
    }
    let target = volume_file(path);
    if !target.exists() {
        return Err(Error::InvalidArgument(format!(
            "{} holds no volume ({} is missing)",
            path.display(),
            target.display()
        )));
    }
    check_size(&target)?;
    let file = FileOptions { create_size: None, ..file.clone() };
    Ok(open_device_read_only(&target, &file)?)
}

/// Refuses a fast and a capacity path that name the same volume file or block device (as
/// far as the file system can tell: the same inode, or the same device number).
fn refuse_same_volume(fast: &Path, capacity: &Path) -> Result<()> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (a, b) = (volume_file(fast), volume_file(capacity));
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(&a), std::fs::metadata(&b)) else {
        return Ok(());
    };
    let same_inode = ma.dev() == mb.dev() && ma.ino() == mb.ino();
    let same_block_device = ma.file_type().is_block_device()
        && mb.file_type().is_block_device()
        && ma.rdev() == mb.rdev();
    if same_inode || same_block_device {
        return Err(Error::InvalidArgument(format!(
            "the fast path {} and the capacity path {} name the same volume ({})",
            fast.display(),
            capacity.display(),
            a.display()
        )));
    }
    Ok(())
}

/// The error for a path that does not exist, with the OS's error as its source.
fn not_found(path: &Path) -> Error {
    let source = std::io::Error::from_raw_os_error(libc::ENOENT);
    Error::Io(shale_io::Error::at_path(PathOp::Open, path, source))
}

/// Refuses a regular file too short to hold a volume header, naming its real size: the device
/// sees only whole 4 KiB blocks, so its own message would call a 32-byte file "0 bytes".
fn check_size(target: &Path) -> Result<()> {
    let meta =
        std::fs::metadata(target).map_err(|e| shale_io::Error::at_path(PathOp::Stat, target, e))?;
    if meta.is_file() && meta.len() < HEADER_AREA_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{} is {} bytes, shorter than the smallest volume ({HEADER_AREA_BYTES} bytes of \
             header alone); not a shale volume, nothing was written",
            target.display(),
            meta.len()
        )));
    }
    Ok(())
}
