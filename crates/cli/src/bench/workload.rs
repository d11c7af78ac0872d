//! The benchmarks: what each thread does, with db_bench's meaning for each name.
//!
//! Writes count one operation per entry and move key + value bytes; reads count one
//! operation per lookup (per entry for scans) and move the bytes of what they found.
//! `--duration` turns every benchmark's operation budget into a time budget.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shale_lsm::{Db, ReadOptions, Result, WriteBatch, WriteOptions};

use crate::bench::keys::{KeyGen, KeyOrder, ValueGen, format_key, key};
use crate::bench::report::{Progress, Stats, ThreadStats};
use crate::bench::{Args, async_workload};

/// Entries per batch of `fillbatch` (db_bench's).
pub(crate) const FILLBATCH_ENTRIES: usize = 1000;
/// `fillsync` writes over `--num` divided by this many keys (db_bench's).
const FILLSYNC_DIVISOR: u64 = 1000;
/// Operations between clock checks when `--duration` bounds a benchmark.
const DURATION_CHECK_OPS: u64 = 1000;

/// A benchmark by db_bench's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    FillUniqueRandom,
    Overwrite,
    FillSync,
    FillBatch,
    ReadSeq,
    ReadReverse,
    ReadRandom,
    ReadMissing,
    MultiReadRandom,
    SeekRandom,
    ReadWhileWriting,
    DeleteRandom,
    Stats,
    LevelStats,
    Flush,
    Compact,
    WaitForCompaction,
}

const ALL: [Benchmark; 19] = [
    Benchmark::FillSeq,
    Benchmark::FillRandom,
    Benchmark::FillUniqueRandom,
    Benchmark::Overwrite,
    Benchmark::FillSync,
    Benchmark::FillBatch,
    Benchmark::ReadSeq,
    Benchmark::ReadReverse,
    Benchmark::ReadRandom,
    Benchmark::ReadMissing,
    Benchmark::MultiReadRandom,
    Benchmark::SeekRandom,
    Benchmark::ReadWhileWriting,
    Benchmark::DeleteRandom,
    Benchmark::Stats,
    Benchmark::LevelStats,
    Benchmark::Flush,
    Benchmark::Compact,
    Benchmark::WaitForCompaction,
];

impl Benchmark {
    /// db_bench's name.
    pub fn name(self) -> &'static str {
        use Benchmark::*;
        match self {
            FillSeq => "fillseq",
            FillRandom => "fillrandom",
            FillUniqueRandom => "filluniquerandom",
            Overwrite => "overwrite",
            FillSync => "fillsync",
            FillBatch => "fillbatch",
            ReadSeq => "readseq",
            ReadReverse => "readreverse",
            ReadRandom => "readrandom",
            ReadMissing => "readmissing",
            MultiReadRandom => "multireadrandom",
            SeekRandom => "seekrandom",
            ReadWhileWriting => "readwhilewriting",
            DeleteRandom => "deleterandom",
            Stats => "stats",
            LevelStats => "levelstats",
            Flush => "flush",
            Compact => "compact",
            WaitForCompaction => "waitforcompaction",
        }
    }

    /// Whether it starts from an empty store (db_bench's `fresh_db`).
    pub fn needs_fresh_db(self) -> bool {
        use Benchmark::*;
        matches!(self, FillSeq | FillRandom | FillUniqueRandom | FillSync | FillBatch)
    }

    /// What one operation is, for the histogram's title.
    pub fn op_noun(self) -> &'static str {
        use Benchmark::*;
        match self {
            FillSeq | FillRandom | FillUniqueRandom | Overwrite | FillSync | FillBatch => "write",
            ReadSeq | ReadReverse | ReadRandom | ReadMissing | MultiReadRandom
            | ReadWhileWriting => "read",
            SeekRandom => "seek",
            DeleteRandom => "delete",
            Stats | LevelStats => "stats",
            Flush => "flush",
            Compact | WaitForCompaction => "compaction",
        }
    }
}

