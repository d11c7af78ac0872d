//! `shale iobench`: the io layer measured on its own, to compare with fio on the same file.
//!
//! One thread drives one queue and keeps `--queue_depth` requests in flight for `--seconds`,
//! then prints exactly one result line:
//!
//! `randread: 85123 IOPS, 332.5 MB/s, p50 310 us, p99 900 us`
//!
//! MB is 10^6 bytes (as fio's MB/s); latency is each request's time from submit to reap.
//!
//! What it may write (promise P6: nothing already stored is lost): a missing `--path` is
//! created (`--size` bytes) and is iobench's to write. An existing file or block device is
//! only read (`randread`, at its own size, never grown) unless `--overwrite` says its bytes
//! may go; a shale volume is never written, whatever the flags. A directory, FIFO, character
//! device or socket is refused without being opened (opening a FIFO would block).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{
    AlignedBuf, Backend, Completion, DeviceRef, Error, FileOptions, Op, PollMode, Profile, Queue,
    QueueExt, QueueOptions, Request, Result, ThrottledDevice, open_device,
};

/// Size of the writes that pre-fill a new file before a read benchmark.
const PREFILL_BLOCK_BYTES: usize = 1 << 20;

/// What requests the benchmark issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// Writes of consecutive blocks, wrapping at the end of the file.
    Seqwrite,
    /// Reads of uniformly random blocks.
    Randread,
    /// Writes of uniformly random blocks.
    Randwrite,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::Seqwrite => "seqwrite",
            Pattern::Randread => "randread",
            Pattern::Randwrite => "randwrite",
        }
    }
}

/// `--backend` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// io_uring with O_DIRECT, falling back to pread where unavailable.
    Auto,
    /// io_uring.
    Uring,
    /// pread/pwrite.
    Pread,
}

/// `--poll` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PollArg {
    /// Busy-poll completions.
    Spin,
    /// Spin briefly, then sleep in the kernel.
    Adaptive,
    /// Sleep in the kernel.
    Blocking,
}

/// Flags of `shale iobench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// File or block device to run on; a missing file is created with --size bytes.
    #[arg(long)]
    pub path: PathBuf,
    /// Request pattern.
    #[arg(long, value_enum)]
    pub pattern: Pattern,
    /// Bytes per request: 4096, 4k, 1m, ...
    #[arg(long = "block_size", default_value = "4k", value_parser = parse_size)]
    pub block_size: u64,
    /// Requests kept in flight.
    #[arg(long = "queue_depth", default_value_t = 32)]
    pub queue_depth: u32,
    /// How long to run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Size of the file to create (or grow to) and spread requests over: 1g, 512m, ...
    #[arg(long, default_value = "1g", value_parser = parse_size)]
    pub size: u64,
    /// Which io backend serves the file.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Emulate a slower device: hdd, sata-ssd, nvme, optane.
    #[arg(long)]
    pub throttle: Option<String>,
    /// How the queue waits for completions.
    #[arg(long, value_enum, default_value_t = PollArg::Adaptive)]
    pub poll: PollArg,
    /// Let a write pattern write over an existing file or block device (and grow a file to
    /// --size). Without it an existing path is only read; a shale volume is never written.
    #[arg(long)]
    pub overwrite: bool,
    /// Make every write durable when it completes (RWF_DSYNC, as the WAL's sync appends):
    /// compare with fio's `--sync=dsync`.
    #[arg(long)]
    pub durable: bool,
}

/// Most requests in flight: a queue's bound in the io layer's backends.
pub const QUEUE_DEPTH_MAX: u32 = 4096;
/// Largest request: 64 MiB (each in-flight request holds a buffer of this size).
pub const BLOCK_BYTES_MAX: u64 = 64 << 20;
/// Longest run: about 136 years, far below where a deadline would overflow the clock.
pub const SECONDS_MAX: f64 = 4_294_967_296.0;

/// Parses a byte count with an optional binary suffix (k, m, g; case-insensitive).
fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, shift) = match lower.strip_suffix(['k', 'm', 'g']) {
        Some(d) if lower.ends_with('k') => (d, 10),
        Some(d) if lower.ends_with('m') => (d, 20),
        Some(d) => (d, 30),
        None => (lower.as_str(), 0),
    };
    let n: u64 =
        digits.parse().map_err(|_| format!("{text:?} is not a size like 4096, 4k or 1m"))?;
    n.checked_mul(1 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("size {text:?} out of range"))
}

