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
    /// to at least 64 KiB past its two header lines), made the first time a before-image
    /// finds no room in persistent memory; a record that finds no room there either is
    /// [`crate::Error::LogFull`]. 0: the log never spills.
    pub undo_spill_bytes: u64,
    /// Where the undo log's persistent memory is: a file on a DAX mount, in `/dev/shm`, or
    /// anywhere. `None`: `undo.pmem` in the store's directory.
    pub pmem_path: Option<PathBuf>,
    /// The undo log on the fast volume instead of persistent memory (for a machine with
    /// none): every before-image goes to the log's ring on the volume (the spill area, of
    /// `undo_spill_bytes`, which must not be 0), durable there by a FUA write before the
    /// change is made in place, so a change costs a device write more. No persistent memory
    /// file is made; one left by an earlier open with persistent memory is still recovered.
    pub undo_log_on_volume: bool,
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
            undo_log_on_volume: false,
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
        if self.undo_log_on_volume && self.undo_spill_bytes == 0 {
            return Err(Error::InvalidArgument(
                "undo_log_on_volume needs an undo log ring on the volume: undo_spill_bytes \
                 must not be 0"
                    .into(),
            ));
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
