//! The hash store's options, store modes and statistics.

use shale_space::log_page::PAGE_BYTES;
use shale_space::{LayoutOptions, VolumeOptions};

use crate::error::{Error, Result};
use crate::index::SEGMENT_PAGES_MAX;

/// Deepest submission queue.
pub const QUEUE_DEPTH_MAX: usize = 1 << 16;

/// How a store treats a key that is (or is not) present (the SNIA KV API's store options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreMode {
    /// Store whether or not the key exists.
    #[default]
    Overwrite,
    /// Store only if the key is absent; else [`Error::KeyExists`].
    NoOverwrite,
    /// Store only if the key is present; else [`Error::KeyNotFound`].
    UpdateOnly,
}

/// How to open a hash store.
#[derive(Clone, Debug)]
pub struct HashOptions {
    /// Make a new store where the path or device holds none.
    pub create_if_missing: bool,
    /// Size of a slot of a new volume, which is one segment of the record log: at least
    /// [`SEGMENT_BYTES_MIN`] so the largest record fits, at most 1 GiB.
    pub segment_bytes: u64,
    /// Size of each version log mirror of a new volume.
    pub version_log_bytes: u64,
    /// Bits of the key digest the index keeps: 64. Fewer only in tests, to make digest
    /// collisions common enough to test.
    pub digest_bits: u32,
    /// Read queues kept for the reads recovery and the worker make synchronously.
    pub read_queues: usize,
    /// Requests submitted and not yet completed, at most: a submission past it answers
    /// [`crate::Error::Busy`] (the synchronous calls wait for room instead).
    pub queue_depth: usize,
    /// Device requests the worker keeps in flight: its reads, and one write of a batch.
    pub io_depth: u32,
    /// Most log bytes one batch of stores and deletes writes (one durable write).
    pub batch_bytes_max: usize,
}

/// Smallest segment: the largest record (a 255-byte key and a 2 MiB value) in log pages,
/// with room to spare.
pub const SEGMENT_BYTES_MIN: u64 = 4 << 20;

impl Default for HashOptions {
    fn default() -> HashOptions {
        HashOptions {
            create_if_missing: true,
            segment_bytes: 8 << 20,
            version_log_bytes: 8 << 20,
            digest_bits: 64,
            read_queues: 2,
            queue_depth: 64,
            io_depth: 64,
            batch_bytes_max: 1 << 20,
        }
    }
}

impl HashOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad option and what is accepted.
    pub fn validate(&self) -> Result<()> {
        let max = u64::from(SEGMENT_PAGES_MAX) * PAGE_BYTES as u64;
        if !(SEGMENT_BYTES_MIN..=max).contains(&self.segment_bytes)
            || self.segment_bytes % PAGE_BYTES as u64 != 0
        {
            return Err(Error::InvalidArgument(format!(
                "segment_bytes {} must be a multiple of {PAGE_BYTES} in {SEGMENT_BYTES_MIN}..={max}",
                self.segment_bytes
            )));
        }
        if !(1..=64).contains(&self.digest_bits) {
            return Err(Error::InvalidArgument(format!(
                "digest_bits {} must be in 1..=64",
                self.digest_bits
            )));
        }
        if self.read_queues == 0 {
            return Err(Error::InvalidArgument("read_queues must be at least 1".into()));
        }
        if !(1..=QUEUE_DEPTH_MAX).contains(&self.queue_depth) {
            return Err(Error::InvalidArgument(format!(
                "queue_depth {} must be in 1..={QUEUE_DEPTH_MAX}",
                self.queue_depth
            )));
        }
        if !(2..=shale_io::QUEUE_DEPTH_MAX).contains(&self.io_depth) {
            return Err(Error::InvalidArgument(format!(
                "io_depth {} must be in 2..={}",
                self.io_depth,
                shale_io::QUEUE_DEPTH_MAX
            )));
        }
        if !(PAGE_BYTES..=64 << 20).contains(&self.batch_bytes_max) {
            return Err(Error::InvalidArgument(format!(
                "batch_bytes_max {} must be in {PAGE_BYTES}..={}",
                self.batch_bytes_max,
                64 << 20
            )));
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
        }
    }
}

/// Counters of a store since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashStats {
    /// Live keys.
    pub keys: u64,
    /// Stores acknowledged.
    pub stores: u64,
    /// Deletes that removed a key.
    pub deletes: u64,
    /// Key and value bytes of the acknowledged stores.
    pub user_bytes: u64,
    /// Bytes the record log wrote to the device (whole pages).
    pub log_bytes_written: u64,
    /// Segments in the log.
    pub segments: u64,
    /// Bytes the index's tables hold in memory.
    pub index_memory_bytes: u64,
    /// Records replayed by the open.
    pub recovered_records: u64,
    /// Batches the worker wrote (each one durable write of the pages of its records).
    pub batches: u64,
    /// Submissions answered Busy.
    pub busy: u64,
    /// Microseconds the open spent recovering.
    pub recovery_micros: u64,
}