/// Parses `--benchmarks`: names separated by commas (empty items are skipped, as db_bench's).
///
/// # Errors
/// The first unknown name.
pub fn parse_benchmarks(list: &str) -> std::result::Result<Vec<Benchmark>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            ALL.iter()
                .copied()
                .find(|b| b.name() == name)
                .ok_or_else(|| format!("unknown benchmark '{name}'"))
        })
        .collect()
}

/// Everything a benchmark's threads share.
pub struct Shared {
    bench: Benchmark,
    num: u64,
    reads: u64,
    /// Writes per thread of a write benchmark (`--writes`, default `--num`).
    writes: u64,
    threads: usize,
    pub(super) key_size: usize,
    pub(super) value_size: usize,
    pub(super) batch_size: usize,
    seed: u64,
    pub(super) write: WriteOptions,
    /// `--async`: puts and gets through the async API (`async_workload`).
    use_async: bool,
    deadline_after: Option<Duration>,
    histogram: bool,
    interval: Option<Duration>,
    pub(super) rate: Option<RateLimiter>,
    /// Reading threads done, so readwhilewriting's writer knows when to stop.
    readers_done: AtomicUsize,
    /// Where the threads count their operations for `--timeline` (`timeline.rs`).
    pub(super) timeline: Option<std::sync::Arc<crate::bench::timeline::Counters>>,
}

impl Shared {
    /// The settings of `bench` from the flags; thread `i` seeds its generators with `seed + i`.
    pub fn new(args: &Args, bench: Benchmark, seed: u64) -> Shared {
        let mut sh = Shared {
            bench,
            num: args.num,
            reads: u64::try_from(args.reads).unwrap_or(args.num),
            // db_bench: `writes_ = FLAGS_writes < 0 ? FLAGS_num : FLAGS_writes`, taken before
            // fillsync divides the key space, and 0 means num again (`DoWrite`).
            writes: u64::try_from(args.writes).ok().filter(|&w| w > 0).unwrap_or(args.num),
            threads: args.threads,
            key_size: args.key_size,
            value_size: args.value_size,
            batch_size: args.batch_size,
            seed,
            write: WriteOptions { sync: args.sync },
            use_async: args.use_async,
            deadline_after: (args.duration > 0).then(|| Duration::from_secs(args.duration)),
            histogram: args.histogram,
            interval: (args.stats_interval_seconds > 0)
                .then(|| Duration::from_secs(args.stats_interval_seconds)),
            rate: (args.benchmark_write_rate_limit > 0)
                .then(|| RateLimiter::new(args.benchmark_write_rate_limit)),
            readers_done: AtomicUsize::new(0),
            timeline: None,
        };
        match bench {
            Benchmark::FillSync => {
                // db_bench 11.8.1: the keys are --num/1000, the writes per thread stay
                // --writes (default --num), each synced.
                sh.num = (sh.num / FILLSYNC_DIVISOR).max(1);
                sh.write.sync = true;
            }
            Benchmark::FillBatch => sh.batch_size = FILLBATCH_ENTRIES,
            Benchmark::Flush | Benchmark::Compact | Benchmark::WaitForCompaction => sh.threads = 1,
            _ => {}
        }
        sh
    }

    /// Threads the benchmark runs, readwhilewriting's writer included.
    pub fn threads_total(&self) -> usize {
        self.threads + usize::from(self.bench == Benchmark::ReadWhileWriting)
    }

    /// Operations each thread is asked for (before `--duration`).
    fn ops_per_thread(&self) -> u64 {
        use Benchmark::*;
        match self.bench {
            ReadSeq | ReadReverse | ReadRandom | ReadMissing | MultiReadRandom | SeekRandom
            | ReadWhileWriting => self.reads,
            Flush | Compact | WaitForCompaction => 1,
            DeleteRandom => self.num,
            _ => self.writes,
        }
    }
}

