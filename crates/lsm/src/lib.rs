//! shale's lsm engine: an LSM-tree key-value store on a shale volume.
//!
//! ```
//! use shale_lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::small_for_tests())?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"fruit/apple", b"red");
//! batch.put(b"fruit/pear", b"green");
//! batch.put(b"veg/leek", b"white");
//! db.write(&batch, &WriteOptions { sync: true })?;          // durable when it returns
//!
//! let snapshot = db.snapshot();
//! db.delete(b"fruit/pear")?;
//! let at_snapshot = ReadOptions { snapshot: Some(&snapshot), ..Default::default() };
//! assert_eq!(db.get_opt(b"fruit/pear", &at_snapshot)?, Some(b"green".to_vec()));
//! assert_eq!(db.get(b"fruit/pear")?, None);
//!
//! let mut it = db.iter(&ReadOptions { prefix: Some(b"fruit/".to_vec()), ..Default::default() });
//! it.seek_to_first();
//! assert_eq!(it.key(), b"fruit/apple");
//! it.next();
//! assert!(!it.valid());
//! # drop(it);
//! # drop(snapshot);
//! db.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
pub mod cache;
pub mod check;
mod db;
pub mod db_iter;
pub mod destroy;
pub mod error;
pub mod iter;
pub mod key;
pub mod level_targets;
pub mod memtable;
pub mod merge;
pub mod options;
pub mod range_del;
pub mod sst;
pub mod stats;
mod sync;
pub mod ticket;
pub mod tiering;
pub mod timeline;
pub mod tuner;
pub mod version;
pub mod version_edit;
pub mod wal;
pub mod write_controller;

pub use batch::WriteBatch;
pub use check::CheckReport;
pub use db::{Db, ScanEntries, Snapshot};
pub use db_iter::{DbIterator, Entries};
pub use destroy::destroy;
pub use error::{Error, Result};
pub use options::{CompactionPri, MemoryTail, Options, ReadOptions, WalTail, WriteOptions};
pub use stats::{Stall, StallTotal, Stalls, Stats, TierStats};
pub use ticket::Ticket;
pub use tiering::TierOptions;
pub use tuner::{TunerMode, TunerOptions};
