//! shale: an embeddable key-value store for NVMe SSDs.
//!
//! The store owns its storage (a directory holding one pre-allocated volume file, or a whole
//! block device), writes its WAL to raw 4 KiB pages through io_uring with O_DIRECT, and keeps
//! an LSM tree of SSTs in fixed-size slots described by a self-describing version log.
//!
//! ```
//! use shale::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::small_for_tests())?;
//! db.put(b"user:1", b"ada")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"user:2", b"grace");
//! batch.delete(b"user:1");
//! db.write(&batch, &WriteOptions { sync: true })?;      // atomic, durable on return
//! assert_eq!(db.get(b"user:1")?, None);
//!
//! let mut it = db.iter(&ReadOptions { prefix: Some(b"user:".to_vec()), ..Default::default() });
//! it.seek_to_first();
//! assert_eq!((it.key(), it.value()), (&b"user:2"[..], &b"grace"[..]));
//! # drop(it);
//! // Or as a Rust iterator, from either end.
//! let newest = db.iter(&ReadOptions::default()).into_iter().next_back().transpose()?;
//! assert_eq!(newest, Some((b"user:2".to_vec(), b"grace".to_vec())));
//! db.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The layers underneath are public too: [`io`] (devices and queues) and [`space`] (volumes).

pub use shale_lsm::{
    CheckReport, Db, DbIterator, Entries, Error, Options, ReadOptions, Result, ScanEntries,
    Snapshot, Stall, StallTotal, Stalls, Stats, Ticket, WriteBatch, WriteOptions,
};

/// The io layer: devices, queues, backends, the simulated device.
pub use shale_io as io;
/// The lsm engine: the same API as this crate's root, its options module with the limits, and
/// the option types (`SstOptions`, `Compression`, `TierOptions`, `TunerOptions`). Its formats,
/// WAL and SST modules are internal (the `internals` feature, for the project's tools, is
/// outside semver).
pub use shale_lsm as lsm;
/// The space layer: volumes, slots and extents, the version log.
pub use shale_space as space;
