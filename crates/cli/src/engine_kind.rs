//! Which engine's store a path holds, for the commands that serve every engine (`check`,
//! `inspect`).
//!
//! For now told by trying: the engines' payloads in the volume's version log begin with
//! their magic (the table engine's catalog with `SHTABL01`, the hash engine's state with
//! `SHHASH01`; the lsm engine's version edits with neither). A volume with no payload yet
//! is taken for an lsm store (an lsm store's first open writes none either). Once the
//! volume header names the engine, `engine_of`'s body reads that field instead.

use std::path::Path;

use shale_io::FileOptions;
use shale_space::{Volume, VolumeOptions};

/// An engine of shale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// The lsm key-value store.
    Lsm,
    /// The hash engine.
    Hash,
    /// The table engine.
    Table,
}

const TABLE_MAGIC: &[u8] = b"SHTABL01";
const HASH_MAGIC: &[u8] = b"SHHASH01";

/// The engine of the store at `path` (a directory, a volume file or a device), read without
/// writing anything.
///
/// # Errors
/// What opening the volume read-only reports (no volume, a foreign file, damage).
pub fn engine_of(path: &Path) -> Result<EngineKind, shale_space::Error> {
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    let opened = Volume::open_path_read_only(path, &opts, &FileOptions::default())?;
    Ok(engine_of_versions(&opened.versions))
}

/// The engine whose payloads the version records `v` hold.
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