/// Shares a write rate among threads: each write waits until the bytes granted so far fit
/// the rate since the limiter started.
pub(super) struct RateLimiter {
    bytes_per_second: u64,
    granted: Mutex<(Instant, u64)>,
}

/// Longest single sleep of a write waiting for the rate limiter: the wait is cut into slices
/// this long, so SIGINT or SIGTERM ends it soon (`crate::interrupt`).
const RATE_WAIT_SLICE: Duration = Duration::from_millis(50);

impl RateLimiter {
    fn new(bytes_per_second: u64) -> RateLimiter {
        RateLimiter { bytes_per_second, granted: Mutex::new((Instant::now(), 0)) }
    }

    /// Waits until `bytes` more fit the rate. Returns false, without waiting longer, when
    /// `deadline` (the end of a `--duration` run) comes first or a stop is asked for: the
    /// write must then not be done. A low rate would otherwise hold a 2-second run for as
    /// long as the rate grants one batch (minutes, for a large one).
    pub(super) fn acquire(&self, bytes: u64, deadline: Option<Instant>) -> bool {
        let due = {
            let mut g = self.granted.lock().expect("the rate limiter's lock is never poisoned");
            g.1 += bytes;
            g.0 + Duration::from_secs_f64(g.1 as f64 / self.bytes_per_second as f64)
        };
        loop {
            let now = Instant::now();
            if now >= due {
                return true;
            }
            if deadline.is_some_and(|d| d <= due && now >= d) || crate::interrupt::requested() {
                return false;
            }
            let until = match deadline {
                Some(d) if d < due => d,
                _ => due,
            };
            std::thread::sleep(until.saturating_duration_since(now).min(RATE_WAIT_SLICE));
        }
    }
}

/// When a thread stops: after a number of operations, at a deadline (`--duration`), or when
/// SIGINT or SIGTERM asks for a stop (`crate::interrupt`).
pub(super) struct Budget {
    max_ops: u64,
    deadline: Option<Instant>,
    next_check: u64,
    past_deadline: bool,
}

impl Budget {
    pub(super) fn new(sh: &Shared) -> Budget {
        Budget {
            max_ops: sh.ops_per_thread(),
            deadline: sh.deadline_after.map(|d| Instant::now() + d),
            next_check: 0,
            past_deadline: false,
        }
    }

    /// Whether a thread that has done `ops` operations is done.
    pub(super) fn done(&mut self, ops: u64) -> bool {
        if crate::interrupt::requested() {
            return true;
        }
        let Some(deadline) = self.deadline else { return ops >= self.max_ops };
        if ops >= self.next_check {
            self.next_check = ops + DURATION_CHECK_OPS;
            self.past_deadline = Instant::now() >= deadline;
        }
        self.past_deadline
    }

    /// Entries the next batch of a thread that has done `ops` operations may hold: `batch`,
    /// or fewer where the operation budget ends sooner, so that `--num=1000
    /// --batch_size=100000` writes 1000 entries, not 100000. A `--duration` run counts time,
    /// not operations: its batches stay whole.
    pub(super) fn batch_entries(&self, ops: u64, batch: usize) -> usize {
        if self.deadline.is_some() {
            return batch;
        }
        let left = self.max_ops.saturating_sub(ops);
        usize::try_from(left).map_or(batch, |left| left.min(batch))
    }

    /// Ends the budget now: the rate limiter's wait ran into the deadline.
    pub(super) fn expire(&mut self) {
        self.past_deadline = true;
        self.max_ops = 0;
    }

    /// Waits for the rate limiter, if there is one, to grant `bytes`; false when the budget
    /// ended first (the deadline came, or a stop was asked for): the write must not be done.
    pub(super) fn acquire(&mut self, rate: Option<&RateLimiter>, bytes: u64) -> bool {
        let Some(rate) = rate else { return true };
        let granted = rate.acquire(bytes, self.deadline);
        if !granted {
            self.expire();
        }
        granted
    }
}