/// Runs the benchmark and prints its result line.
///
/// # Errors
/// Bad flags, each named with its limit; a path iobench may not use (named, with what was
/// found there); the device's error, naming the path.
pub fn run(args: &Args) -> std::result::Result<(), Box<dyn std::error::Error>> {
    check_flags(args)?;
    let existing = check_path(args)?;
    run_on(args, existing).map_err(|e| {
        crate::store::PathError {
            op: "iobench on".into(),
            path: args.path.clone(),
            source: e.into(),
        }
        .into()
    })
}

/// Refuses values beyond their limits, each named with its limit.
fn check_flags(args: &Args) -> std::result::Result<(), String> {
    use crate::store::in_range;
    in_range("queue_depth", args.queue_depth, 1..=QUEUE_DEPTH_MAX, "requests in flight")?;
    in_range("block_size", args.block_size, 1..=BLOCK_BYTES_MAX, "bytes per request")?;
    let align = u64::from(shale_io::FILE_BLOCK_SIZE);
    if args.block_size % align != 0 {
        return Err(format!(
            "--block_size={} is not a multiple of {align} (requests are O_DIRECT)",
            args.block_size
        ));
    }
    if !(args.seconds > 0.0 && args.seconds <= SECONDS_MAX) {
        return Err(format!("--seconds={} is outside (0, {SECONDS_MAX}]", args.seconds));
    }
    if args.size % align != 0 {
        return Err(format!("--size={} is not a multiple of {align}", args.size));
    }
    Ok(())
}

/// What `--path` holds, before anything opens it: `false` for nothing (iobench creates it),
/// `true` for an existing file or block device iobench may use as the flags allow.
fn check_path(args: &Args) -> std::result::Result<bool, Box<dyn std::error::Error>> {
    use std::os::unix::fs::FileTypeExt;
    let path = &args.path;
    let refuse = |what: &str| -> Box<dyn std::error::Error> {
        format!("--path {}: {what}; nothing was changed", path.display()).into()
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(refuse("a dangling symlink"));
            }
            return Ok(false);
        }
        Err(e) => {
            let op = "examining --path";
            return Err(crate::store::PathError {
                op: op.into(),
                path: path.clone(),
                source: e.into(),
            }
            .into());
        }
    };
    let kind = meta.file_type();
    if !(kind.is_file() || kind.is_block_device()) {
        return Err(refuse("not a regular file or block device"));
    }
    let writes = args.pattern != Pattern::Randread;
    if writes && !args.overwrite {
        return Err(refuse(&format!(
            "it exists, and {} would write over it (pass --overwrite to let it, or name a new file)",
            args.pattern.name()
        )));
    }
    if writes && holds_shale_volume(path) {
        return Err(refuse("a shale volume: iobench never writes over one"));
    }
    Ok(true)
}

/// Whether `path` starts with a shale volume header (either copy).
fn holds_shale_volume(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = vec![0u8; shale_space::HEADER_AREA_BYTES as usize];
    let Ok(()) = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)) else {
        return false;
    };
    let half = shale_space::AREA_ALIGN as usize;
    [&head[..half], &head[half..]]
        .iter()
        .any(|copy| copy.starts_with(shale_space::header::HEADER_MAGIC))
}

fn run_on(args: &Args, existing: bool) -> Result<()> {
    let (dev, created) = open(args, existing)?;
    let mut queue = dev.open_queue(&QueueOptions {
        depth: args.queue_depth,
        poll: poll_mode(args.poll),
        sq_poll: None,
    })?;
    if created && args.pattern == Pattern::Randread {
        prefill(queue.as_mut(), dev.info().capacity)?;
    }
    let block_count = dev.info().capacity / args.block_size;
    if block_count == 0 {
        return Err(Error::InvalidArgument(format!(
            "block size {} exceeds the device's {} bytes",
            args.block_size,
            dev.info().capacity
        )));
    }
    let report = drive(queue.as_mut(), args, block_count)?;
    println!("{}", report.line(args.pattern));
    Ok(())
}

fn poll_mode(arg: PollArg) -> PollMode {
    match arg {
        PollArg::Spin => PollMode::Spin,
        PollArg::Adaptive => PollMode::default(),
        PollArg::Blocking => PollMode::Blocking,
    }
}

