//! How to open a table store.

use std::path::PathBuf;
use std::time::Duration;

use shale_io::QueuePairOptions;
use shale_space::{LayoutOptions, VolumeOptions};

use crate::block::BLOCK_BYTES;
use crate::error::{Error, Result};
use crate::pmem::FilePmemOptions;

/// Name of the persistent memory file in a store's directory, unless
/// [`TableOptions::pmem_path`] names another.
pub const PMEM_FILE_NAME: &str = "undo.pmem";

/// Where a table store keeps its undo log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UndoLogPlace {
    /// On real persistent memory where it is found: the store's own file if it has one
    /// (made with [`UndoLogPlace::Pmem`] or on DAX earlier), else a new file at
    /// [`TableOptions::pmem_path`] (or `undo.pmem` in the store's directory) when that is
    /// on a DAX mount; everywhere else on the volume. A store opened with
    /// [`crate::TableStore::open_device`] uses the region it is given.
    #[default]
    Auto,
    /// On the store's volume: every before-image a FUA write of the log's ring there
    /// (the spill area) before the change is made in place. A file the store had is read
    /// (its records rolled back), then removed and no longer named.
    Volume,
    /// In a persistent memory file, DAX or not: emulated persistent memory (a file in
    /// `/dev/shm`, or anywhere) where there is no DAX, as LATTE's experiments emulate it.
    /// A reboot may take such a file away; the store then refuses to open
    /// ([`crate::Error::UndoLogMissing`]).
    Pmem,
}

impl UndoLogPlace {
    /// Its name in flags and messages.
    pub fn name(self) -> &'static str {
        match self {
            UndoLogPlace::Auto => "auto",
            UndoLogPlace::Volume => "volume",
            UndoLogPlace::Pmem => "pmem",
        }
    }
}

/// How to open a table store.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Make a new store where the path or device holds none.
    pub create_if_missing: bool,
    /// Bytes of a segment (one slot of a new volume): a multiple of 4 KiB from 64 KiB to
    /// 1 GiB. A table starts with one and gets another when its last one is full.
    pub segment_bytes: u64,
    /// Bytes of each version log mirror of a new volume.
    pub version_log_bytes: u64,
    /// Where the undo log goes: [`UndoLogPlace::Auto`] by default (the volume unless DAX
    /// persistent memory is found).
    pub undo_log: UndoLogPlace,
    /// Bytes of the persistent memory file [`crate::TableStore::open`] makes for the undo
    /// log (at least 64 KiB past its two header lines).
    pub undo_log_bytes: u64,
    /// Bytes into the undo log's ring past which a new record goes back to the ring's start,
    /// once the oldest live record is past them too (else it goes on to the ring's end).
    /// Short transactions then cycle through the ring's first bytes, so a large region costs
    /// only what bursts use: a file of emulated persistent memory (sparse) allocates only
    /// what is touched, and the lines in use stay few. A long transaction gets at least this
    /// much of persistent memory before it spills to the volume, and the whole ring when it
    /// begins before the mark. 1 MiB by default: some 1,800 before-images of 505-byte rows,
    /// far more than the transactions a group commit holds at once.
    pub undo_wrap_bytes: u64,
    /// Bytes of the undo log's spill area on the volume (rounded up to whole segments, and
    /// to at least 512 KiB: its page log gives every record and every expiry whole 4 KiB
    /// pages), made the first time a before-image finds no room in persistent memory; a
    /// record that finds no room there either is [`crate::Error::LogFull`]. 0: the log never
    /// spills. With the log on the volume this area is its log (of `undo_log_bytes` where
    /// this is 0).
    pub undo_spill_bytes: u64,
    /// Where the undo log's persistent memory file is, or would be: a file on a DAX mount,
    /// in `/dev/shm`, or anywhere. `None`: `undo.pmem` in the store's directory for a new
    /// file, and the file the store names in its catalog for an existing one. Given for a
    /// store bound to a file, it says where that file is now (moved, or copied with the
    /// store). With [`UndoLogPlace::Auto`] a new file is made here only on DAX.
    pub pmem_path: Option<PathBuf>,
    /// Open a store whose undo log file is missing (a reboot emptied `/dev/shm`) or belongs
    /// to the store this one is a copy of, rolling nothing back from it: right only when no
    /// transaction can have been in flight when the log was lost or the copy made (the
    /// store was closed cleanly); otherwise a transaction's partial changes stay. Without
    /// it such an open is refused ([`crate::Error::UndoLogMissing`],
    /// [`crate::Error::UndoLogOfOriginal`]). The original's file is never touched.
    pub accept_lost_undo_log: bool,
    /// How the file mapping is made persistent, and its emulated extra latency.
    pub pmem: FilePmemOptions,
    /// Blocks the block cache holds (4 KiB each).
    pub cache_blocks: usize,
    /// How long a transaction waits for a lock before [`crate::Error::LockTimeout`].
    pub lock_timeout: Duration,
    /// Expired undo records are reclaimed once this many lead the log...
    pub reclaim_batch: usize,
    /// ...or once the log's ring is fuller than this percentage.
    pub reclaim_percent: u64,
    /// How often a background thread gives the space of the rows that died since its last
    /// look (erased, moved by an update, inserts rolled back) to new rows
    /// (`TableStore::reclaim_space` walks every table at once); `None`: no thread. Rows dead
    /// at the open are found by the open itself.
    pub space_reclaim_interval: Option<Duration>,
    /// Entries each table's primary index keeps in memory; past them, new entries go to
    /// index pages on the volume and lookups of their keys read a page. `None`: all in
    /// memory.
    pub index_memory_entries: Option<usize>,
    /// Bits of each key's hash the index keeps: 64; fewer only in tests, to make collisions
    /// common.
    pub hash_bits: u32,
    /// LATTE's parallel queues: every block read and write of the store (the writer's and
    /// those of reads outside the mutex) goes through several queues, each request to the
    /// one whose requests in flight weigh least (reads 1, sequential writes 2, random
    /// writes 3 per byte), each queue with a completion poller, in the affinity mode given
    /// (`shale_io::QueuePairs`). `None`, the default: each user of the volume has a queue of
    /// its own and waits on it itself.
    pub queue_pairs: Option<QueuePairOptions>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            create_if_missing: true,
            segment_bytes: 1 << 20,
            version_log_bytes: 8 << 20,
            undo_log_bytes: 64 << 20,
            undo_wrap_bytes: 1 << 20,
            undo_spill_bytes: 16 << 20,
            pmem_path: None,
            undo_log: UndoLogPlace::Auto,
            accept_lost_undo_log: false,
            pmem: FilePmemOptions::default(),
            cache_blocks: 4096,
            lock_timeout: Duration::from_secs(1),
            reclaim_batch: 64,
            reclaim_percent: 60,
            space_reclaim_interval: Some(Duration::from_secs(1)),
            index_memory_entries: None,
            hash_bits: 64,
            queue_pairs: None,
        }
    }
}

