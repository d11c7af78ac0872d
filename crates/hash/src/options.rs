//! The hash store's options, store modes and statistics.

use shale_space::log_page::PAGE_BYTES;
use shale_space::{LayoutOptions, VolumeOptions};

use crate::error::{Error, Result};
use crate::index::SEGMENT_PAGES_MAX;
use crate::record::VALUE_BYTES_MAX;

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

/// Where the index keeps its digest entries.
///
/// The mode is fixed when the store is made: its version log records a bounded store's
/// index, and an open in the other mode is refused with [`Error::InvalidArgument`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexMode {
    /// A table in memory: 19 to 23 bytes a key, no index reads, checkpoints through the
    /// version log.
    #[default]
    InMemory,
    /// Pages on the volume behind a page cache of `cache_bytes` (KV-SSD keeps its index in
    /// the device): resident memory stays flat as keys grow; a lookup whose page is not
    /// cached costs one page read; checkpoints (and each open) copy the table. See
    /// `docs/hash.md`, "The bounded index".
    Bounded {
        /// Bytes of index pages cached in memory, at least [`INDEX_CACHE_BYTES_MIN`].
        cache_bytes: u64,
    },
}

/// How records that miss the value cache are read: the worker's reads and the callers'
/// (`docs/hash.md`, "Reads").
///
/// A store opened with [`crate::HashStore::open`] reads through the page cache;
/// [`crate::HashStore::open_with_reads`] chooses. A store opened on a device
/// ([`crate::HashStore::open_device`]) has no file for a second descriptor and reads directly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordReads {
    /// `pread` on a second, buffered descriptor of the volume (`shale_io::BufferedReader`):
    /// a record read once stays in the kernel's page cache, so data larger than the value
    /// cache but within the machine's memory is read from memory (RocksDB's default, and the
    /// lsm engine's). Writes stay O_DIRECT; a page that fails its checks is dropped from the
    /// page cache and read again from the device.
    #[default]
    PageCache,
    /// O_DIRECT reads only: the value cache is the only cache. For data far beyond memory,
    /// where the page cache would only churn.
    Direct,
}

/// Smallest page cache of the bounded index: four pages.
pub const INDEX_CACHE_BYTES_MIN: u64 = 4 * PAGE_BYTES as u64;
/// Largest page cache of the bounded index.
pub const INDEX_CACHE_BYTES_MAX: u64 = 1 << 40;

