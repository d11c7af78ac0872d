//! Workloads: the mix of operations and how they pick records, with YCSB's core workloads A
//! to F as presets (the `workloads/workloada` ... `workloadf` files of YCSB).

use std::fmt;
use std::str::FromStr;

/// One kind of operation, named as YCSB's report names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Write a new record (the load phase's only operation).
    Insert,
    /// Read one record.
    Read,
    /// Change an existing record (see [`Config::write_all_fields`](crate::Config)).
    Update,
    /// Read a run of records in key order from a start key.
    Scan,
    /// Read a record, then update it.
    ReadModifyWrite,
}

impl Operation {
    /// Every operation, in the order reports list them.
    pub const ALL: [Operation; 5] = [
        Operation::Insert,
        Operation::Read,
        Operation::Update,
        Operation::Scan,
        Operation::ReadModifyWrite,
    ];

    /// YCSB's name: `INSERT`, `READ`, `UPDATE`, `SCAN`, `READ-MODIFY-WRITE`.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Insert => "INSERT",
            Operation::Read => "READ",
            Operation::Update => "UPDATE",
            Operation::Scan => "SCAN",
            Operation::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How operations pick the record they work on (YCSB's `requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestDistribution {
    /// Every loaded record equally likely.
    Uniform,
    /// YCSB's scrambled zipfian (constant 0.99): a few records are hot, scattered over the
    /// key space.
    Zipfian,
    /// Zipfian counted back from the newest acknowledged insert: recent records are hot.
    Latest,
}

impl FromStr for RequestDistribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "uniform" => Ok(RequestDistribution::Uniform),
            "zipfian" => Ok(RequestDistribution::Zipfian),
            "latest" => Ok(RequestDistribution::Latest),
            _ => Err(format!("unknown request distribution {s:?} (uniform, zipfian or latest)")),
        }
    }
}

impl fmt::Display for RequestDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RequestDistribution::Uniform => "uniform",
            RequestDistribution::Zipfian => "zipfian",
            RequestDistribution::Latest => "latest",
        })
    }
}

/// How scans pick their length (YCSB's `scanlengthdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanLengthDistribution {
    /// Every length from the minimum to the maximum equally likely.
    Uniform,
    /// Zipfian (0.99) over the lengths: short scans are common.
    Zipfian,
}

impl FromStr for ScanLengthDistribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "uniform" => Ok(ScanLengthDistribution::Uniform),
            "zipfian" => Ok(ScanLengthDistribution::Zipfian),
            _ => Err(format!("unknown scan length distribution {s:?} (uniform or zipfian)")),
        }
    }
}

impl fmt::Display for ScanLengthDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScanLengthDistribution::Uniform => "uniform",
            ScanLengthDistribution::Zipfian => "zipfian",
        })
    }
}

/// YCSB's core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Update heavy: 50% reads, 50% updates, zipfian (a session store recording recent actions).
    A,
    /// Read mostly: 95% reads, 5% updates, zipfian (photo tagging).
    B,
    /// Read only: 100% reads, zipfian (a user profile cache).
    C,
    /// Read latest: 95% reads, 5% inserts, latest (user status updates).
    D,
    /// Short ranges: 95% scans of 1 to 100 records (uniform), 5% inserts, zipfian (threaded
    /// conversations).
    E,
    /// Read-modify-write: 50% reads, 50% read-modify-writes, zipfian (a user database).
    F,
}

impl Preset {
    /// Every preset, A to F.
    pub const ALL: [Preset; 6] = [Preset::A, Preset::B, Preset::C, Preset::D, Preset::E, Preset::F];

    /// The lower-case letter.
    pub fn letter(self) -> char {
        match self {
            Preset::A => 'a',
            Preset::B => 'b',
            Preset::C => 'c',
            Preset::D => 'd',
            Preset::E => 'e',
            Preset::F => 'f',
        }
    }
}

impl FromStr for Preset {
    type Err = String;

    /// `a` to `f`, upper or lower case, with or without YCSB's `workload` prefix.
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let letter = lower.strip_prefix("workload").unwrap_or(&lower);
        Preset::ALL
            .into_iter()
            .find(|p| letter.len() == 1 && letter.starts_with(p.letter()))
            .ok_or_else(|| format!("unknown workload {s:?} (a, b, c, d, e or f)"))
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

/// The run phase's mix of operations (YCSB's `CoreWorkload` properties). Proportions are
/// weights: they need not sum to 1.
///
/// ```
/// use ycsb::{Preset, RequestDistribution, Workload};
///
/// let mut w = Workload::preset(Preset::A);
/// assert_eq!((w.read_proportion, w.update_proportion), (0.5, 0.5));
/// w.request_distribution = RequestDistribution::Uniform; // override the preset's zipfian
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Weight of reads (`readproportion`).
    pub read_proportion: f64,
    /// Weight of updates (`updateproportion`).
    pub update_proportion: f64,
    /// Weight of inserts of new records (`insertproportion`).
    pub insert_proportion: f64,
    /// Weight of scans (`scanproportion`).
    pub scan_proportion: f64,
    /// Weight of read-modify-writes (`readmodifywriteproportion`).
    pub read_modify_write_proportion: f64,
    /// How records are picked (`requestdistribution`).
    pub request_distribution: RequestDistribution,
    /// Shortest scan, in records (`minscanlength`).
    pub min_scan_length: u64,
    /// Longest scan, in records (`maxscanlength`).
    pub max_scan_length: u64,
    /// How scan lengths are picked (`scanlengthdistribution`).
    pub scan_length_distribution: ScanLengthDistribution,
}