/// Runs the benchmark on its threads and merges the stats of those that report (all but
/// readwhilewriting's writer, as db_bench).
///
/// # Errors
/// The first thread's error from the store.
pub fn run(db: &Db, sh: &Shared) -> Result<Stats> {
    let bar = progress_bar(sh);
    let progress = Progress {
        name: sh.bench.name(),
        bar: bar.clone(),
        interval: sh.interval,
        timeline: sh.timeline.clone(),
    };
    let results: Vec<Result<Option<ThreadStats>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sh.threads_total())
            .map(|tid| {
                let progress = progress.clone();
                scope.spawn(move || thread_main(db, sh, tid, progress))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a benchmark thread panicked")).collect()
    });
    bar.finish_and_clear();
    let mut reporting = Vec::new();
    for r in results {
        reporting.extend(r?);
    }
    Ok(Stats::merge(reporting))
}

/// A bar on stderr when it is a terminal; hidden otherwise.
fn progress_bar(sh: &Shared) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match sh.deadline_after {
        Some(_) => ProgressBar::new_spinner(),
        None => ProgressBar::new(sh.ops_per_thread() * sh.threads as u64),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    let style =
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ops {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar.set_message(sh.bench.name());
    bar
}

/// One thread: its part of the benchmark. Returns its stats, or `None` when they are not
/// reported (readwhilewriting's writer).
fn thread_main(
    db: &Db,
    sh: &Shared,
    tid: usize,
    progress: Progress,
) -> Result<Option<ThreadStats>> {
    use Benchmark::*;
    let seed = sh.seed.wrapping_add(tid as u64);
    let mut st = ThreadStats::new(tid, sh.histogram, progress);
    let random = || KeyGen::new(KeyOrder::Random, sh.num, seed);
    let result = match sh.bench {
        FillSeq | FillBatch => write(
            db,
            sh,
            &mut st,
            KeyGen::new(KeyOrder::Sequential { next: 0 }, sh.num, seed),
            seed,
        ),
        FillRandom | Overwrite | FillSync => write(db, sh, &mut st, random(), seed),
        FillUniqueRandom => {
            let order = KeyOrder::Unique { order: Vec::new(), next: 0 };
            write(db, sh, &mut st, KeyGen::new(order, sh.num, seed), seed)
        }
        ReadSeq => read_seq(db, sh, &mut st, false),
        ReadReverse => read_seq(db, sh, &mut st, true),
        ReadRandom if sh.use_async => {
            async_workload::read_random(db, sh, &mut st, random(), sh.key_size)
        }
        ReadRandom => read_random(db, sh, &mut st, random(), sh.key_size, 1),
        // As db_bench: a key one byte longer than every stored key is never found.
        ReadMissing if sh.use_async => {
            async_workload::read_random(db, sh, &mut st, random(), sh.key_size + 1)
        }
        ReadMissing => read_random(db, sh, &mut st, random(), sh.key_size + 1, 1),
        MultiReadRandom => multi_read_random(db, sh, &mut st, random(), sh.batch_size),
        SeekRandom => seek_random(db, sh, &mut st, random()),
        ReadWhileWriting if tid == sh.threads => {
            let r = write_until_readers_done(db, sh, &mut st, random(), seed);
            st.stop();
            return r.map(|()| None);
        }
        ReadWhileWriting => {
            let r = read_random(db, sh, &mut st, random(), sh.key_size, 1);
            sh.readers_done.fetch_add(1, Ordering::SeqCst);
            r
        }
        DeleteRandom => delete_random(db, sh, &mut st, random()),
        Flush => db.flush().map(|()| st.finished_ops(1, 0)),
        Compact => db.compact_range().map(|()| st.finished_ops(1, 0)),
        WaitForCompaction => wait_for_compaction(db).map(|()| st.finished_ops(1, 0)),
        Stats | LevelStats => Ok(()),
    };
    st.stop();
    result.map(|()| Some(st))
}

/// Puts `--batch_size` entries per write until the budget is spent.
fn write(db: &Db, sh: &Shared, st: &mut ThreadStats, mut keys: KeyGen, seed: u64) -> Result<()> {
    if sh.use_async {
        return async_workload::write(db, sh, st, keys, seed);
    }
    let mut values = ValueGen::new(sh.value_size, seed ^ 0x5eed);
    let mut k = vec![0; sh.key_size];
    let mut budget = Budget::new(sh);
    while !budget.done(st.ops()) {
        let entries = budget.batch_entries(st.ops(), sh.batch_size);
        let mut batch = WriteBatch::new();
        for _ in 0..entries {
            format_key(keys.next_number(), &mut k);
            batch.put(&k, values.next_value());
        }
        let bytes = (entries * (sh.key_size + sh.value_size)) as u64;
        if !budget.acquire(sh.rate.as_ref(), bytes) {
            break;
        }
        db.write(&batch, &sh.write)?;
        st.finished_ops(entries as u64, bytes);
    }
    Ok(())
}

/// readwhilewriting's writer: random puts, one at a time, until every reader is done.
fn write_until_readers_done(
    db: &Db,
    sh: &Shared,
    st: &mut ThreadStats,
    mut keys: KeyGen,
    seed: u64,
) -> Result<()> {
    let mut values = ValueGen::new(sh.value_size, seed ^ 0x5eed);
    let mut k = vec![0; sh.key_size];
    // Its readers stop by their own budgets; this budget only lends the writer the run's
    // deadline and the stop on SIGINT or SIGTERM for the rate limiter's wait.
    let mut budget = Budget::new(sh);
    while sh.readers_done.load(Ordering::SeqCst) < sh.threads && !crate::interrupt::requested() {
        format_key(keys.next_number(), &mut k);
        let mut batch = WriteBatch::new();
        batch.put(&k, values.next_value());
        if !budget.acquire(sh.rate.as_ref(), (sh.key_size + sh.value_size) as u64) {
            break;
        }
        db.write(&batch, &sh.write)?;
        st.finished_ops(1, (sh.key_size + sh.value_size) as u64);
    }
    Ok(())
}

/// Gets `per_op` random keys of `key_size` bytes per operation, counting each key as one.
fn read_random(
    db: &Db,
    sh: &Shared,
    st: &mut ThreadStats,
    mut keys: KeyGen,
    key_size: usize,
    per_op: usize,
) -> Result<()> {
    let mut k = vec![0; key_size];
    let mut budget = Budget::new(sh);
    while !budget.done(st.ops()) {
        let (mut found, mut bytes) = (0, 0);
        for _ in 0..per_op {
            format_key(keys.next_number(), &mut k);
            if let Some(v) = db.get(&k)? {
                found += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        st.looked_up(per_op as u64, found);
        st.finished_ops(per_op as u64, bytes);
    }
    Ok(())
}

/// `--batch_size` random keys per [`Db::multi_get`], one operation per key (db_bench's
/// multireadrandom).
fn multi_read_random(
    db: &Db,
    sh: &Shared,
    st: &mut ThreadStats,
    mut keys: KeyGen,
    per_op: usize,
) -> Result<()> {
    let mut batch = vec![vec![0; sh.key_size]; per_op];
    let mut budget = Budget::new(sh);
    let opts = ReadOptions::default();
    while !budget.done(st.ops()) {
        let per_op = budget.batch_entries(st.ops(), per_op);
        for k in &mut batch[..per_op] {
            format_key(keys.next_number(), k);
        }
        let refs: Vec<&[u8]> = batch[..per_op].iter().map(Vec::as_slice).collect();
        let (mut found, mut bytes) = (0, 0);
        for (k, v) in batch.iter().zip(db.multi_get(&refs, &opts)?) {
            if let Some(v) = v {
                found += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        st.looked_up(per_op as u64, found);
        st.finished_ops(per_op as u64, bytes);
    }
    Ok(())
}

/// Scans forward from the first key (or back from the last), one operation per entry.
fn read_seq(db: &Db, sh: &Shared, st: &mut ThreadStats, reverse: bool) -> Result<()> {
    let mut it = db.iter(&ReadOptions::default());
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let mut budget = Budget::new(sh);
    while it.valid() && !budget.done(st.ops()) {
        st.finished_ops(1, (it.key().len() + it.value().len()) as u64);
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()
}

/// Seeks one iterator to random keys; found when it lands on the key itself.
fn seek_random(db: &Db, sh: &Shared, st: &mut ThreadStats, mut keys: KeyGen) -> Result<()> {
    let mut it = db.iter(&ReadOptions::default());
    let mut k = vec![0; sh.key_size];
    let mut budget = Budget::new(sh);
    while !budget.done(st.ops()) {
        format_key(keys.next_number(), &mut k);
        it.seek(&k);
        let mut bytes = 0;
        if it.valid() {
            bytes = (it.key().len() + it.value().len()) as u64;
        }
        st.looked_up(1, u64::from(it.valid() && it.key() == k.as_slice()));
        st.finished_ops(1, bytes);
    }
    it.status()
}

/// Deletes random keys, `--batch_size` per write.
fn delete_random(db: &Db, sh: &Shared, st: &mut ThreadStats, mut keys: KeyGen) -> Result<()> {
    let mut budget = Budget::new(sh);
    while !budget.done(st.ops()) {
        let entries = budget.batch_entries(st.ops(), sh.batch_size);
        let mut batch = WriteBatch::new();
        for _ in 0..entries {
            batch.delete(&key(keys.next_number(), sh.key_size));
        }
        db.write(&batch, &sh.write)?;
        st.finished_ops(entries as u64, 0);
    }
    Ok(())
}

/// Flushes, then waits until no flush or compaction is pending.
fn wait_for_compaction(db: &Db) -> Result<()> {
    db.flush()?;
    db.wait_for_compaction()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_named() {
        let all: Vec<&str> = ALL.iter().map(|b| b.name()).collect();
        assert_eq!(parse_benchmarks(&all.join(",")).unwrap(), ALL.to_vec());
        assert_eq!(
            parse_benchmarks("fillseq,,readseq,").unwrap(),
            [Benchmark::FillSeq, Benchmark::ReadSeq]
        );
        assert_eq!(
            parse_benchmarks("fillseq,readfast").unwrap_err(),
            "unknown benchmark 'readfast'"
        );
    }

    #[test]
    fn budgets_end_after_their_ops() {
        let args = crate::bench::parse_args(["--num=10", "--reads=3"]).unwrap();
        let fill = Shared::new(&args, Benchmark::FillRandom, 0);
        let read = Shared::new(&args, Benchmark::ReadRandom, 0);
        let sync = Shared::new(&args, Benchmark::FillSync, 0);
        assert_eq!(
            (fill.ops_per_thread(), read.ops_per_thread(), sync.ops_per_thread()),
            (10, 3, 10)
        );
        assert!(sync.write.sync);
        // fillsync: --num/1000 keys (at least one), --writes writes per thread, as db_bench.
        let args = crate::bench::parse_args(["--num=5000", "--writes=7"]).unwrap();
        let sync = Shared::new(&args, Benchmark::FillSync, 0);
        assert_eq!((sync.num, sync.ops_per_thread()), (5, 7));
        assert_eq!(Shared::new(&args, Benchmark::Overwrite, 0).ops_per_thread(), 7);
        let mut b = Budget::new(&read);
        assert!(!b.done(2) && b.done(3));
        let rww = Shared::new(&args, Benchmark::ReadWhileWriting, 0);
        assert_eq!(rww.threads_total(), 2);
    }
}