/// How to open a hash store.
#[derive(Clone, Debug)]
pub struct HashOptions {
    /// Make a new store where the path or device holds none.
    pub create_if_missing: bool,
    /// Size of a slot of a new volume, which is one segment of the record log, at most 1 GiB.
    /// A segment holds the largest value (2 MiB) from [`SEGMENT_BYTES_FULL_VALUES`] on;
    /// smaller segments (down to [`SEGMENT_BYTES_MIN`]) take values up to what they hold
    /// ([`HashOptions::value_bytes_max`]).
    pub segment_bytes: u64,
    /// Size of each version log mirror of a new volume.
    pub version_log_bytes: u64,
    /// Bits of the key digest the index keeps: 64 (its top 16 are the key's first two bytes,
    /// the iterator bucket). Fewer only in tests, to make digest collisions common enough to
    /// test (at 16 or fewer, every key of a bucket shares one digest).
    pub digest_bits: u32,
    /// Read queues kept idle for synchronous reads: recovery's, the worker's rare
    /// confirmations, and the callers' own record reads with O_DIRECT
    /// ([`RecordReads::Direct`]). More callers than this at once open a queue each, closed
    /// when given back.
    pub read_queues: usize,
    /// Requests submitted and not yet completed, at most: a submission past it answers
    /// [`crate::Error::Busy`] (the synchronous calls wait for room instead).
    pub queue_depth: usize,
    /// Device requests the worker keeps in flight: its reads, and the writes of its batches.
    pub io_depth: u32,
    /// Most log bytes one batch of stores and deletes writes (one durable write).
    pub batch_bytes_max: usize,
    /// Batches whose durable writes may be in flight at once (1 to 8, below `io_depth`). With
    /// more than one, the worker packs and submits the next batch of queued writes while
    /// earlier ones are written, instead of after, so the device's parallelism and the
    /// worker's packing and answering overlap; batches are still acknowledged in order. 1
    /// writes one batch at a time (each forms while the one before is written).
    pub batches_in_flight: usize,
    /// Garbage collection takes a segment whose live records fall below this share of the
    /// records it holds (0.5: at most about twice the live data on the volume under uniform
    /// overwrites, and each copy pays for at least one freed record); 0 turns it off.
    pub gc_live_ratio: f64,
    /// Log bytes written (the user's and garbage collection's) after which the index is
    /// checkpointed, so an open reads the checkpoint and the log after it rather than every
    /// segment; 0 turns checkpoints off. Each checkpoint writes about 16 bytes per key in
    /// memory mode, and copies the index's table (32 to 64 bytes a key) in bounded mode.
    pub checkpoint_bytes: u64,
    /// After a checkpoint that wrote C bytes, the next one waits for at least this many times
    /// C of log as well as for `checkpoint_bytes`, so checkpoints cost at most 1/ratio of the
    /// log's writes however many keys the index holds (a fixed interval would write the whole
    /// index ever more often relative to the data as it grows: 7% more device writes at 10M
    /// keys of 4 KiB values with 1 GiB). The price is replay at open: up to ratio x C bytes
    /// of log (64: 1 KiB a key in memory mode). 0 keeps the fixed `checkpoint_bytes`.
    pub checkpoint_log_ratio: u32,
    /// Iterators open at once, at most (KV-SSD devices allow a few): past it,
    /// [`crate::Error::TooManyIterators`].
    pub max_iterators: usize,
    /// Where the index lives: in memory (the default) or in pages on the volume behind a
    /// cache of fixed size.
    pub index: IndexMode,
    /// Bytes of values read kept in memory for the next reads of their keys (least recently
    /// used first out; a value over a quarter of it is not kept); 0 turns the cache off. A
    /// fixed budget: the bounded index's flat memory stays flat.
    pub value_cache_bytes: usize,
    /// The CPU the store's worker thread is pinned to, as an index into the CPUs the
    /// process may use (taken modulo their count: `shale_io::affinity::pin_current_thread`);
    /// `None`, the default, leaves it to the scheduler. KVSB pins each shard's worker
    /// beside its client threads, one core per shard.
    pub worker_cpu: Option<usize>,
}

/// Most batches in flight at once ([`HashOptions::batches_in_flight`]).
pub const BATCHES_IN_FLIGHT_MAX: usize = 8;

/// Smallest segment.
pub const SEGMENT_BYTES_MIN: u64 = 64 << 10;