/// Opens (creating or growing to `--size`) the device, throttled if asked; says whether the
/// file is new.
fn open(args: &Args, existing: bool) -> Result<(DeviceRef, bool)> {
    let backend = match args.backend {
        BackendArg::Auto => Backend::Auto,
        BackendArg::Uring => Backend::Uring,
        BackendArg::Pread => Backend::Pread,
    };
    let created = !existing;
    // Only a new file is created: the io layer takes an existing empty file for an absent one
    // (a store's volume file is made empty before its creation), and iobench must not fill
    // a file of the user's that happens to be empty.
    let create_size = created.then_some(args.size);
    let opts = FileOptions { backend, direct: true, create_size, create_sparse: None };
    let mut dev = open_device(&args.path, &opts)?;
    // An existing file grows only where its bytes may be written anyway.
    let may_grow = created || args.overwrite;
    if may_grow && dev.info().growable && dev.info().capacity < args.size {
        dev.grow(args.size)?;
    }
    if let Some(name) = &args.throttle {
        dev = Arc::new(ThrottledDevice::new(dev, Profile::named(name)?)?);
    }
    log::info!("{}: {:?}", args.path.display(), dev.info());
    Ok((dev, created))
}

/// Writes every byte of a new file once: reads of never-written (unwritten-extent) blocks
/// return zeros without touching the disk and would make the read benchmark meaningless.
fn prefill(queue: &mut dyn Queue, capacity: u64) -> Result<()> {
    let mut done = Vec::with_capacity(queue.depth());
    let mut offset = 0u64;
    let mut spare: Vec<AlignedBuf> = Vec::new();
    while offset < capacity || queue.in_flight() > 0 {
        while offset < capacity && queue.in_flight() < queue.depth() {
            let len = (capacity - offset).min(PREFILL_BLOCK_BYTES as u64) as usize;
            let mut buf =
                spare.pop().filter(|b| b.len() == len).unwrap_or_else(|| AlignedBuf::zeroed(len));
            buf.fill(0xa5);
            let req = Request { tag: offset, op: Op::Write { offset, buf, durable: false } };
            queue.submit(req).map_err(|(e, _)| e)?;
            offset += len as u64;
        }
        queue.reap(1, &mut done)?;
        for c in done.drain(..) {
            c.result?;
            spare.extend(c.buf);
        }
    }
    queue.flush()
}

/// Where the next request goes.
struct Offsets {
    pattern: Pattern,
    durable: bool,
    block_size: u64,
    block_count: u64,
    next_block: u64,
    rng: SmallRng,
}

impl Offsets {
    fn next(&mut self) -> u64 {
        let block = match self.pattern {
            Pattern::Seqwrite => {
                let b = self.next_block;
                self.next_block = (b + 1) % self.block_count;
                b
            }
            Pattern::Randread | Pattern::Randwrite => self.rng.gen_range(0..self.block_count),
        };
        block * self.block_size
    }

    fn op(&mut self, buf: AlignedBuf) -> Op {
        let offset = self.next();
        match self.pattern {
            Pattern::Randread => Op::Read { offset, buf },
            Pattern::Seqwrite | Pattern::Randwrite => {
                Op::Write { offset, buf, durable: self.durable }
            }
        }
    }
}

