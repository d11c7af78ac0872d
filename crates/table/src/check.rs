//! A read-only check of a table store, and what it finds of its tables (`shale check`,
//! `shale inspect`).
//!
//! The check's stages:
//! 1. Open the volume read-only under a shared store lock (nothing is written; a store
//!    open for writing is refused as in use) and decode the catalog: every table's name,
//!    schema and segments, the spill area, the undo log's file.
//! 2. Walk the undo logs (the spill area on the volume, in the page log format of
//!    `volume_undo.rs` or the ring format of a store written before it, as the catalog
//!    says, and the persistent memory file the catalog names, each copied into memory):
//!    every record checked; a
//!    missing file, or one of the store this one is a copy of, is refused as the open
//!    refuses it. Records of transactions in flight at a crash mean the blocks hold their
//!    partial changes: the check says so and stops (an open rolls them back; check after).
//! 3. Recover the tables in memory as an open does (`Storage::recover`, with nothing to roll
//!    back): every block of every segment read, its checksum, identity and occupancy
//!    checked, every row parsed under its table's schema, one live row per key, every block
//!    past a table's end blank; the primary indexes built from the rows.
//! 4. Find every live row through the primary index by its key, at the position the rows
//!    put it (`Storage::table_reports`).

use std::path::Path;

use shale_io::{FileOptions, QueueExt};
use shale_space::{StoreLock, Volume, VolumeOptions};

use crate::error::{Error, Result};
use crate::options::{PMEM_FILE_NAME, TableOptions};
use crate::pmem::SimPmem;
use crate::schema::Schema;
use crate::storage::{Storage, UndoSetup};
use crate::undo::Before;
use crate::undo_file::{FileId, Found, look};
use crate::undo_log::{ReclaimPolicy, Ring, UndoLog};
use crate::volume_undo::VolumeUndoLog;

/// One table, as the check found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableReport {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its schema.
    pub schema: Schema,
    /// Segments it owns.
    pub segments: usize,
    /// Blocks of its segments.
    pub blocks: u64,
    /// Blocks its rows reach into.
    pub blocks_used: u64,
    /// Live rows.
    pub rows: u64,
    /// Dead row records (erased, moved, rolled back) whose slots new rows may take.
    pub dead_rows: u64,
    /// Bytes of the dead row records.
    pub dead_bytes: u64,
}

/// What a check of a table store found: consistent when [`check_store`] returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreReport {
    /// The tables, by id.
    pub tables: Vec<TableReport>,
    /// Bytes of a segment.
    pub segment_bytes: u64,
    /// The undo log's persistent memory file, if it is in one.
    pub undo_file: Option<std::path::PathBuf>,
    /// Bytes of the spill area (the undo log's ring on the volume), if there is one.
    pub spill_bytes: Option<u64>,
    /// Undo records not expired, both logs (commit marks of transactions whose records
    /// were not expired yet; none of a transaction in flight, or the check stops).
    pub undo_records: u64,
}

/// Checks the table store in the directory `dir` without writing anything.
///
/// # Errors
/// [`Error::Corruption`] naming what is damaged and where; [`Error::NotTableStore`];
/// [`Error::UndoLogMissing`] and [`Error::UndoLogOfOriginal`] as the open;
/// [`Error::InvalidArgument`] when transactions were in flight at the last crash (the
/// store needs an open to roll them back first); the space layer's error.
pub fn check_store(dir: impl AsRef<Path>) -> Result<StoreReport> {
    let dir = dir.as_ref();
    let _lock = StoreLock::acquire_shared(dir)?;
    let vopts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    let opened = Volume::open_path_read_only(dir, &vopts, &FileOptions::default())?;
    let cat = crate::catalog::decode(&opened.versions)?;
    let volume_id = opened.volume.header().volume_id;
    let policy = ReclaimPolicy { batch: 64, percent: 60, wrap_after: u64::MAX };

    // Stage 2: the logs, walked in memory.
    let mut records = 0u64;
    let mut in_flight = 0usize;
    let mut walk = |ring: Option<Ring>, image: Vec<u8>, binding: [u8; 16]| -> Result<()> {
        let region = SimPmem::from_image(image, None);
        let w = match ring {
            Some(ring) => {
                UndoLog::open_ring_bound(ring, region.boxed(), volume_id, binding, policy)?.1
            }
            None => VolumeUndoLog::open(region.boxed(), volume_id)?.1,
        };
        records += w.active.len() as u64;
        in_flight += w
            .active
            .iter()
            .filter(|(_, r)| r.before != Before::Commit && !w.committed.contains(&r.txn))
            .count();
        Ok(())
    };
    let mut spill_bytes = None;
    if let Some(e) = cat.spill {
        let range = opened.volume.extent_range(e);
        let mut q = opened.volume.queues().checkout(crate::batch_io::BLOCK_QUEUES)?;
        let image = q.read_at(range.start, (range.end - range.start) as usize)?.to_vec();
        spill_bytes = Some(range.end - range.start);
        if cat.spill_paged {
            walk(None, image, [0; 16])?;
        } else if image[..crate::undo_log::RING_OFFSET].iter().any(|&b| b != 0) {
            walk(Some(Ring::Spill), image, [0; 16])?;
        }
    }
    let instance = FileId::of_path(&shale_space::volume_file(dir))?;
    let file = match &cat.undo_file {
        Some(b) => {
            let path = b.resolve(dir);
            match look(&path)? {
                Found::Missing | Found::Blank => return Err(Error::UndoLogMissing { path }),
                Found::Owned { binding, file, .. }
                    if binding != [0; 16] && binding != instance.encode() && file == b.file =>
                {
                    return Err(Error::UndoLogOfOriginal { path });
                }
                _ => Some(path),
            }
        }
        None => match look(&dir.join(PMEM_FILE_NAME))? {
            Found::Owned { volume_id: v, binding, .. }
                if v == volume_id && (binding == [0; 16] || binding == instance.encode()) =>
            {
                Some(dir.join(PMEM_FILE_NAME))
            }
            _ => None,
        },
    };
    if let Some(path) = &file {
        let image = std::fs::read(path).map_err(|e| {
            Error::Space(shale_io::Error::at_path(shale_io::PathOp::Open, path, e).into())
        })?;
        let binding = crate::undo_log::owner_of(&image).map_or([0; 16], |(_, b)| b);
        walk(Some(Ring::Pmem), image, binding)?;
    }
    if in_flight > 0 {
        return Err(Error::InvalidArgument(format!(
            "{in_flight} changes of transactions in flight at the last crash are still to be \
             rolled back: open the store once (its open rolls them back), then check it"
        )));
    }

    // Stages 3 and 4: the tables, recovered in memory, and their indexes.
    let opts = TableOptions { space_reclaim_interval: None, ..TableOptions::default() };
    let setup = UndoSetup {
        pmem: Box::new(SimPmem::new(crate::undo_log::RING_OFFSET + (64 << 10))),
        binding: [0; 16],
        on_volume: true,
        retire: false,
        record: None,
        read_only: true,
    };
    let segment_bytes = opened.volume.layout().slot_bytes;
    let mut storage = Storage::recover(opened.volume, &opened.versions, setup, &opts)?;
    let tables = storage.table_reports()?;
    Ok(StoreReport { tables, segment_bytes, undo_file: file, spill_bytes, undo_records: records })
}
