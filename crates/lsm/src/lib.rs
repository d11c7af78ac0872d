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

// Without the `internals` feature (a user's build) the helpers only the project's tools call
// are unused; the workspace's own builds turn the feature on and check dead code there.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]
// No public item may hand out a type a user cannot name.
#![warn(unnameable_types)]

/// Declares the engine's internal modules: `pub(crate)` for the crate's users, whose API is
/// the re-exports below and [`options`]; `pub` (and hidden from the docs) with the
/// `internals` feature, which the project's own tools turn on (the CLI's `inspect`, `check`
/// and `bench`, the fuzz targets, this crate's scenario tests through its dev-dependency on
/// itself). Nothing they reach is covered by semver.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

/// Declares a method of the engine's internals on a public type, as [`internal_modules!`]
/// does a module: `pub` and hidden with the `internals` feature, `pub(crate)` without.
macro_rules! internal_fn {
    ($(#[$meta:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        $(#[$meta])*
        pub fn $($rest)*
        #[cfg(not(feature = "internals"))]
        $(#[$meta])*
        #[allow(dead_code, reason = "used by the project's tools, with the `internals` feature")]
        pub(crate) fn $($rest)*
    };
}
pub(crate) use internal_fn;

internal_modules!(
    batch,
    cache,
    check,
    db_iter,
    destroy,
    error,
    iter,
    key,
    level_targets,
    memtable,
    memtable_pace,
    merge,
    range_del,
    sst,
    stats,
    ticket,
    tiering,
    timeline,
    tuner,
    version,
    version_edit,
    wal,
    write_controller,
);
mod checkpoint;
mod db;
mod memory_limit;
pub mod options;
mod sync;

pub use batch::WriteBatch;
pub use check::CheckReport;
pub use checkpoint::{COPY_BATCH_BYTES, CheckpointOptions, PROGRESS_ENTRIES};
pub use db::{Db, ScanEntries, Snapshot};
pub use db_iter::{DbIterator, Entries};
pub use destroy::destroy;
pub use error::{Error, Result};
pub use memory_limit::MemoryLimit;
pub use options::{
    CompactionFilter, CompactionPri, MemoryTail, Options, ReadOptions, WalTail, WriteOptions,
};
/// The kind of an [`Error`] ([`Error::kind`]), shared by every shale layer's errors.
pub use shale_io::{CpuPriority, ErrorKind};
/// The limits the SST and tier options are checked against.
pub use sst::builder::{
    BLOCK_ALIGN_BYTES, BLOCK_BYTES_MAX, BLOOM_BITS_PER_KEY_MAX, RESTART_INTERVAL_MAX,
};
pub use sst::{Compression, IndexAndFilter, SstOptions};
pub use stats::{LevelIo, Stall, StallTotal, Stalls, Stats, TierStats};
pub use ticket::Ticket;
pub use tiering::TierOptions;
pub use tuner::{TunerMode, TunerOptions};
pub use version_edit::LEVELS_MAX;
pub use write_controller::SlowdownPace;
