//! Options of a store, with RocksDB's names and defaults where RocksDB has the same knob.

use shale_space::{LayoutOptions, VolumeOptions};

use crate::error::{Error, Result};
use crate::sst::SstOptions;
pub use crate::wal::{MemoryTail, WalTail};

/// Largest key accepted, in bytes.
pub const KEY_BYTES_MAX: usize = 64 << 10;
/// Most background threads a store runs (`max_background_jobs`).
pub const BACKGROUND_JOBS_MAX: usize = 64;

/// How a store is opened and tuned.
#[derive(Clone, Debug)]
pub struct Options {
    /// Bytes a memtable holds before it is sealed and flushed (RocksDB `write_buffer_size`);
    /// also the target size of L0 SSTs (ADOC's batch size).
    pub write_buffer_bytes: usize,
    /// Memtables, active and sealed, before writes stall (`max_write_buffer_number`).
    pub max_write_buffer_number: usize,
    /// L0 SSTs that start a compaction into L1.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 SSTs from which each write is delayed.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 SSTs at which writes wait for compaction.
    pub level0_stop_writes_trigger: usize,
    /// Target size of L1 with static level sizing, of the base level (the level L0 compacts
    /// into) with dynamic sizing (`max_bytes_for_level_base`).
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this many times the one above.
    pub max_bytes_for_level_multiplier: u64,
    /// Derive level targets from the largest level upward and compact L0 straight into the
    /// first level that needs to exist, instead of sizing from L1 down (RocksDB's
    /// `level_compaction_dynamic_level_bytes`; on by default, as in RocksDB since 8.4). About
    /// 90% of the data then sits in the last level. See `level_targets`.
    pub dynamic_level_bytes: bool,
    /// Size at which compaction output is cut into a new SST (`target_file_size_base`),
    /// rounded down to whole slots: an output is cut before the entry that would make it spill
    /// into one more slot. Changeable while running (`Db::set_target_file_size`).
    pub target_file_size_base: u64,
    /// LDS's odd-chunk rule: the last, part-filled output of a compaction from Ln (n >= 1)
    /// into Ln+1 stays in Ln when it overlaps nothing there, and is merged into a later
    /// compaction, so part-filled SSTs do not pile up in the levels (at most one per level).
    pub odd_chunk_rule: bool,
    /// Background threads: one flushes memtables, the others (`max_background_jobs - 1`, at
    /// least one) run compactions, several at once on disjoint key ranges. At least 2 (RocksDB's
    /// default is also 2). Changeable while running (`Db::set_background_jobs`).
    pub max_background_jobs: usize,
    /// Compaction debt from which each write is delayed (0 = off).
    pub soft_pending_compaction_bytes_limit: u64,
    /// Compaction debt at which writes wait for compaction (0 = off).
    pub hard_pending_compaction_bytes_limit: u64,
    /// Block size, restart interval, bloom bits and compression of SSTs.
    pub sst: SstOptions,
    /// Byte budget of the block cache (data, index and filter blocks).
    pub block_cache_bytes: usize,
    /// Put each flush and compaction output's blocks into the block cache as it is written
    /// (RocksDB's `prepopulate_block_cache`, there for flushes only). SSTs are written with
    /// O_DIRECT, so no page cache holds them, and a compaction retires its inputs' cached
    /// blocks: without this, reads after a compaction go to the device until the cache warms.
    pub prepopulate_block_cache: bool,
    /// The volume: layout of a new one, growth.
    pub volume: VolumeOptions,
    /// Where writes without sync wait for their WAL pages (see [`WalTail`]): by default a
    /// file in `/dev/shm`, so such a write costs a memory copy yet survives a crash of the
    /// process (P2).
    pub wal_tail: WalTail,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            write_buffer_bytes: 64 << 20,
            max_write_buffer_number: 2,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10,
            dynamic_level_bytes: true,
            target_file_size_base: 64 << 20,
            odd_chunk_rule: true,
            max_background_jobs: 2,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            sst: SstOptions::default(),
            block_cache_bytes: 32 << 20,
            prepopulate_block_cache: true,
            volume: VolumeOptions::default(),
            wal_tail: WalTail::default(),
        }
    }
}

impl Options {
    /// Small sizes for tests and examples: 256 KiB memtables, 64 KiB slots, a few MiB in all.
    /// No WAL tail ([`WalTail::Off`]): a test that reopens a copy of a device at some instant
    /// cannot copy a tail as of that instant; tests of the tail choose one explicitly.
    pub fn small_for_tests() -> Options {
        Options {
            write_buffer_bytes: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            target_file_size_base: 256 << 10,
            block_cache_bytes: 1 << 20,
            volume: VolumeOptions {
                layout: LayoutOptions {
                    slot_bytes: 64 << 10,
                    version_log_bytes: 256 << 10,
                    wal_bytes: 4 << 20,
                },
                grow_slots_min: 64,
                initial_slots: 64,
                ..VolumeOptions::default()
            },
            wal_tail: WalTail::Off,
            ..Options::default()
        }
    }

    /// Number of WAL log groups: one per memtable that may exist at once, and one spare so a
    /// new memtable can start while the oldest sealed one finishes its flush.
    pub fn wal_groups(&self) -> u32 {
        self.max_write_buffer_number as u32 + 1
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first bad option.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if self.write_buffer_bytes < 64 << 10 {
            return bad(format!("write_buffer_bytes {} is below 64 KiB", self.write_buffer_bytes));
        }
        if self.max_write_buffer_number < 2 || self.max_write_buffer_number > 64 {
            return bad(format!(
                "max_write_buffer_number {} outside 2..=64",
                self.max_write_buffer_number
            ));
        }
        let (t, s, p) = (
            self.level0_file_num_compaction_trigger,
            self.level0_slowdown_writes_trigger,
            self.level0_stop_writes_trigger,
        );
        if t == 0 || t > s || s > p {
            return bad(format!(
                "L0 triggers must satisfy 0 < compaction ({t}) <= slowdown ({s}) <= stop ({p})"
            ));
        }
        if self.max_bytes_for_level_multiplier < 2 {
            return bad("max_bytes_for_level_multiplier must be at least 2".into());
        }
        if self.target_file_size_base < self.volume.layout.slot_bytes {
            return bad("target_file_size_base is smaller than one slot".into());
        }
        if !(2..=BACKGROUND_JOBS_MAX).contains(&self.max_background_jobs) {
            return bad(format!(
                "max_background_jobs {} outside 2..={BACKGROUND_JOBS_MAX} (one flush thread and at least one compaction thread)",
                self.max_background_jobs
            ));
        }
        self.volume.layout.validate().map_err(Error::from)
    }
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Acknowledge only once the write is durable (survives power loss, P1). Without it the
    /// write survives a crash of the process (P2): it is in the WAL tail ([`WalTail`]), or,
    /// with the tail off, its WAL page write has completed.
    pub sync: bool,
}

/// Options of one read.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<u64>,
    /// Iterators only: keys at or after this.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators only: keys before this.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators only: keys starting with this (overrides the bounds).
    pub prefix: Option<Vec<u8>>,
}
