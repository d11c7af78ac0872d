//! Opening a volume by path: a directory gets a volume file inside it, a regular file or a
//! block device is used as it is.

use std::path::{Path, PathBuf};

use shale_io::{FileOptions, open_device};

use crate::error::{Error, Result};
use crate::layout::Layout;
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
    ///   [`VOLUME_FILE_NAME`], pre-allocated to `initial_slots` slots and grown on demand;
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
    /// As [`Volume::open`], plus [`Error::Io`] when the directory or file cannot be made.
    pub fn open_path(path: &Path, opts: &VolumeOptions, file: &FileOptions) -> Result<Opened> {
        let mut file = file.clone();
        if !path.exists() {
            if !opts.create_if_blank {
                return Err(Error::InvalidArgument(format!("{} does not exist", path.display())));
            }
            std::fs::create_dir_all(path)
                .map_err(|e| Error::Io(shale_io::Error::from_os(shale_io::OpKind::Write, 0, e)))?;
        }
        if path.is_dir() && opts.create_if_blank {
            opts.layout.validate()?;
            // The sector size of a file is 4 KiB whatever the backend, so the size is known
            // before the device is opened.
            let layout = Layout::new(&opts.layout, shale_io::FILE_BLOCK_SIZE);
            file.create_size = Some(layout.capacity_for(opts.initial_slots.max(1)));
        }
        let target = volume_file(path);
        if file.create_size.is_none() && !target.exists() {
            return Err(Error::InvalidArgument(format!(
                "{} holds no volume ({} is missing)",
                path.display(),
                target.display()
            )));
        }
        let device = open_device(&target, &file)?;
        Volume::open(device, opts)
    }
}