/// Pages of a collection's victim scanned in one turn of the worker (1 MiB): a whole 8 MiB
/// segment scanned at once (each record decoded, copied and looked up in the index) held the
/// worker 2-10 ms at 64 writers on 2 cores, every caller's answer waiting behind it; a slice
/// takes a few tenths of a millisecond, and the worker answers and batches between slices.
/// A segment larger than this is scanned over several turns.
pub const GC_SCAN_PAGES: u32 = 256;
/// Smallest segment that holds the largest record (a 255-byte key and a 2 MiB value).
pub const SEGMENT_BYTES_FULL_VALUES: u64 = 4 << 20;

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
            batches_in_flight: 2,
            gc_live_ratio: 0.5,
            checkpoint_bytes: 1 << 30,
            checkpoint_log_ratio: 64,
            max_iterators: 16,
            index: IndexMode::InMemory,
            value_cache_bytes: 32 << 20,
            worker_cpu: None,
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
        if !(1..=BATCHES_IN_FLIGHT_MAX).contains(&self.batches_in_flight)
            || self.batches_in_flight as u64 >= u64::from(self.io_depth)
        {
            return Err(Error::InvalidArgument(format!(
                "batches_in_flight {} must be in 1..={BATCHES_IN_FLIGHT_MAX} and below io_depth {}",
                self.batches_in_flight, self.io_depth
            )));
        }
        if !(PAGE_BYTES..=64 << 20).contains(&self.batch_bytes_max) {
            return Err(Error::InvalidArgument(format!(
                "batch_bytes_max {} must be in {PAGE_BYTES}..={}",
                self.batch_bytes_max,
                64 << 20
            )));
        }
        if !(0.0..1.0).contains(&self.gc_live_ratio) {
            return Err(Error::InvalidArgument(format!(
                "gc_live_ratio {} must be in 0..1 (0 turns garbage collection off)",
                self.gc_live_ratio
            )));
        }
        if let IndexMode::Bounded { cache_bytes } = self.index {
            if !(INDEX_CACHE_BYTES_MIN..=INDEX_CACHE_BYTES_MAX).contains(&cache_bytes) {
                return Err(Error::InvalidArgument(format!(
                    "index cache_bytes {cache_bytes} must be in \
                     {INDEX_CACHE_BYTES_MIN}..={INDEX_CACHE_BYTES_MAX}"
                )));
            }
        }
        Ok(())
    }

    /// Pages the bounded index caches (0 in memory mode).
    pub(crate) fn index_cache_pages(&self) -> usize {
        match self.index {
            IndexMode::InMemory => 0,
            IndexMode::Bounded { cache_bytes } => (cache_bytes / PAGE_BYTES as u64) as usize,
        }
    }

    /// The longest value a store takes: 2 MiB, or less where segments are smaller than
    /// [`SEGMENT_BYTES_FULL_VALUES`] (a record never spans segments).
    pub fn value_bytes_max(&self) -> usize {
        let pages = (self.segment_bytes / PAGE_BYTES as u64) as usize;
        let per_page = shale_space::log_page::PAGE_PAYLOAD_BYTES
            - shale_space::log_page::FRAGMENT_HEADER_BYTES;
        let record_max = pages * per_page;
        VALUE_BYTES_MAX.min(record_max - crate::record::HEADER_BYTES - crate::record::KEY_BYTES_MAX)
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
            engine: Some(shale_space::EngineKind::Hash),
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
    /// Bytes the index holds in memory: its tables in memory mode; its page cache (fixed
    /// when the store opens) and collision map in bounded mode.
    pub index_memory_bytes: u64,
    /// Bounded index pages read from the volume.
    pub index_page_reads: u64,
    /// Bounded index pages written to the volume.
    pub index_page_writes: u64,
    /// Buckets (pages) of the bounded index's table (0 in memory mode).
    pub index_buckets: u64,
    /// Records replayed by the open.
    pub recovered_records: u64,
    /// Batches the worker wrote (each one durable write of the pages of its records).
    pub batches: u64,
    /// Submissions answered Busy.
    pub busy: u64,
    /// Batches whose last, partial page went on in the next batch rather than being
    /// written padded (while writes stream in: `log.rs`).
    pub batch_tails_carried: u64,
    /// Batches submitted while earlier ones were still being written
    /// ([`HashOptions::batches_in_flight`]).
    pub batches_overlapped: u64,
    /// Retrieves the value cache answered, with no device read (`value_cache_bytes`).
    pub value_cache_hits: u64,
    /// Retrieves and exists answered on the caller's thread, with no hand-off to the
    /// worker: from the value cache, by an index lookup that found no entry, or (retrieves)
    /// by reading the record the index names on the caller's thread.
    pub caller_reads: u64,
    /// Records garbage collection copied (its writes, counted apart from the user's).
    pub gc_records_copied: u64,
    /// Log bytes garbage collection wrote.
    pub gc_bytes_written: u64,
    /// Segments garbage collection freed.
    pub segments_freed: u64,
    /// Checkpoints written since the open.
    pub checkpoints: u64,
    /// Bytes those checkpoints wrote: their records, and in bounded mode the table copies
    /// (device writes the user's and garbage collection's log bytes do not count).
    pub checkpoint_bytes_written: u64,
    /// Index entries the open loaded from the newest checkpoint (the rest of the index came
    /// from the `recovered_records` of the log written after it).
    pub checkpoint_entries_loaded: u64,
    /// Microseconds the open spent recovering.
    pub recovery_micros: u64,
}