impl Default for Workload {
    /// `CoreWorkload`'s defaults: 95% reads, 5% updates, uniform, scans of 1 to 1000.
    fn default() -> Workload {
        Workload {
            read_proportion: 0.95,
            update_proportion: 0.05,
            insert_proportion: 0.0,
            scan_proportion: 0.0,
            read_modify_write_proportion: 0.0,
            request_distribution: RequestDistribution::Uniform,
            min_scan_length: 1,
            max_scan_length: 1000,
            scan_length_distribution: ScanLengthDistribution::Uniform,
        }
    }
}

impl Workload {
    /// One of YCSB's core workloads, as its `workloads/workload?` file sets it.
    pub fn preset(preset: Preset) -> Workload {
        let zipfian = Workload {
            read_proportion: 0.0,
            update_proportion: 0.0,
            request_distribution: RequestDistribution::Zipfian,
            ..Workload::default()
        };
        match preset {
            Preset::A => Workload { read_proportion: 0.5, update_proportion: 0.5, ..zipfian },
            Preset::B => Workload { read_proportion: 0.95, update_proportion: 0.05, ..zipfian },
            Preset::C => Workload { read_proportion: 1.0, ..zipfian },
            Preset::D => Workload {
                read_proportion: 0.95,
                insert_proportion: 0.05,
                request_distribution: RequestDistribution::Latest,
                ..zipfian
            },
            Preset::E => Workload {
                scan_proportion: 0.95,
                insert_proportion: 0.05,
                max_scan_length: 100,
                ..zipfian
            },
            Preset::F => {
                Workload { read_proportion: 0.5, read_modify_write_proportion: 0.5, ..zipfian }
            }
        }
    }

    /// The operations with a positive weight, in YCSB's order (read, update, insert, scan,
    /// read-modify-write), each with its weight.
    pub fn weights(&self) -> Vec<(Operation, f64)> {
        [
            (Operation::Read, self.read_proportion),
            (Operation::Update, self.update_proportion),
            (Operation::Insert, self.insert_proportion),
            (Operation::Scan, self.scan_proportion),
            (Operation::ReadModifyWrite, self.read_modify_write_proportion),
        ]
        .into_iter()
        .filter(|(_, w)| *w > 0.0)
        .collect()
    }

    /// Checks the weights and scan lengths.
    ///
    /// # Errors
    /// A message naming the first bad property.
    pub fn validate(&self) -> Result<(), String> {
        let all = [
            ("readproportion", self.read_proportion),
            ("updateproportion", self.update_proportion),
            ("insertproportion", self.insert_proportion),
            ("scanproportion", self.scan_proportion),
            ("readmodifywriteproportion", self.read_modify_write_proportion),
        ];
        if let Some((name, w)) = all.iter().find(|(_, w)| !w.is_finite() || *w < 0.0) {
            return Err(format!("{name} is {w}; proportions are finite and not negative"));
        }
        if self.weights().is_empty() {
            return Err("every operation's proportion is 0: nothing to run".into());
        }
        if self.scan_proportion > 0.0
            && (self.min_scan_length == 0 || self.min_scan_length > self.max_scan_length)
        {
            return Err(format!(
                "scan lengths {}..={} are empty or start at 0 (minscanlength, maxscanlength)",
                self.min_scan_length, self.max_scan_length
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_ycsbs() {
        let w = |p| Workload::preset(p);
        use Operation::*;
        use RequestDistribution::*;
        assert_eq!(w(Preset::A).weights(), [(Read, 0.5), (Update, 0.5)]);
        assert_eq!(w(Preset::B).weights(), [(Read, 0.95), (Update, 0.05)]);
        assert_eq!(w(Preset::C).weights(), [(Read, 1.0)]);
        assert_eq!(w(Preset::D).weights(), [(Read, 0.95), (Insert, 0.05)]);
        assert_eq!(w(Preset::E).weights(), [(Insert, 0.05), (Scan, 0.95)]);
        assert_eq!(w(Preset::F).weights(), [(Read, 0.5), (ReadModifyWrite, 0.5)]);
        for p in Preset::ALL {
            let want = if p == Preset::D { Latest } else { Zipfian };
            assert_eq!(w(p).request_distribution, want, "{p}");
            w(p).validate().unwrap();
        }
        let e = w(Preset::E);
        assert_eq!((e.min_scan_length, e.max_scan_length), (1, 100));
        assert_eq!(e.scan_length_distribution, ScanLengthDistribution::Uniform);
    }

    #[test]
    fn names_parse() {
        assert_eq!("a".parse::<Preset>(), Ok(Preset::A));
        assert_eq!("F".parse::<Preset>(), Ok(Preset::F));
        assert_eq!("workloadc".parse::<Preset>(), Ok(Preset::C));
        assert!("g".parse::<Preset>().unwrap_err().contains("\"g\""));
        assert!("ab".parse::<Preset>().is_err());
        assert_eq!("Zipfian".parse(), Ok(RequestDistribution::Zipfian));
        assert!("hotspot".parse::<RequestDistribution>().unwrap_err().contains("hotspot"));
        assert_eq!("zipfian".parse(), Ok(ScanLengthDistribution::Zipfian));
        for d in [RequestDistribution::Uniform, RequestDistribution::Latest] {
            assert_eq!(d.to_string().parse(), Ok(d));
        }
    }

    #[test]
    fn bad_workloads_are_named() {
        let mut w =
            Workload { read_proportion: 0.0, update_proportion: 0.0, ..Workload::default() };
        assert!(w.validate().unwrap_err().contains("nothing to run"));
        w.read_proportion = -1.0;
        assert!(w.validate().unwrap_err().contains("readproportion"));
        let mut e = Workload::preset(Preset::E);
        e.min_scan_length = 0;
        assert!(e.validate().unwrap_err().contains("minscanlength"));
    }
}
