//! shale: an embeddable storage engine for NVMe SSDs, with three engines on one storage layer.
//!
//! Each store owns its storage (a directory holding one pre-allocated volume file, or a whole
//! block device) and writes it through io_uring with O_DIRECT. Three engines share that
//! volume, its version log and its log page format; a volume says which engine's store it is,
//! and the others refuse to open it.
//!
//! # Which engine for what
//!
//! | engine | pick it for | not for |
//! |---|---|---|
//! | [`lsm`] (this crate's root: [`Db`]) | general key-value data: ordered keys, range scans and prefixes, snapshots, atomic batches across keys, unsynced writes at memory speed; a fast and a capacity device | rows with columns and transactions |
//! | [`hash`] ([`hash::HashStore`], [`hash::Shards`]) | point stores and gets of keys of 4-255 bytes and values up to 2 MiB, each durable on return, with KV-SSD's API (store, retrieve, delete, exist) and low write amplification; one store per device, [`hash::Shards`] over many | ordered scans, atomic updates of several keys |
//! | [`table`] ([`table::TableStore`]) | rows under a schema, transactions at three isolation levels, scans by any column, updates in place | plain key-value workloads (no secondary indexes) |
//!
//! # Errors
//!
//! Each engine has its own error enum ([`Error`], [`hash::Error`], [`table::Error`], and the
//! layers' [`space::Error`] and [`io::Error`]), whose variants carry what that layer knows (a
//! path, a byte offset, a column). They follow one rule: `Display` says what failed at that
//! layer and `source()` gives the cause, so each cause is printed once; [`io::Chain`] prints an
//! error with all its causes ("what failed: why: the root cause").
//!
//! And they share one core: every one of them has a `kind()`, an [`ErrorKind`] (the same type
//! in every crate), so code that serves several engines handles their errors in one match.
//! An error that wraps a lower layer's has that error's kind. What to do for each:
//!
//! | kind | what happened | what to do |
//! |---|---|---|
//! | `Io` | the device or file system failed a request | look at the device and the path in the message; a failed write also stops the store |
//! | `Corruption` | persisted bytes fail a checksum or structure check (never a wrong value instead) | do not retry: `shale check`, restore from a checkpoint or copy |
//! | `NotAStore` | the path holds foreign bytes, another engine's store, or volumes that are not one tiered store; nothing written | fix the path, or open it with its engine |
//! | `NewerFormat` | a newer shale wrote the store; nothing written | open it with that newer build |
//! | `InvalidArgument` | bad options or input (a key too long, a row of the wrong shape); nothing changed | fix the input: retried unchanged it fails again |
//! | `Unsupported` | the backend cannot do what the options ask (no io_uring, no O_DIRECT) | choose another backend or option |
//! | `NoSpace` | the device, the volume or a table's undo log is full | free space, or end the open transaction (undo log); reopen if the store stopped |
//! | `Stopped` | an earlier write or sync failed; reads still work (P5) | close, fix the cause, reopen: never retry the write on this handle |
//! | `ReadOnly` | a write to a store opened read-only or on a read-only file system | open it read-write |
//! | `InUse` | another handle, in this process or another, holds the store | close the other handle, or wait |
//! | `Busy` | a request queue is full; nothing queued | reap completions, submit again |
//! | `LimitReached` | as many iterators as allowed are open | close one first (waiting alone does not help) |
//! | `Timeout` | a table lock was not granted within `lock_timeout` | abort the transaction and run it again |
//! | `NotFound` | a key, table or column the call needs present is absent (a plain get is `Ok(None)`) | check the name, or create it first |
//! | `AlreadyExists` | a key or table the call needs absent is present | update instead, or choose another name |
//! | `BufferTooSmall` | the caller's buffer cannot hold the answer; nothing copied | call again with the size the error gives |
//! | `LogMissing` | a table store's undo log in `/dev/shm` is gone, or is its original's (a copy); not opened (P7) | restore the file, or open accepting the loss (`accept_lost_undo_log`) if it was closed cleanly |
//!
//! ```
//! use shale::{Db, ErrorKind, Options};
//!
//! let dir = tempfile::tempdir()?;
//! Db::open(dir.path(), Options::small_for_tests())?.close()?;
//! // The hash engine refuses the lsm store, as every engine refuses another's.
//! let refused = shale::hash::HashStore::open(dir.path(), Default::default()).unwrap_err();
//! assert_eq!(refused.kind(), ErrorKind::NotAStore);
//! assert_eq!(refused.kind().as_str(), "not_a_store"); // a stable name for logs and metrics
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # lsm: ordered keys
//!
//! An LSM tree of SSTs in fixed-size slots, a WAL on raw 4 KiB pages.
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
//! # hash: durable point operations
//!
//! A hash index over a log of records; every store and delete is durable when it returns.
//!
//! ```
//! use shale::hash::{Error, HashOptions, HashStore, StoreMode};
//!
//! let dir = tempfile::tempdir()?;
//! let opts = HashOptions { segment_bytes: shale::hash::SEGMENT_BYTES_MIN, ..Default::default() };
//! let store = HashStore::open(dir.path(), opts)?;
//! store.store(b"user:1", b"ada", StoreMode::Overwrite)?; // durable on return
//! assert!(matches!(store.store(b"user:1", b"bob", StoreMode::NoOverwrite), Err(Error::KeyExists)));
//! assert_eq!(store.retrieve(b"user:1")?, Some(b"ada".to_vec()));
//! assert!(store.delete(b"user:1")?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # table: rows and transactions
//!
//! Tables of rows under a schema, updated in place, with undo-only logging.
//!
//! ```
//! use shale::table::{Column, Isolation, Schema, TableOptions, TableStore};
//!
//! let dir = tempfile::tempdir()?;
//! let store = TableStore::open(dir.path(), TableOptions::default())?;
//! let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("city", 40)])?;
//! let people = store.create_table("people", schema)?;
//! let mut txn = store.begin(Isolation::RepeatableRead);
//! txn.insert(people, &[&b"0001"[..], b"Lyon"])?;
//! txn.update(people, b"0001", "city", b"Kyoto")?;
//! txn.commit()?; // both changes, or neither
//! assert_eq!(store.select_cell(people, b"0001", "city")?, Some(b"Kyoto".to_vec()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The layers underneath are public too: [`io`] (devices and queues) and [`space`] (volumes).

pub use shale_lsm::{
    CheckReport, Db, DbIterator, Entries, Error, ErrorKind, MemoryLimit, Options, ReadOptions,
    Result, ScanEntries, Snapshot, Stall, StallTotal, Stalls, Stats, Ticket, WriteBatch,
    WriteOptions,
};

/// The hash engine: a hash-indexed, log-structured key-value store with KV-SSD's API
/// ([`hash::HashStore`]), and [`hash::Shards`], one store per device over many devices.
pub use shale_hash as hash;
/// The io layer: devices, queues, backends, the simulated device.
pub use shale_io as io;
/// The lsm engine: the same API as this crate's root, its options module with the limits, and
/// the option types (`SstOptions`, `Compression`, `TierOptions`, `TunerOptions`). Its formats,
/// WAL and SST modules are internal (the `internals` feature, for the project's tools, is
/// outside semver).
pub use shale_lsm as lsm;
/// The space layer: volumes, slots and extents, the version log.
pub use shale_space as space;
/// The table engine: tables of rows under a schema, transactions, undo-only logging
/// ([`table::TableStore`]).
pub use shale_table as table;
