//! Every core workload, loaded and run on an in-memory engine: the counts, the statuses, the
//! records the engine ends with, and engine errors surfacing in the report.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ycsb::record::decode_fields;
use ycsb::{Config, Engine, EngineResult, KeyFormat, Operation, Preset, Report};

/// A BTreeMap behind a mutex, counting the calls it gets.
#[derive(Default)]
struct Memory {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    reads: AtomicU64,
    writes: AtomicU64,
    scanned: AtomicU64,
}

impl Engine for Memory {
    fn name(&self) -> &str {
        "memory"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.map.lock().unwrap().insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.map.lock().unwrap().get(key).cloned())
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.insert(key, value)
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let map = self.map.lock().unwrap();
        // Copy each value out, as a client would.
        let values: Vec<Vec<u8>> =
            map.range(start_key.to_vec()..).take(count).map(|(_, v)| v.clone()).collect();
        let n = values.len();
        self.scanned.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn config(preset: Preset, threads: usize) -> Config {
    let mut c = Config::new(preset);
    c.record_count = 500;
    c.operation_count = 2000;
    c.threads = threads;
    c.layout.field_count = 4;
    c.layout.field_length = 20;
    c.seed = 42;
    c
}

fn count(r: &Report, op: Operation) -> u64 {
    r.op(op).map_or(0, |o| o.count())
}

#[test]
fn load_inserts_every_record_once() {
    let engine = Memory::default();
    let c = config(Preset::A, 3);
    let report = ycsb::load(&engine, &c).unwrap();
    assert_eq!((report.operations, count(&report, Operation::Insert)), (500, 500));
    assert_eq!(report.op(Operation::Insert).unwrap().ok, 500);
    let map = engine.map.lock().unwrap();
    assert_eq!(map.len(), 500);
    for n in 0..500 {
        let rec =
            map.get(KeyFormat::default().key(n).as_bytes()).unwrap_or_else(|| panic!("record {n}"));
        assert_eq!(rec.len(), c.layout.record_bytes());
        assert_eq!(decode_fields(rec).unwrap().len(), 4);
    }
    assert!(report.errors.is_empty());
    let text = report.to_string();
    assert!(text.contains("[INSERT], Operations, 500\n"), "{text}");
    assert!(text.contains("[INSERT], Return=OK, 500\n"), "{text}");
}

#[test]
fn every_workload_runs_its_mix() {
    for preset in Preset::ALL {
        let engine = Memory::default();
        let c = config(preset, 2);
        ycsb::load(&engine, &c).unwrap();
        let r = ycsb::run(&engine, &c).unwrap();
        let text = r.to_string();
        assert_eq!(r.operations, 2000, "{preset}");
        assert!(r.errors.is_empty() && r.error_count() == 0, "{preset}: {:?}", r.errors);
        // Nothing reads a record that was not inserted.
        assert!(!text.contains("NOT_FOUND"), "{preset}:\n{text}");
        let (reads, updates, inserts, scans, rmws) = (
            count(&r, Operation::Read),
            count(&r, Operation::Update),
            count(&r, Operation::Insert),
            count(&r, Operation::Scan),
            count(&r, Operation::ReadModifyWrite),
        );
        let near = |n: u64, share: f64| (n as f64 - 2000.0 * share).abs() < 150.0;
        match preset {
            Preset::A => assert!(near(reads, 0.5) && near(updates, 0.5) && reads + updates == 2000),
            Preset::B => assert!(near(reads, 0.95) && near(updates, 0.05)),
            Preset::C => assert_eq!(reads, 2000),
            Preset::D => {
                assert!(near(reads, 0.95) && near(inserts, 0.05) && reads + inserts == 2000)
            }
            Preset::E => {
                assert!(near(scans, 0.95) && near(inserts, 0.05) && scans + inserts == 2000)
            }
            // A read-modify-write also counts as one read and one update, as in YCSB.
            Preset::F => assert!(near(rmws, 0.5) && reads == 2000 && updates == rmws),
        }
        let records = engine.map.lock().unwrap().len() as u64;
        assert_eq!(records, 500 + inserts, "{preset}");
        for line in ["[OVERALL], RunTime(ms), ", "[OVERALL], Throughput(ops/sec), "] {
            assert!(text.contains(line), "{preset}:\n{text}");
        }
        if preset == Preset::E {
            assert!(text.contains("[SCAN], 99.9PercentileLatency(us), "), "{text}");
            // Uniform scan lengths of 1 to 100 from zipfian start keys: about 50 records each,
            // fewer near the end of the key space.
            let per_scan = engine.scanned.load(Ordering::Relaxed) as f64 / scans as f64;
            assert!((25.0..=51.0).contains(&per_scan), "{per_scan}");
        }
    }
}

#[test]
fn updates_read_then_write_one_field_unless_write_all_fields() {
    let engine = Memory::default();
    let mut c = config(Preset::A, 1);
    ycsb::load(&engine, &c).unwrap();
    let (reads0, writes0) =
        (engine.reads.load(Ordering::Relaxed), engine.writes.load(Ordering::Relaxed));
    let r = ycsb::run(&engine, &c).unwrap();
    let (reads, updates) = (count(&r, Operation::Read), count(&r, Operation::Update));
    assert_eq!(engine.reads.load(Ordering::Relaxed) - reads0, reads + updates);
    assert_eq!(engine.writes.load(Ordering::Relaxed) - writes0, updates);

    c.write_all_fields = true;
    let (reads0, writes0) =
        (engine.reads.load(Ordering::Relaxed), engine.writes.load(Ordering::Relaxed));
    let r = ycsb::run(&engine, &c).unwrap();
    let (reads, updates) = (count(&r, Operation::Read), count(&r, Operation::Update));
    assert_eq!(engine.reads.load(Ordering::Relaxed) - reads0, reads);
    assert_eq!(engine.writes.load(Ordering::Relaxed) - writes0, updates);
    // Every record keeps its shape.
    for rec in engine.map.lock().unwrap().values() {
        assert_eq!(rec.len(), c.layout.record_bytes());
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let run = |seed| {
        let engine = Memory::default();
        let mut c = config(Preset::D, 1);
        c.seed = seed;
        ycsb::load(&engine, &c).unwrap();
        let r = ycsb::run(&engine, &c).unwrap();
        (count(&r, Operation::Insert), engine.map.into_inner().unwrap())
    };
    let (a, b, other) = (run(7), run(7), run(8));
    assert_eq!(a, b);
    assert_ne!(a.1, other.1);
}

#[test]
fn progress_reaches_the_total() {
    let engine = Memory::default();
    let c = config(Preset::C, 3);
    let seen = AtomicU64::new(0);
    ycsb::load_with_progress(&engine, &c, &|n| {
        seen.fetch_max(n, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(seen.load(Ordering::Relaxed), 500);
    ycsb::run_with_progress(&engine, &c, &|n| {
        seen.fetch_max(n, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(seen.load(Ordering::Relaxed), 2000);
}

#[test]
fn a_stop_flag_ends_a_phase_and_the_report_counts_what_was_done() {
    let engine = Memory::default();
    let mut c = config(Preset::C, 1);
    c.record_count = 2000;
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Set from the progress callback: the thread stops before its next operation.
    let report = ycsb::load_watched(
        &engine,
        &c,
        &|n| {
            if n >= ycsb::PROGRESS_EVERY_OPS {
                stop.store(true, Ordering::Relaxed);
            }
        },
        Some(&stop),
    )
    .unwrap();
    assert_eq!(report.operations, ycsb::PROGRESS_EVERY_OPS);
    assert_eq!(engine.writes.load(Ordering::Relaxed), ycsb::PROGRESS_EVERY_OPS);
    let report = ycsb::run_watched(&engine, &c, &|_| {}, Some(&stop)).unwrap();
    assert_eq!(report.operations, 0, "stopped before the first operation");
}

/// Fails every tenth call to each method.
#[derive(Default)]
struct Flaky {
    inner: Memory,
    calls: AtomicU64,
}

impl Flaky {
    fn fail(&self) -> EngineResult<()> {
        if self.calls.fetch_add(1, Ordering::Relaxed) % 10 == 9 {
            return Err("injected failure".into());
        }
        Ok(())
    }
}

impl Engine for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.fail()?;
        self.inner.insert(key, value)
    }
    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        self.fail()?;
        self.inner.read(key)
    }
    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.fail()?;
        self.inner.update(key, value)
    }
    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        self.fail()?;
        self.inner.scan(start_key, count)
    }
}

#[test]
fn engine_errors_are_counted_and_kept() {
    let engine = Flaky::default();
    let c = config(Preset::A, 2);
    let load = ycsb::load(&engine, &c).unwrap();
    let insert = load.op(Operation::Insert).unwrap();
    assert_eq!((insert.ok, insert.error), (450, 50));
    assert_eq!(load.errors.len(), ycsb::ERRORS_KEPT);
    assert!(load.errors[0].starts_with("INSERT user"), "{:?}", load.errors);
    assert!(load.errors[0].ends_with(": injected failure"), "{:?}", load.errors);
    let text = load.to_string();
    assert!(text.contains("[INSERT], Return=ERROR, 50\n"), "{text}");
    assert!(text.contains("[INSERT-FAILED], Operations, 50\n"), "{text}");

    // Records that failed to load are NOT_FOUND in the run; failed calls are ERROR.
    let run = ycsb::run(&engine, &c).unwrap();
    assert_eq!(run.operations, 2000);
    assert!(run.error_count() > 0);
    let text = run.to_string();
    assert!(text.contains("[READ], Return=ERROR, "), "{text}");
    assert!(text.contains("[READ], Return=NOT_FOUND, "), "{text}");
}

#[test]
fn bad_configurations_are_refused() {
    let engine = Memory::default();
    let mut c = config(Preset::A, 0);
    assert!(ycsb::load(&engine, &c).unwrap_err().to_string().contains("threads"));
    c.threads = 1;
    c.record_count = 0;
    assert!(ycsb::run(&engine, &c).unwrap_err().to_string().contains("recordcount"));
}
