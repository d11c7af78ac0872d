//! shale's hash engine, after KV-SSD: a hash-indexed, log-structured key-value store on one
//! shale volume (one *shard*), with the native key-value API of the SNIA KV API (store,
//! retrieve, delete, exist).
//!
//! There is no write-ahead log and no compaction: each store appends one self-describing
//! record to a log of segments (slots of the volume) in the shared log page format
//! (`shale_space::log_page`), and the log *is* the data. An index maps a 64-bit digest of
//! each key to its newest record, held in memory ([`IndexMode::InMemory`]) or in pages on the
//! volume behind a cache of fixed size ([`IndexMode::Bounded`]); the full key is compared on
//! every hit, so digest collisions are resolved. See `docs/hash.md` for the design, the
//! on-disk formats and what is not built yet.
//!
//! Promises: a store or delete that returned is durable (it survives power loss, P1); each
//! store is atomic for its pair; there is no atomicity across keys. Damage to an acknowledged
//! record yields [`Error::Corruption`], never a wrong value (P4).
//!
//! ```
//! use shale_hash::{Error, HashOptions, HashStore, StoreMode};
//!
//! let dir = tempfile::tempdir()?;
//! let store = HashStore::open(dir.path(), HashOptions::default())?;
//! store.store(b"user:1", b"ada", StoreMode::Overwrite)?;
//! assert!(matches!(store.store(b"user:1", b"bob", StoreMode::NoOverwrite), Err(Error::KeyExists)));
//! let mut buf = [0u8; 2];
//! assert_eq!(store.retrieve_into(b"user:1", 1, &mut buf)?, Some(2)); // "da"
//! assert_eq!(store.exist(&[b"user:1", b"user:2"])?, vec![0b01]);
//! assert!(store.delete(b"user:1")?);
//! assert_eq!(store.retrieve(b"user:1")?, None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bounded;
mod caller_reads;
mod check;
mod checkpoint;
mod completion;
mod digest_table;
mod error;
pub mod index;
mod index_page;
mod iterator;
mod log;
mod meta;
mod options;
mod page_advice;
mod page_cache;
mod paged_table;
pub mod record;
mod shard;
mod shards;
mod store;
mod store_checkpoint;
mod value_cache;
mod worker;

pub use check::{HashReport, SegmentReport, check_store};
pub use completion::{Completion, Output};
pub use error::{Error, Result};
pub use iterator::{IterEntry, IterKind, KvIterator};
pub use options::{
    BATCHES_IN_FLIGHT_MAX, GC_SCAN_PAGES, HashOptions, HashStats, INDEX_CACHE_BYTES_MIN, IndexMode,
    QUEUE_DEPTH_MAX, RecordReads, SEGMENT_BYTES_FULL_VALUES, SEGMENT_BYTES_MIN, StoreMode,
};
pub use record::{KEY_BYTES_MAX, KEY_BYTES_MIN, VALUE_BYTES_MAX};
/// The kind of an [`Error`] ([`Error::kind`]), shared by every shale layer's errors.
pub use shale_io::ErrorKind;
pub use shale_space::page_log::driver::DriverStats;
pub use shards::{Shards, ShardsIterator};
pub use store::{HashStore, HashTicket, KvRequest};
pub use store_checkpoint::{COPY_IN_FLIGHT, PROGRESS_ENTRIES};

/// The checkpoint and index page decoders for the fuzz targets (`fuzz/src/hash_checks.rs`);
/// not an API.
#[doc(hidden)]
pub mod fuzz {
    /// Decodes a checkpoint image of `generation`; an error says what is wrong.
    ///
    /// # Errors
    /// What the decoder found wrong.
    pub fn decode_checkpoint(image: &[u8], generation: u64) -> std::result::Result<(), String> {
        crate::checkpoint::Checkpoint::decode(image, generation).map(|_| ())
    }

    /// Decodes a bounded index page that should be bucket `bucket` of a table of `buckets`
    /// buckets and generation `generation`; returns its entries, or what is wrong.
    ///
    /// # Errors
    /// What the decoder found wrong.
    pub fn decode_index_page(
        page: &[u8],
        generation: u64,
        bucket: u32,
        buckets: u32,
    ) -> std::result::Result<Vec<(u64, u64)>, String> {
        let mut entries = Vec::new();
        let at = crate::index_page::page_id(generation, bucket, buckets);
        crate::index_page::decode(page, at, &mut entries)?;
        Ok(entries)
    }

    /// The page image of `entries` as bucket `bucket` of a table of `buckets` buckets and
    /// generation `generation` (entries that do not belong there are a bug: it panics).
    pub fn encode_index_page(
        entries: &[(u64, u64)],
        generation: u64,
        bucket: u32,
        buckets: u32,
    ) -> Vec<u8> {
        let mut page = vec![0u8; shale_space::index_page::PAGE_BYTES];
        let at = crate::index_page::page_id(generation, bucket, buckets);
        crate::index_page::encode(at, entries, &mut page);
        page
    }

    /// The page image of `entries` in the format before the one index-page format
    /// (`SHIXPG01`), which readers still accept: for seeds and tests, never written by a store.
    pub fn encode_legacy_index_page(
        entries: &[(u64, u64)],
        generation: u64,
        bucket: u32,
        buckets: u32,
    ) -> Vec<u8> {
        crate::index_page::encode_legacy(
            crate::index_page::page_id(generation, bucket, buckets),
            entries,
        )
    }

    /// Digests that belong to bucket `bucket` of a table of `buckets` buckets, for seeds.
    pub fn digests_of_bucket(bucket: u32, buckets: u32, n: usize) -> Vec<u64> {
        (0u64..)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .filter(|&d| crate::index_page::bucket_of(d, buckets) == bucket)
            .take(n)
            .collect()
    }

    /// A small valid checkpoint image of `generation`, for seed inputs.
    pub fn sample_checkpoint_image(generation: u64) -> Vec<u8> {
        use crate::checkpoint::{Checkpoint, SegmentAt};
        use crate::index::Location;
        let loc = |page: u32| Location { segment: 0, page, offset: 28, pages: 1 }.pack();
        Checkpoint {
            max_seq: 9,
            segments: vec![SegmentAt {
                slot: 0,
                generation: 1,
                pages: 3,
                usage: crate::shard::Usage { records: 3, live: 2 },
            }],
            entries: vec![(0x6b65_0000_0000_0001, loc(0)), (0x6b65_0000_0000_0002, loc(2))],
            keyed: vec![(b"key-collided".to_vec(), loc(1))],
            bounded: None,
        }
        .image(generation)
    }
}
