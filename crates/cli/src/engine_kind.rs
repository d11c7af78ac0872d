//! Which engine's store a path holds, for the commands that serve every engine (`check`,
//! `inspect`, `checkpoint`).
//!
//! A volume of format 3 or later names its engine in its format header
//! (`shale_space::EngineKind`), read without opening the volume (a tiered store's fast
//! volume included). An older volume is told by its version log: the engines' payloads begin
//! with their magic (the table engine's catalog with `SHTABL01`, the hash engine's state with
//! `SHHASH01`; the lsm engine's version edits with neither), and a volume with no payload yet
//! is an lsm store (the only engine those formats knew of).

use std::path::Path;

use shale_io::FileOptions;
pub use shale_space::EngineKind;
use shale_space::{Volume, VolumeOptions};

const TABLE_MAGIC: &[u8] = b"SHTABL01";
const HASH_MAGIC: &[u8] = b"SHHASH01";

/// The engine of the store at `path` (a directory, a volume file or a device), read without
/// writing anything.
///
/// # Errors
/// What reading the volume reports (no volume, a foreign file, damage), naming the path.
pub fn engine_of(path: &Path) -> Result<EngineKind, shale_space::Error> {
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    match Volume::open_path_read_only(path, &opts, &FileOptions::default()) {
        Ok(opened) => {
            Ok(opened.volume.engine().unwrap_or_else(|| engine_of_versions(&opened.versions)))
        }
        // A tiered store's fast volume opened alone: its header still names its engine.
        Err(shale_space::Error::Tiers(why)) => {
            let file = shale_space::volume_file(path);
            let device = shale_io::open_device_read_only(&file, &FileOptions::default())?;
            match Volume::peek_header(&device)?.and_then(|h| h.engine) {
                Some(kind) => Ok(kind),
                None => Err(shale_space::Error::Tiers(why)),
            }
        }
        Err(e) => Err(e),
    }
}

/// The engine whose payloads the version records `v` hold (a volume older than format 3).
pub fn engine_of_versions(v: &shale_space::Versions) -> EngineKind {
    let payloads = std::iter::once(&v.base.engine).chain(v.deltas.iter().map(|d| &d.engine));
    for p in payloads {
        if p.starts_with(TABLE_MAGIC) {
            return EngineKind::Table;
        }
        if p.starts_with(HASH_MAGIC) {
            return EngineKind::Hash;
        }
    }
    EngineKind::Lsm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engines_store_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (lsm, hash, table) = (dir.path().join("l"), dir.path().join("h"), dir.path().join("t"));
        shale_lsm::Db::open(&lsm, shale_lsm::Options::small_for_tests()).unwrap().close().unwrap();
        let h = shale_hash::HashStore::open(&hash, shale_hash::HashOptions::default()).unwrap();
        h.store(b"key1", b"v", shale_hash::StoreMode::Overwrite).unwrap();
        h.close();
        drop(shale_table::TableStore::open(&table, shale_table::TableOptions::default()).unwrap());
        assert_eq!(engine_of(&lsm).unwrap(), EngineKind::Lsm);
        assert_eq!(engine_of(&hash).unwrap(), EngineKind::Hash);
        assert_eq!(engine_of(&table).unwrap(), EngineKind::Table);
        assert!(engine_of(&dir.path().join("none")).is_err());
    }
}
