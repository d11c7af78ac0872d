//! What a load or run does: the workload, how many records and operations, the record shape,
//! threads and seed.

use crate::error::{Error, Result};
use crate::key::KeyFormat;
use crate::record::RecordLayout;
use crate::workload::{Preset, RequestDistribution, Workload};

/// Everything [`load`](crate::load) and [`run`](crate::run) need, with YCSB's property names
/// in the field docs. Build one with [`Config::new`] or [`Config::default`] and set fields.
///
/// ```
/// use ycsb::{Config, Preset};
///
/// let mut config = Config::new(Preset::B);
/// config.record_count = 10_000;
/// config.operation_count = 50_000;
/// config.threads = 4;
/// config.validate()?;
/// # Ok::<(), ycsb::Error>(())
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The run phase's operation mix.
    pub workload: Workload,
    /// Records the load phase inserts, numbered `0..record_count` (`recordcount`).
    pub record_count: u64,
    /// Operations of the run phase, over all threads (`operationcount`).
    pub operation_count: u64,
    /// Client threads, each with its share of the operations (`threadcount`).
    pub threads: usize,
    /// Fields per record and bytes per field (`fieldcount`, `fieldlength`).
    pub layout: RecordLayout,
    /// How record numbers become keys (`insertorder`, `zeropadding`).
    pub key_format: KeyFormat,
    /// What an update writes (`writeallfields`, YCSB's default `false`).
    ///
    /// `false`: an update sets one random field. A key-value engine stores a record as one
    /// value, so the driver reads the record ([`Engine::read`](crate::Engine::read)), replaces
    /// the field and writes the whole record back ([`Engine::update`](crate::Engine::update)),
    /// all inside the update's measured latency. That is exactly what YCSB's RocksDB binding
    /// does, so results compare with published YCSB numbers, and because the driver does it,
    /// every engine does the same work. A read-modify-write is a read followed by such an
    /// update, as in YCSB (whose RocksDB binding also reads twice).
    ///
    /// `true`: an update writes a whole new record without reading (a blind overwrite, what
    /// db_bench's `overwrite` measures).
    pub write_all_fields: bool,
    /// Seed of the client threads' random number generators; thread `i` derives its own from
    /// it, so a run with the same seed and threads draws the same operations and keys.
    pub seed: u64,
}

impl Default for Config {
    /// YCSB's defaults: `CoreWorkload`'s default mix, 1000 records, 1000 operations, one
    /// thread, 10 fields of 100 bytes, hashed keys, one-field updates, seed 0.
    fn default() -> Config {
        Config {
            workload: Workload::default(),
            record_count: 1000,
            operation_count: 1000,
            threads: 1,
            layout: RecordLayout::default(),
            key_format: KeyFormat::default(),
            write_all_fields: false,
            seed: 0,
        }
    }
}

impl Config {
    /// YCSB's defaults with one of the core workloads.
    pub fn new(preset: Preset) -> Config {
        Config { workload: Workload::preset(preset), ..Config::default() }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad value.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidConfig(s));
        if self.threads == 0 {
            return bad("threads must be at least 1".into());
        }
        if self.layout.field_count == 0 {
            return bad("fieldcount must be at least 1".into());
        }
        if u32::try_from(self.layout.field_length).is_err() {
            return bad(format!("fieldlength {} is over 4 GiB", self.layout.field_length));
        }
        if self.record_count > i64::MAX as u64 / 2 {
            return bad(format!("recordcount {} is too large", self.record_count));
        }
        self.workload.validate().map_err(Error::InvalidConfig)
    }

    /// Checks that a run can pick records: the configuration, and at least one loaded record
    /// when an operation reads or changes existing records.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad value.
    pub fn validate_run(&self) -> Result<()> {
        self.validate()?;
        let picks_records =
            self.workload.weights().iter().any(|(op, _)| *op != crate::Operation::Insert);
        if picks_records && self.record_count == 0 {
            return Err(Error::InvalidConfig(format!(
                "recordcount is 0 but workload picks existing records ({} distribution)",
                self.workload.request_distribution
            )));
        }
        Ok(())
    }

    /// The largest record number the scrambled zipfian draws: the loaded records plus room
    /// for twice the expected inserts, as YCSB's `ScrambledZipfianGenerator(0, recordcount +
    /// expectednewkeys)`, so that inserts do not shift which records are hot. Draws above the
    /// last acknowledged insert are redrawn.
    pub(crate) fn zipfian_max(&self) -> u64 {
        let expected_new = self.operation_count as f64 * self.insert_share() * 2.0;
        self.record_count + expected_new as u64
    }

    /// The inserts' share of the operation weights.
    fn insert_share(&self) -> f64 {
        let w = &self.workload;
        let total: f64 = w.weights().iter().map(|(_, w)| w).sum();
        if total > 0.0 { w.insert_proportion / total } else { 0.0 }
    }

    /// Whether the run draws with the "latest" distribution.
    pub(crate) fn is_latest(&self) -> bool {
        self.workload.request_distribution == RequestDistribution::Latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ycsbs() {
        let c = Config::default();
        assert_eq!((c.record_count, c.operation_count, c.threads), (1000, 1000, 1));
        assert_eq!((c.layout.field_count, c.layout.field_length), (10, 100));
        assert!(!c.write_all_fields && !c.key_format.ordered_inserts);
        c.validate().unwrap();
        assert_eq!(Config::new(Preset::E).workload.max_scan_length, 100);
    }

    #[test]
    fn bad_values_are_named() {
        let mut c = Config { threads: 0, ..Config::default() };
        assert!(c.validate().unwrap_err().to_string().contains("threads"));
        c.threads = 2;
        c.layout.field_count = 0;
        assert!(c.validate().unwrap_err().to_string().contains("fieldcount"));
        let c = Config { record_count: 0, ..Config::new(Preset::C) };
        c.validate().unwrap();
        assert!(c.validate_run().unwrap_err().to_string().contains("recordcount"));
    }

    #[test]
    fn zipfian_room_follows_ycsb() {
        // YCSB: expectednewkeys = opcount * insertproportion * 2.0.
        let mut c = Config::new(Preset::E);
        c.record_count = 1000;
        c.operation_count = 2000;
        assert_eq!(c.zipfian_max(), 1000 + 200);
        assert_eq!(Config::new(Preset::A).zipfian_max(), 1000);
    }
}
