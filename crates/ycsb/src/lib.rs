//! YCSB for any key-value engine: the Yahoo! Cloud Serving Benchmark's core workloads (A to
//! F), generators, client driver and report, faithful to YCSB's Java code, with no tie to
//! shale: the `shale ycsb` command and the comparison harness drive shale, RocksDB and fjall
//! through the same [`Engine`] trait and the same generators.
//!
//! - [`generator`]: YCSB's counters, uniform, zipfian (Gray et al., constant 0.99), scrambled
//!   zipfian and skewed-latest generators.
//! - [`key`]: keys `"user" + fnvhash64(n)`; [`record`]: fields and their encoding.
//! - [`Workload`] and [`Preset`]: the operation mix; [`Config`]: records, operations,
//!   threads, record layout, seed.
//! - [`load`] and [`run`]: the two phases on N threads; [`Report`]: YCSB's output.
//! - [`latency`]: client-side latency and the tail line every suite prints.
//! - [`kvsb`]: the KV-SSD paper's KVSB (instances on their own volumes, fills, then A to D).
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//! use ycsb::{Config, Engine, EngineResult, Operation, Preset};
//!
//! /// An engine in a BTreeMap.
//! #[derive(Default)]
//! struct Memory(Mutex<BTreeMap<Vec<u8>, Vec<u8>>>);
//!
//! impl Engine for Memory {
//!     fn name(&self) -> &str {
//!         "memory"
//!     }
//!     fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
//!         self.0.lock().unwrap().insert(key.to_vec(), value.to_vec());
//!         Ok(())
//!     }
//!     fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
//!         Ok(self.0.lock().unwrap().get(key).cloned())
//!     }
//!     fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
//!         self.insert(key, value)
//!     }
//!     fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
//!         // Copy each value out, as a client would.
//!         let map = self.0.lock().unwrap();
//!         let values: Vec<Vec<u8>> =
//!             map.range(start_key.to_vec()..).take(count).map(|(_, v)| v.clone()).collect();
//!         Ok(values.len())
//!     }
//! }
//!
//! let engine = Memory::default();
//! let mut config = Config::new(Preset::A);
//! config.record_count = 1000;
//! config.operation_count = 2000;
//! config.threads = 2;
//! let loaded = ycsb::load(&engine, &config)?;
//! assert_eq!(loaded.op(Operation::Insert).unwrap().ok, 1000);
//! let report = ycsb::run(&engine, &config)?;
//! let text = report.to_string();
//! assert!(text.contains("[OVERALL], Throughput(ops/sec), "));
//! assert!(text.contains("[READ], 99thPercentileLatency(us), "));
//! assert!(text.contains("[UPDATE], Return=OK, "));
//! # Ok::<(), ycsb::Error>(())
//! ```

pub mod generator;
pub mod key;
pub mod kvsb;
pub mod latency;
pub mod record;
#[cfg(feature = "table")]
pub mod table;

mod config;
mod driver;
mod engine;
mod error;
mod report;
mod workload;

pub use config::Config;
pub use driver::{
    PROGRESS_EVERY_OPS, Progress, load, load_watched, load_with_progress, run, run_watched,
    run_with_progress,
};
pub use engine::{Engine, EngineError, EngineResult};
pub use error::{Error, Result};
pub use key::KeyFormat;
pub use record::RecordLayout;
pub use report::{ERRORS_KEPT, OpReport, Phase, Report, Status, java_double};
pub use workload::{Operation, Preset, RequestDistribution, ScanLengthDistribution, Workload};

/// The histogram crate of [`OpReport`]'s latencies, at the version this crate uses.
pub use hdrhistogram;
/// The random number crate the [`generator`]s draw with, at the version this crate uses.
pub use rand;