impl TableOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad option and what is accepted.
    pub fn validate(&self) -> Result<()> {
        if !(64 << 10..=1 << 30).contains(&self.segment_bytes)
            || self.segment_bytes % BLOCK_BYTES as u64 != 0
        {
            return Err(Error::InvalidArgument(format!(
                "segment_bytes {} must be a multiple of {BLOCK_BYTES} in 65536..=1073741824",
                self.segment_bytes
            )));
        }
        let pmem_min = crate::undo_log::RING_OFFSET as u64 + (64 << 10);
        if self.undo_log_bytes < pmem_min
            || self.undo_log_bytes % crate::pmem::LINE_BYTES as u64 != 0
        {
            return Err(Error::InvalidArgument(format!(
                "undo_log_bytes {} must be a multiple of 64 of at least {pmem_min}",
                self.undo_log_bytes
            )));
        }
        if self.cache_blocks < 16 {
            return Err(Error::InvalidArgument(format!(
                "cache_blocks {} must be at least 16",
                self.cache_blocks
            )));
        }
        if !(1..=64).contains(&self.hash_bits) {
            return Err(Error::InvalidArgument(format!(
                "hash_bits {} must be in 1..=64",
                self.hash_bits
            )));
        }
        if self.space_reclaim_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidArgument(
                "space_reclaim_interval must be longer than zero (None: no thread)".into(),
            ));
        }
        if let Some(p) = &self.queue_pairs {
            p.validate().map_err(|e| Error::InvalidArgument(format!("queue_pairs: {e}")))?;
        }
        if !(1..=100).contains(&self.reclaim_percent) || self.reclaim_batch == 0 {
            return Err(Error::InvalidArgument(
                "reclaim_batch must be at least 1 and reclaim_percent in 1..=100".into(),
            ));
        }
        Ok(())
    }

    /// Bytes of the undo log's ring on the volume when the log is there.
    pub(crate) fn volume_ring_bytes(&self) -> u64 {
        if self.undo_spill_bytes == 0 { self.undo_log_bytes } else { self.undo_spill_bytes }
    }

    pub(crate) fn volume_options(&self) -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions {
                slot_bytes: self.segment_bytes,
                version_log_bytes: self.version_log_bytes,
                wal_bytes: 0,
            },
            create_if_blank: self.create_if_missing,
            grow_slots_min: 4,
            initial_slots: 4,
            engine: Some(shale_space::EngineKind::Table),
        }
    }
}
