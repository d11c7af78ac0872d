//! Which copy of a volume a store is: the identity of the file or device holding it.
//!
//! Why: state a store keeps outside its volume (the lsm engine's WAL tail in `/dev/shm`, the
//! table engine's persistent-memory undo log) must belong to one store instance (P7). The
//! volume id cannot tell them apart: `cp -a` of a store directory copies it, so a copy would
//! take the original's tail, replay it and delete it. What a copy does not keep is the file
//! itself: a copy is a new inode with a new birth time, while a rename keeps both. So the
//! instance id is made of the volume file's device, inode and birth time (a block device's
//! own device number), and such state is named and stamped with it.
//!
//! ```text
//! instance id (16 bytes)
//! 0   8   inode of the volume file (for a block device: its device number, rdev)
//! 8   4   low 32 bits of the file system's device number (0 for a block device)
//! 12  4   crc32c of (device u64, inode u64, birth time in ns u128, all LE): the birth time
//!         (statx) tells a file from a later one that reused its inode number
//! ```
//! Where the file system reports no birth time, the inode and device alone name the copy.
//! Limits: a byte-for-byte copy of a block device onto the same device number (a loop device
//! detached and attached to a copy of its file) is the same instance.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::Result;

/// The instance id of the volume file or block device at `volume` (the file itself, not a
/// store directory).
///
/// # Errors
/// [`crate::Error::Io`] naming the path when it cannot be examined.
pub fn instance_id(volume: &Path) -> Result<[u8; 16]> {
    let meta = std::fs::metadata(volume)
        .map_err(|e| shale_io::Error::at_path(shale_io::PathOp::Stat, volume, e))?;
    let (dev, ino) = if meta.file_type().is_block_device() {
        (0, meta.rdev())
    } else {
        (meta.dev(), meta.ino())
    };
    let birth_ns = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(compose(dev, ino, birth_ns))
}

fn compose(dev: u64, ino: u64, birth_ns: u128) -> [u8; 16] {
    let mut all = Vec::with_capacity(32);
    all.extend_from_slice(&dev.to_le_bytes());
    all.extend_from_slice(&ino.to_le_bytes());
    all.extend_from_slice(&birth_ns.to_le_bytes());
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&ino.to_le_bytes());
    id[8..12].copy_from_slice(&(dev as u32).to_le_bytes());
    id[12..].copy_from_slice(&crc32c::crc32c(&all).to_le_bytes());
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_another_instance_and_a_rename_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"volume").unwrap();
        let id = instance_id(&a).unwrap();
        let b = dir.path().join("b");
        std::fs::copy(&a, &b).unwrap();
        assert_ne!(instance_id(&b).unwrap(), id, "a copy took the original's identity");
        let moved = dir.path().join("moved");
        std::fs::rename(&a, &moved).unwrap();
        assert_eq!(instance_id(&moved).unwrap(), id, "a rename changed the identity");
    }

    #[test]
    fn the_birth_time_tells_apart_files_that_share_an_inode_number() {
        assert_ne!(compose(1, 2, 3), compose(1, 2, 4));
        assert_ne!(compose(1, 2, 3), compose(2, 2, 3));
    }
}
