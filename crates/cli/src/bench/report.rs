//! What `shale bench` prints: db_bench's header, result lines, percentile blocks, progress, and
//! the store's statistics.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use indicatif::ProgressBar;

use crate::bench::Args;
use crate::bench::config::DbPlan;
use crate::bench::histogram::Histogram;
use crate::bench::keys::COMPRESSION_RATIO;

/// Bytes in db_bench's MB.
const MB: f64 = 1_048_576.0;
/// Operations between updates of the progress bar, so threads rarely touch it.
const BAR_UPDATE_OPS: u64 = 1024;

/// Where a thread's periodic progress goes: the bar, and `--stats_interval_seconds` lines.
#[derive(Clone)]
pub struct Progress {
    /// The benchmark's name, for interval lines.
    pub name: &'static str,
    /// Shared by all threads; hidden when stderr is no terminal.
    pub bar: ProgressBar,
    /// How often to print an interval line; `None` for never.
    pub interval: Option<Duration>,
    /// Where operations and their latencies go for `--timeline`.
    pub timeline: Option<std::sync::Arc<crate::bench::timeline::Counters>>,
}

impl Progress {
    fn line(&self, text: String) {
        if self.bar.is_hidden() {
            errln!("{text}");
        } else {
            self.bar.println(text);
        }
    }
}

/// One thread's counts and times.
pub struct ThreadStats {
    tid: usize,
    start: Instant,
    finish: Instant,
    last_op: Instant,
    ops: u64,
    bytes: u64,
    found: u64,
    looked_up: u64,
    hist: Option<Histogram>,
    progress: Progress,
    bar_pending: u64,
    interval_start: Instant,
    interval_ops: u64,
}

impl ThreadStats {
    /// Starts counting now; with `histogram`, each [`ThreadStats::finished_ops`] call is timed.
    pub fn new(tid: usize, histogram: bool, progress: Progress) -> ThreadStats {
        let now = Instant::now();
        ThreadStats {
            tid,
            start: now,
            finish: now,
            last_op: now,
            ops: 0,
            bytes: 0,
            found: 0,
            looked_up: 0,
            hist: histogram.then(Histogram::default),
            progress,
            bar_pending: 0,
            interval_start: now,
            interval_ops: 0,
        }
    }

    /// Counts `n` operations that moved `bytes` bytes, done since the last call: as
    /// db_bench's `FinishedOps`, their latency is the time since the last call, which for a
    /// synchronous client is from its submission to its completion (plus making its keys and
    /// values, and a rate limiter's wait, as db_bench counts them).
    pub fn finished_ops(&mut self, n: u64, bytes: u64) {
        let took = (self.hist.is_some() || self.progress.timeline.is_some()).then(|| {
            let now = Instant::now();
            let took = now.duration_since(self.last_op).as_nanos() as u64;
            self.last_op = now;
            took
        });
        self.count(n, bytes, took);
    }

    /// Counts `n` operations that moved `bytes` bytes and took `latency` from their
    /// submission to their completion: the async API's tickets, several in flight at once.
    pub fn finished_ops_after(&mut self, n: u64, bytes: u64, latency: Duration) {
        self.count(n, bytes, Some(latency.as_nanos() as u64));
    }

    fn count(&mut self, n: u64, bytes: u64, took: Option<u64>) {
        self.ops += n;
        self.bytes += bytes;
        if let Some(took) = took {
            if let Some(h) = &mut self.hist {
                h.record(took);
            }
            if let Some(t) = &self.progress.timeline {
                t.record(n, took);
            }
        }
        self.bar_pending += n;
        if self.bar_pending >= BAR_UPDATE_OPS {
            self.progress.bar.inc(self.bar_pending);
            self.bar_pending = 0;
        }
        if let Some(every) = self.progress.interval {
            self.maybe_report_interval(every);
        }
    }

