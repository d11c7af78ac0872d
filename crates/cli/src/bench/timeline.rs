//! `shale bench --timeline FILE.csv`: one row per second of each benchmark, its operations and
//! the p99 latency of its writes, then the store's own columns
//! ([`shale_lsm::timeline::HEADER`]: threads, batch, memtables, L0 files, pending compaction
//! bytes, stalls by kind, the tuner's last answer), so that a chart shows a stall and what
//! the tuner did about it on one time axis (ADOC's figures).
//!
//! The benchmark threads count their operations and put each one's latency into a shared
//! histogram of atomic buckets ([`Counters`]); a sampler thread empties both every second and
//! writes the row. Seconds run on across the benchmarks of one `shale bench`.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use shale_lsm::Db;
use shale_lsm::timeline::{HEADER, TimelineRow};

/// Sub-buckets per power of two: latencies are kept to within a quarter of their value.
const SUB_BUCKETS: usize = 4;
/// Buckets: 4 exact ones below 4 ns, then 4 per power of two up to 2^64.
const BUCKETS: usize = SUB_BUCKETS + 62 * SUB_BUCKETS;

/// What the benchmark threads report to the sampler.
pub struct Counters {
    ops: AtomicU64,
    buckets: Vec<AtomicU64>,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            ops: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// The bucket of a latency of `nanos`.
fn bucket(nanos: u64) -> usize {
    if nanos < SUB_BUCKETS as u64 {
        return nanos as usize;
    }
    let top = 63 - nanos.leading_zeros() as usize; // at least 2
    let sub = ((nanos >> (top - 2)) & 3) as usize;
    SUB_BUCKETS + (top - 2) * SUB_BUCKETS + sub
}

/// The largest latency bucket `i` holds.
fn bucket_upper(i: usize) -> u64 {
    if i < SUB_BUCKETS {
        return i as u64;
    }
    let top = (i - SUB_BUCKETS) / SUB_BUCKETS + 2;
    let sub = ((i - SUB_BUCKETS) % SUB_BUCKETS) as u64;
    let lower = (1u64 << top) | (sub << (top - 2));
    lower.saturating_add((1u64 << (top - 2)) - 1)
}

impl Counters {
    /// Counts `n` operations that took `nanos` together (a batch's latency is its ops').
    pub fn record(&self, n: u64, nanos: u64) {
        self.ops.fetch_add(n, Ordering::Relaxed);
        let per = nanos / n.max(1);
        self.buckets[bucket(per)].fetch_add(n, Ordering::Relaxed);
    }

    /// Empties the counters: the operations since the last call and their p99 latency in
    /// microseconds (`None` without operations).
    fn take(&self) -> (u64, Option<f64>) {
        let ops = self.ops.swap(0, Ordering::Relaxed);
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.swap(0, Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return (ops, None);
        }
        let rank = (total * 99).div_ceil(100);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return (ops, Some(bucket_upper(i) as f64 / 1000.0));
            }
        }
        (ops, None)
    }
}

/// The CSV file and the clock the seconds count from.
pub struct Timeline {
    file: Mutex<std::io::BufWriter<std::fs::File>>,
    started: Instant,
    /// Whole seconds written so far.
    seconds: AtomicU64,
}

impl Timeline {
    /// Creates `path` (replacing it) and writes the header.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(path: &Path) -> std::io::Result<Timeline> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let engine = HEADER.strip_prefix("second,").expect("the engine's header starts so");
        writeln!(file, "second,ops,p99_write_us,{engine}")?;
        file.flush()?;
        Ok(Timeline { file: Mutex::new(file), started: Instant::now(), seconds: AtomicU64::new(0) })
    }

    /// Runs `work` while a sampler thread writes a row for every second of it (and one for
    /// the last part of a second); `counters` is what `work` reports its operations to.
    pub fn record<T>(&self, db: &Db, counters: &Counters, work: impl FnOnce() -> T) -> T {
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let sampler = scope.spawn(|| self.sample(db, counters, &done));
            let out = work();
            done.store(true, Ordering::Relaxed);
            if let Err(e) = sampler.join().expect("the timeline sampler panicked") {
                eprintln!("shale bench: the timeline could not be written: {e}");
            }
            out
        })
    }

    fn sample(&self, db: &Db, counters: &Counters, done: &AtomicBool) -> std::io::Result<()> {
        let mut before = db.stats();
        counters.take();
        loop {
            let second = self.seconds.load(Ordering::Relaxed) + 1;
            let due = self.started + Duration::from_secs(second);
            while Instant::now() < due && !done.load(Ordering::Relaxed) {
                std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
            }
            let last = done.load(Ordering::Relaxed);
            let now = db.stats();
            let (ops, p99) = counters.take();
            let row = TimelineRow::between(second, &before, &now);
            let p99 = p99.map_or(String::new(), |v| format!("{v:.1}"));
            {
                let mut f = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                writeln!(
                    f,
                    "{second},{ops},{p99},{}",
                    row.csv_fields().split_once(',').map_or("", |(_, r)| r)
                )?;
                f.flush()?;
            }
            self.seconds.store(second, Ordering::Relaxed);
            before = now;
            if last {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_within_a_quarter() {
        for v in [0u64, 1, 3, 4, 5, 7, 8, 100, 1_000, 12_345, 1 << 40, u64::MAX / 3] {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v}");
            let upper = bucket_upper(i);
            assert!(upper >= v, "{v}: upper {upper}");
            assert!(upper as f64 <= (v as f64) * 1.25 + 1.0, "{v}: upper {upper}");
        }
    }

    #[test]
    fn p99_of_a_second() {
        let c = Counters::default();
        for _ in 0..990 {
            c.record(1, 10_000);
        }
        c.record(10, 10_000_000);
        let (ops, p99) = c.take();
        assert_eq!(ops, 1000);
        let p99 = p99.unwrap();
        assert!((10.0..=12.5).contains(&p99), "{p99}");
        assert_eq!(c.take(), (0, None), "emptied");
    }
}
