//! shale's hash engine, after KV-SSD: a hash-indexed, log-structured key-value store on one
//! shale volume (one *shard*), with the native key-value API of the SNIA KV API (store,
//! retrieve, delete, exist).
//!
//! There is no write-ahead log and no compaction: each store appends one self-describing
//! record to a log of segments (slots of the volume) in the shared log page format
//! (`shale_space::log_page`), and the log *is* the data. An index in memory maps a 64-bit
//! digest of each key to its newest record; the full key is compared on every hit, so digest
//! collisions are resolved. See `docs/hash.md` for the design, the on-disk formats and what
//! is not built yet.
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

mod checkpoint;
mod completion;
mod error;
pub mod index;
mod iterator;
mod log;
mod meta;
mod options;
pub mod record;
mod shard;
mod shards;
mod store;
mod worker;

pub use completion::{Completion, Output};
pub use error::{Error, Result};
pub use iterator::{IterEntry, IterKind, KvIterator};
pub use options::{
    HashOptions, HashStats, QUEUE_DEPTH_MAX, SEGMENT_BYTES_FULL_VALUES, SEGMENT_BYTES_MIN,
    StoreMode,
};
pub use record::{KEY_BYTES_MAX, KEY_BYTES_MIN, VALUE_BYTES_MAX};
pub use shards::{Shards, ShardsIterator};
pub use store::{HashStore, HashTicket, KvRequest};