/// The measured run: keeps the queue full until the time is up, then drains it. Waits only
/// when no completion is at hand.
fn drive(queue: &mut dyn Queue, args: &Args, block_count: u64) -> Result<Report> {
    let block_size = usize::try_from(args.block_size)
        .map_err(|_| Error::InvalidArgument(format!("block size {} too large", args.block_size)))?;
    let mut offsets = Offsets {
        pattern: args.pattern,
        durable: args.durable,
        block_size: args.block_size,
        block_count,
        next_block: 0,
        rng: SmallRng::seed_from_u64(0x5a1e),
    };
    let depth = queue.depth();
    let mut submitted_at = vec![Instant::now(); depth];
    let mut bufs: Vec<AlignedBuf> = (0..depth).map(|_| pattern_buf(block_size)).collect();
    let mut free_tags: Vec<usize> = (0..depth).collect();
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(1 << 20);
    let mut done: Vec<Completion> = Vec::with_capacity(depth);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.seconds);
    let mut bytes = 0u64;
    loop {
        let now = Instant::now();
        if now < deadline {
            while let Some(tag) = free_tags.pop() {
                let op = offsets.op(bufs.pop().expect("one buffer per free tag"));
                submitted_at[tag] = now;
                queue.submit(Request { tag: tag as u64, op }).map_err(|(e, _)| e)?;
                // Hand each request to the device at once (reap(0) submits without waiting),
                // as fio does by default (iodepth_batch_submit=1). Holding a batch until the
                // next wait leaves the device idle in between: measured about 6% fewer 4 KiB
                // random reads here.
                queue.reap(0, &mut done)?;
            }
        } else if queue.in_flight() == 0 {
            break;
        }
        if done.is_empty() {
            queue.reap(1, &mut done)?;
        }
        let reaped_at = Instant::now();
        for c in done.drain(..) {
            c.result?;
            let tag = c.tag as usize;
            latencies_ns.push(reaped_at.duration_since(submitted_at[tag]).as_nanos() as u64);
            bytes += args.block_size;
            bufs.extend(c.buf);
            free_tags.push(tag);
        }
    }
    Ok(Report { elapsed: start.elapsed(), bytes, latencies_ns })
}

fn pattern_buf(len: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    buf
}

/// What a run measured.
struct Report {
    elapsed: Duration,
    bytes: u64,
    latencies_ns: Vec<u64>,
}

impl Report {
    /// The one result line.
    fn line(mut self, pattern: Pattern) -> String {
        self.latencies_ns.sort_unstable();
        let secs = self.elapsed.as_secs_f64();
        let ops = self.latencies_ns.len() as f64;
        format!(
            "{}: {:.0} IOPS, {:.1} MB/s, p50 {} us, p99 {} us, p99.9 {} us, max {} us",
            pattern.name(),
            ops / secs,
            self.bytes as f64 / secs / 1e6,
            percentile_us(&self.latencies_ns, 50.0),
            percentile_us(&self.latencies_ns, 99.0),
            percentile_us(&self.latencies_ns, 99.9),
            percentile_us(&self.latencies_ns, 100.0),
        )
    }
}

/// The `p`-th percentile (nearest rank) of sorted nanosecond samples, in whole microseconds.
fn percentile_us(sorted_ns: &[u64], p: f64) -> u64 {
    if sorted_ns.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    sorted_ns[rank.clamp(1, sorted_ns.len()) - 1] / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4kb").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999g").is_err());
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let ns: Vec<u64> = (1..=100).map(|us| us * 1_000).collect();
        assert_eq!(percentile_us(&ns, 50.0), 50);
        assert_eq!(percentile_us(&ns, 99.0), 99);
        assert_eq!(percentile_us(&ns, 99.9), 100);
        assert_eq!(percentile_us(&ns, 100.0), 100);
        assert_eq!(percentile_us(&[7_000], 99.0), 7);
        assert_eq!(percentile_us(&[], 50.0), 0);
    }

    #[test]
    fn result_line_has_the_documented_shape() {
        let report = Report {
            elapsed: Duration::from_secs(2),
            bytes: 4 * 4096,
            latencies_ns: vec![300_000, 100_000, 200_000, 900_000],
        };
        assert_eq!(
            report.line(Pattern::Randread),
            "randread: 2 IOPS, 0.0 MB/s, p50 200 us, p99 900 us, p99.9 900 us, max 900 us"
        );
    }

    #[test]
    fn a_short_run_on_a_new_file_reads_what_prefill_wrote() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let args = Args {
            path: dir.path().join("bench"),
            pattern: Pattern::Randread,
            block_size: 4096,
            queue_depth: 4,
            seconds: 0.2,
            size: 4 << 20,
            backend: BackendArg::Auto,
            throttle: None,
            poll: PollArg::Blocking,
            overwrite: false,
            durable: false,
        };
        assert!(!check_path(&args).unwrap(), "a new file");
        let (dev, created) = open(&args, false).unwrap();
        assert!(created);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        prefill(q.as_mut(), dev.info().capacity).unwrap();
        let back = q.read_at(3 << 20, 4096).unwrap();
        assert!(back.iter().all(|&b| b == 0xa5));
        let report = drive(q.as_mut(), &args, (4 << 20) / 4096).unwrap();
        assert!(!report.latencies_ns.is_empty());
        assert_eq!(report.bytes, report.latencies_ns.len() as u64 * 4096);
    }
}