    /// Counts lookups, of which `found` found their key.
    pub fn looked_up(&mut self, n: u64, found: u64) {
        self.looked_up += n;
        self.found += found;
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    fn maybe_report_interval(&mut self, every: Duration) {
        let now = Instant::now();
        let interval = now.duration_since(self.interval_start);
        if interval < every {
            return;
        }
        let total = now.duration_since(self.start).as_secs_f64();
        let n = self.ops - self.interval_ops;
        self.progress.line(format!(
            "{}: thread {}: ({},{}) ops and ({:.1},{:.1}) ops/second in ({:.6},{:.6}) seconds",
            self.progress.name,
            self.tid,
            n,
            self.ops,
            n as f64 / interval.as_secs_f64(),
            self.ops as f64 / total,
            interval.as_secs_f64(),
            total,
        ));
        self.interval_start = now;
        self.interval_ops = self.ops;
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.progress.bar.inc(self.bar_pending);
        self.bar_pending = 0;
    }
}

/// A benchmark's counts over all its (reporting) threads.
pub struct Stats {
    ops: u64,
    bytes: u64,
    found: u64,
    looked_up: u64,
    /// Sum of each thread's running time, in seconds.
    thread_seconds: f64,
    start: Option<Instant>,
    finish: Option<Instant>,
    hist: Option<Histogram>,
}

impl Stats {
    /// Operations of every thread.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Merges threads' stats.
    pub fn merge(threads: impl IntoIterator<Item = ThreadStats>) -> Stats {
        let mut s = Stats {
            ops: 0,
            bytes: 0,
            found: 0,
            looked_up: 0,
            thread_seconds: 0.0,
            start: None,
            finish: None,
            hist: None,
        };
        for t in threads {
            s.ops += t.ops;
            s.bytes += t.bytes;
            s.found += t.found;
            s.looked_up += t.looked_up;
            s.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
            s.start = Some(s.start.map_or(t.start, |x| x.min(t.start)));
            s.finish = Some(s.finish.map_or(t.finish, |x| x.max(t.finish)));
            if let Some(h) = &t.hist {
                s.hist.get_or_insert_with(Histogram::default).merge(h);
            }
        }
        s
    }
}

/// One result line, in db_bench's format:
/// `%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %ld operations;` then, separated by a
/// space, `%6.1f MB/s` when bytes moved and a message such as `(N of M found)`.
pub fn format_result_line(
    name: &str,
    thread_seconds: f64,
    elapsed_seconds: f64,
    ops: u64,
    bytes: u64,
    message: Option<&str>,
) -> String {
    // As db_bench: pretend one operation was done, and never divide by a zero time.
    let ops = ops.max(1);
    let elapsed = elapsed_seconds.max(1e-9);
    let mut extra = String::new();
    if bytes > 0 {
        extra = format!("{:6.1} MB/s", bytes as f64 / MB / elapsed);
    }
    if let Some(m) = message {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(m);
    }
    format!(
        "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
        name,
        thread_seconds * 1e6 / ops as f64,
        (ops as f64 / elapsed) as i64,
        elapsed,
        ops,
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// Prints a benchmark's result line; `wall` stands in when no thread ran.
pub fn print_result(name: &str, stats: &Stats, wall: Duration) {
    let elapsed = match (stats.start, stats.finish) {
        (Some(s), Some(f)) => f.duration_since(s).as_secs_f64(),
        _ => wall.as_secs_f64(),
    };
    let message =
        (stats.looked_up > 0).then(|| format!("({} of {} found)", stats.found, stats.looked_up));
    outln!(
        "{}",
        format_result_line(
            name,
            stats.thread_seconds,
            elapsed,
            stats.ops,
            stats.bytes,
            message.as_deref()
        )
    );
}

/// Prints db_bench's percentile block for a benchmark run with `--histogram`, then the tail
/// line every suite prints (`ycsb::latency`: `fillrandom   write latency micros : p50 ...`),
/// unless no operation was timed.
pub fn print_histogram(name: &str, op_noun: &str, stats: &Stats) {
    let empty = Histogram::default();
    let h = stats.hist.as_ref().unwrap_or(&empty);
    outln!("Microseconds per {op_noun}:\n{}", h.to_db_bench_string());
    if let Some(t) = h.tail() {
        outln!("{}", t.line(name, op_noun));
    }
}

/// The header's memory limit: what the store will read at open, and what it bounds.
fn memory_limit_line(o: &shale_lsm::Options) -> String {
    let source = match o.memory_limit {
        shale_lsm::MemoryLimit::Host => "the host's: memory cgroup within RAM",
        shale_lsm::MemoryLimit::Bytes(_) => "--memory_limit",
        shale_lsm::MemoryLimit::Unlimited => return "none (--memory_limit=none)".into(),
    };
    let limit = o.memory_limit.resolve();
    let write_buffer = o.write_buffer_within(limit);
    match limit {
        Some(b) if write_buffer < o.write_buffer_bytes => format!(
            "{:.1} MB ({source}; cache, memtables and WAL tail kept within half: write buffer \
             {:.1} MB, lowered from {:.1} MB)",
            b as f64 / MB,
            write_buffer as f64 / MB,
            o.write_buffer_bytes as f64 / MB
        ),
        Some(b) => format!(
            "{:.1} MB ({source}; the tuner's batch keeps cache, memtables and WAL tail within half)",
            b as f64 / MB
        ),
        None => format!("none ({source})"),
    }
}

/// Prints db_bench's header block, describing the run before the first benchmark.
pub fn print_header(args: &Args, plan: &DbPlan, path: &Path) {
    let (cpu_count, cpu_model, cpu_cache) = cpu_info();
    let entry_bytes = |value: f64| (args.key_size as f64 + value) * args.num as f64 / MB;
    let compressed = (args.value_size as f64 * COMPRESSION_RATIO) as u64;
    outln!("shale:      version {}", env!("CARGO_PKG_VERSION"));
    outln!("Date:       {}", utc_now());
    outln!("CPU:        {cpu_count} * {cpu_model}");
    outln!("CPUCache:   {cpu_cache}");
    outln!("Keys:       {} bytes each (+ 0 bytes user-defined timestamp)", args.key_size);
    outln!("Values:     {} bytes each ({compressed} bytes after compression)", args.value_size);
    outln!("Entries:    {}", args.num);
    outln!("RawSize:    {:.1} MB (estimated)", entry_bytes(args.value_size as f64));
    outln!(
        "FileSize:   {:.1} MB (estimated)",
        entry_bytes(args.value_size as f64 * COMPRESSION_RATIO)
    );
    outln!("Write rate: {} bytes/second", args.benchmark_write_rate_limit);
    outln!("Compression: {}", plan.compression_name);
    let reads = if plan.options.use_direct_reads { "direct (O_DIRECT)" } else { "page cache" };
    outln!("SST reads:  {reads}");
    let writes = if plan.options.writes_ssts_through_page_cache(path) {
        "page cache (synced before commit)"
    } else if plan.options.use_direct_io_for_flush_and_compaction {
        "direct (O_DIRECT)"
    } else if plan.options.use_direct_reads {
        "direct (O_DIRECT: a block device)"
    } else {
        "direct (O_DIRECT: a block device), then read into the page cache"
    };
    outln!("SST writes: {writes}");
    let index_and_filter = if plan.options.cache_index_and_filter_blocks {
        "in the block cache (cache_index_and_filter_blocks=true)"
    } else {
        "held by SST readers, outside the block cache (cache_index_and_filter_blocks=false)"
    };
    outln!("Index and filter blocks: {index_and_filter}");
    outln!("Memory limit: {}", memory_limit_line(&plan.options));
    if args.use_async {
        outln!(
            "Async API:  on (up to {} tickets outstanding per thread, resubmitted on Busy)",
            crate::bench::async_workload::WINDOW_TICKETS
        );
    }
    outln!("Memtablerep: SkipList");
    outln!("------------------------------------------------");
    outln!("DB path: [{}]", path.display());
}

/// CPU count, model name and cache size from /proc/cpuinfo (or "unknown").
fn cpu_info() -> (usize, String, String) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let count = text.lines().filter(|l| l.starts_with("processor")).count();
    let count = if count == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        count
    };
    (
        count,
        field("model name").unwrap_or_else(|| "unknown".into()),
        field("cache size").unwrap_or_else(|| "unknown".into()),
    )
}

/// The current time as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The proleptic Gregorian date `days` after 1970-01-01, by counting 400-year eras of 146097
/// days from 0000-03-01 (so the leap day ends each year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `stats`: the store's shape and counters.
pub fn print_db_stats(s: &shale_lsm::Stats) {
    outln!("\n** shale stats **");
    print_levels(s);
    outln!(
        "Memtables: {} holding {:.1} MB; last sequence {}",
        s.memtables,
        s.memtable_bytes as f64 / MB,
        s.last_seq
    );
    outln!(
        "Flushes: {}; compactions: {}; pending compaction: {:.1} MB",
        s.flushes,
        s.compactions,
        s.pending_compaction_bytes as f64 / MB
    );
    outln!(
        "Written: user {:.1} MB, WAL {:.1} MB, SST {:.1} MB, version log {:.1} MB; write amplification {:.2}",
        s.user_bytes_written as f64 / MB,
        s.wal_bytes_written as f64 / MB,
        s.sst_bytes_written as f64 / MB,
        s.version_log_bytes_written as f64 / MB,
        s.write_amplification()
    );
    print_level_io(s);
    outln!(
        "Block cache: {:.1} MB held of {:.1} MB ({:.1} MB index and filter), {} hits, {} misses, {} adds, hit ratio {:.3}",
        s.block_cache_bytes as f64 / MB,
        s.block_cache_capacity_bytes as f64 / MB,
        s.block_cache_index_and_filter_bytes as f64 / MB,
        s.block_cache_hits,
        s.block_cache_misses,
        s.block_cache_adds,
        s.block_cache_hit_ratio()
    );
    outln!(
        "Index and filter blocks held by SST readers outside the block cache: {:.1} MB",
        s.sst_index_and_filter_held_bytes as f64 / MB
    );
    let st = &s.stalls;
    outln!(
        "Stalls: memtable {} ({:.3} s), L0 slowdown {} ({:.3} s), L0 stop {} ({:.3} s)",
        st.memtable.count,
        st.memtable.duration_us as f64 / 1e6,
        st.l0_slowdown.count,
        st.l0_slowdown.duration_us as f64 / 1e6,
        st.l0_stop.count,
        st.l0_stop.duration_us as f64 / 1e6
    );
    for (name, p) in [("Slowdown", &s.slowdown_pace), ("Memtable", &s.memtable_pace)] {
        if p.delayed_groups > 0 {
            outln!(
                "{name} pace: {} groups waited {:.3} s, longest {} us ({} us past its bound)",
                p.delayed_groups,
                p.scheduled_us as f64 / 1e6,
                p.longest_us,
                p.longest_past_bound_us
            );
        }
    }
    if let Some(why) = &s.stopped {
        outln!("Stopped: {why}");
    }
    outln!();
}

/// `levelstats`: SSTs and megabytes per level.
pub fn print_level_stats(s: &shale_lsm::Stats) {
    outln!();
    print_levels(s);
    outln!();
}

fn print_levels(s: &shale_lsm::Stats) {
    outln!("Level Files Size(MB)");
    outln!("--------------------");
    for (level, (files, bytes)) in s.files_per_level.iter().zip(&s.bytes_per_level).enumerate() {
        outln!("{level:5} {files:5} {:8.1}", *bytes as f64 / MB);
    }
}

/// Where the bytes went, by level (RocksDB's compaction stats): what flushes and compactions
/// wrote into each level, what they read, and each level's share of the write amplification.
fn print_level_io(s: &shale_lsm::Stats) {
    let user = s.user_bytes_written.max(1) as f64;
    outln!("Level  Written(MB) Runs ReadHere(MB) ReadBelow(MB) MovedIn(MB) W-Amp");
    for (level, io) in s.level_io.iter().enumerate() {
        if io.written + io.read_from_level + io.moved_in == 0 {
            continue;
        }
        outln!(
            "L{level:<4} {:11.1} {:4} {:12.1} {:13.1} {:11.1} {:5.2}",
            io.written as f64 / MB,
            io.runs,
            io.read_from_level as f64 / MB,
            io.read_from_below as f64 / MB,
            io.moved_in as f64 / MB,
            io.written as f64 / user
        );
    }
    outln!(
        "WAL    {:11.1}                                            {:5.2}",
        s.wal_bytes_written as f64 / MB,
        s.wal_bytes_written as f64 / user
    );
}

/// `--statistics`: the engine's counters, in RocksDB's `name COUNT : value` form.
pub fn print_statistics(s: &shale_lsm::Stats) {
    outln!("STATISTICS:");
    let counters = [
        ("shale.block.cache.hit", s.block_cache_hits),
        ("shale.block.cache.miss", s.block_cache_misses),
        ("shale.block.cache.add", s.block_cache_adds),
        ("shale.block.cache.index.hit", s.block_cache_index_hits),
        ("shale.block.cache.index.miss", s.block_cache_index_misses),
        ("shale.block.cache.filter.hit", s.block_cache_filter_hits),
        ("shale.block.cache.filter.miss", s.block_cache_filter_misses),
        ("shale.sst.bytes.read.direct", s.sst_bytes_read_direct),
        ("shale.sst.bytes.read.buffered", s.sst_bytes_read_buffered),
        ("shale.sst.bytes.read.around.page.cache", s.sst_bytes_read_around_page_cache),
        ("shale.sst.reads.ahead", s.sst_reads_ahead),
        ("shale.seek.batch.reads", s.seek_batch_reads),
        ("shale.sst.releases.deferred", s.sst_releases_deferred),
        ("shale.compactions.idle.io", s.compactions_idle_io),
        ("shale.compaction.io.raised", s.compaction_io_raised),
        ("shale.bytes.written", s.user_bytes_written),
        ("shale.writes", s.writes),
        ("shale.write.groups", s.write_groups),
        ("shale.write.leader.handoffs", s.write_leader_handoffs),
        ("shale.write.leader.handoff.micros", s.write_leader_handoff_micros),
        ("shale.write.group.micros", s.write_group_micros),
        ("shale.wal.append.micros", s.wal_append_micros),
        ("shale.wal.pipelined.groups", s.wal_pipelined_groups),
        ("shale.wal.loggers", s.wal_loggers as u64),
        ("shale.wal.logger.increases", s.wal_logger_increases),
        ("shale.wal.logger.decreases", s.wal_logger_decreases),
        ("shale.wal.pipeline.device.micros", s.wal_pipeline_device_micros),
        ("shale.wal.pipeline.turn.wait.micros", s.wal_pipeline_turn_wait_micros),
        ("shale.wal.bytes", s.wal_bytes_written),
        ("shale.wal.bytes.allocated", s.wal_bytes_allocated),
        ("shale.wal.bytes.never.written", s.wal_bytes_never_written),
        ("shale.sst.bytes.written", s.sst_bytes_written),
        ("shale.sst.bytes.written.direct", s.sst_bytes_written_direct),
        ("shale.sst.bytes.written.buffered", s.sst_bytes_written_buffered),
        ("shale.sst.relocations", s.sst_relocations),
        ("shale.version.log.bytes", s.version_log_bytes_written),
        ("shale.flush.count", s.flushes),
        ("shale.compaction.count", s.compactions),
        ("shale.compaction.deferred.for.room", s.compactions_deferred_for_room),
        ("shale.flush.waited.for.room", s.flushes_waited_for_room),
        ("shale.retried.for.room", s.retried_for_room),
        ("shale.waited.for.held.room", s.waited_for_held_room),
        ("shale.obsolete.sst.bytes", s.obsolete_sst_bytes),
        ("shale.stall.memtable.count", s.stalls.memtable.count),
        ("shale.stall.memtable.micros", s.stalls.memtable.duration_us),
        ("shale.stall.l0.slowdown.count", s.stalls.l0_slowdown.count),
        ("shale.stall.l0.slowdown.micros", s.stalls.l0_slowdown.duration_us),
        ("shale.stall.l0.stop.count", s.stalls.l0_stop.count),
        ("shale.stall.l0.stop.micros", s.stalls.l0_stop.duration_us),
        ("shale.stall.pending.slowdown.count", s.stalls.pending_slowdown.count),
        ("shale.stall.pending.slowdown.micros", s.stalls.pending_slowdown.duration_us),
        ("shale.stall.pending.stop.count", s.stalls.pending_stop.count),
        ("shale.stall.pending.stop.micros", s.stalls.pending_stop.duration_us),
        ("shale.slowdown.delayed.groups", s.slowdown_pace.delayed_groups),
        ("shale.slowdown.scheduled.micros", s.slowdown_pace.scheduled_us),
        ("shale.slowdown.longest.micros", s.slowdown_pace.longest_us),
        ("shale.slowdown.longest.past.bound.micros", s.slowdown_pace.longest_past_bound_us),
        ("shale.memtable.pace.delayed.groups", s.memtable_pace.delayed_groups),
        ("shale.memtable.pace.scheduled.micros", s.memtable_pace.scheduled_us),
        ("shale.memtable.pace.longest.micros", s.memtable_pace.longest_us),
        ("shale.memory.overflows", s.memory_overflows),
        ("shale.write.buffer.bytes", s.write_buffer_bytes),
        ("shale.background.jobs", s.background_jobs as u64),
        ("shale.tuner.windows", s.tuner_windows),
        ("shale.tuner.l0.overflows", s.tuner_l0_overflows),
        ("shale.tuner.redundancy.overflows", s.tuner_redundancy_overflows),
        ("shale.tuner.memory.overflows", s.tuner_memory_overflows),
        ("shale.tuner.batch.max", s.tuner_batch_max),
        ("shale.memory.limit", s.memory_limit),
        ("shale.block.cache.capacity.bytes", s.block_cache_capacity_bytes as u64),
        ("shale.compaction.deferred.for.room", s.compactions_deferred_for_room),
        ("shale.async.submitted", s.async_submitted),
        ("shale.async.completed", s.async_completed),
        ("shale.async.lucky.reads", s.async_lucky_reads),
        ("shale.async.busy", s.async_busy),
        ("shale.async.write.batches", s.async_write_batches),
    ];
    for (name, v) in counters {
        outln!("{name} COUNT : {v}");
    }
    // Bytes read with O_DIRECT (by reads, and by compactions around the page cache) all came
    // from the device; buffered ones may have come from the page cache, so the sum is an
    // upper bound on what the device read.
    outln!("shale.block.cache.hit.ratio : {:.4}", s.block_cache_hit_ratio());
    outln!(
        "shale.sst.bytes.read.device.max : {}",
        s.sst_bytes_read_direct + s.sst_bytes_read_buffered + s.sst_bytes_read_around_page_cache
    );
    // A tiered store: each volume's share, and the level pointer's moves.
    if s.tiers.len() > 1 {
        for t in &s.tiers {
            let n = t.name;
            outln!("shale.tier.{n}.ssts COUNT : {}", t.ssts);
            outln!("shale.tier.{n}.live.bytes COUNT : {}", t.live_bytes);
            outln!("shale.tier.{n}.write.bytes COUNT : {}", t.write_bytes);
            outln!("shale.tier.{n}.writes COUNT : {}", t.writes);
            outln!("shale.tier.{n}.read.bytes COUNT : {}", t.read_bytes);
            outln!("shale.tier.{n}.reads COUNT : {}", t.reads);
        }
        let written: u64 = s.tiers.iter().map(|t| t.write_bytes).sum();
        let fast = s.tiers[0].write_bytes as f64 / written.max(1) as f64;
        outln!("shale.tier.fast.write.share : {fast:.4}");
        outln!("shale.tier.level.pointer COUNT : {}", s.level_pointer);
        outln!("shale.tier.level.pointer.deeper COUNT : {}", s.level_pointer_deeper);
        outln!("shale.tier.level.pointer.shallower COUNT : {}", s.level_pointer_shallower);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The result line's exact shape, db_bench's printf format spelled as a pattern.
    const RESULT_LINE: &str = r"^[a-z]+ {0,11} : [ 0-9]{7,}\.[0-9]{3} micros/op [0-9]+ ops/sec [0-9]+\.[0-9]{3} seconds [0-9]+ operations;( [ 0-9]{4,}\.[0-9] MB/s)?( \([0-9]+ of [0-9]+ found\))?$";

    #[test]
    fn result_line_matches_db_bench_format() {
        let line = format_result_line("fillrandom", 4.123, 4.123, 1_000_000, 116_000_000, None);
        assert_eq!(
            line,
            "fillrandom   :       4.123 micros/op 242541 ops/sec 4.123 seconds 1000000 operations;   26.8 MB/s"
        );
        let re = regex::Regex::new(RESULT_LINE).unwrap();
        assert!(re.is_match(&line), "{line}");
        let read =
            format_result_line("readrandom", 2.0, 1.0, 1000, 58_000, Some("(500 of 1000 found)"));
        assert!(read.ends_with("operations;    0.1 MB/s (500 of 1000 found)"), "{read}");
        assert!(re.is_match(&read), "{read}");
        let compact = format_result_line("compact", 0.5, 0.5, 1, 0, None);
        assert_eq!(
            compact,
            "compact      :  500000.000 micros/op 2 ops/sec 0.500 seconds 1 operations;"
        );
        assert!(re.is_match(&compact));
        assert!(!re.is_match("fillrandom : 4.1 micros/op"), "the pattern rejects other shapes");
    }

    #[test]
    fn micros_per_op_sums_threads_and_ops_per_sec_uses_wall_time() {
        // Two threads, each 2 s busy, over 2 s of wall time, 1000 ops in all.
        let line = format_result_line("readrandom", 4.0, 2.0, 1000, 0, None);
        assert!(
            line.contains(" 4000.000 micros/op 500 ops/sec 2.000 seconds 1000 operations;"),
            "{line}"
        );
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
