//! What `shale bench` and `shale ycsb` share about the store they open: checking what `--db`
//! names before anything is written, emptying a store (only a shale store, never one in use),
//! the limits of the store flags, naming its compression, laying out a new volume to suit the
//! options.
//!
//! Stages before a benchmark touches `--db` ([`prepare`]), each refusing with the path named:
//! 1. Look at the path without opening it: a FIFO, a character device or a socket is refused
//!    (opening a FIFO would block), so is a dangling symlink; a symlink is resolved.
//! 2. With `--use_existing_db`: a store must be there (db_bench's "no store at PATH"), and the
//!    store is opened without creating one ([`open`] with `create_if_blank` off).
//! 3. Without it: the old store is destroyed ([`destroy`]), only if it is a store of the
//!    benchmark's own engine: under the store lock, its header must prove it a shale volume
//!    of that engine (a tool of one engine never replaces another engine's store); a
//!    directory holding other files but no store, and a block device holding data, are
//!    refused.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use shale_lsm::sst::Compression;
use shale_lsm::{Db, Options};
use shale_space::EngineKind;

/// Smallest slot a volume is laid out with when `--target_file_size_base` asks for small SSTs.
const SLOT_BYTES_MIN: u64 = 64 << 10;

/// An error at a path: the operation, the path, and the cause as its source (printed by
/// whoever prints the chain, `shale_io::Chain`, not again in this error's `Display`).
#[derive(Debug)]
pub struct PathError {
    /// What was being done ("opening the store", ...).
    pub op: String,
    /// Where.
    pub path: PathBuf,
    /// Why it failed.
    pub source: Box<dyn std::error::Error>,
}

impl PathError {
    pub(crate) fn new(
        op: &str,
        path: &Path,
        source: impl Into<Box<dyn std::error::Error>>,
    ) -> PathError {
        PathError { op: op.to_string(), path: path.to_path_buf(), source: source.into() }
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.op, self.path.display())
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// A refusal of `--db`, naming the path and what was found there.
fn refuse(path: &Path, why: impl std::fmt::Display) -> Box<dyn std::error::Error> {
    format!("--db {}: {why}; nothing was changed", path.display()).into()
}

/// Checks what `--db` names before anything is written there (stages 1 to 3 of the module
/// comment, short of opening), and returns the path to open: `path` with symlinks resolved
/// where it exists, so that emptying a store and opening it again act on the same file.
///
/// # Errors
/// A path that holds something other than a shale store could be made in (or, with
/// `use_existing`, no store at all); the OS error of a path that cannot be examined, named.
/// Whether the store is in use is for [`destroy`] and [`open`] to find, under the lock.
pub fn prepare(path: &Path, use_existing: bool) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(refuse(path, "a dangling symlink"));
            }
            if use_existing {
                return Err(format!("--use_existing_db: no store at {}", path.display()).into());
            }
            return Ok(path.to_path_buf());
        }
        Err(e) => return Err(PathError::new("examining --db", path, e).into()),
    };
    let kind = meta.file_type();
    if kind.is_fifo() || kind.is_char_device() || kind.is_socket() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() {
            "a character device"
        } else {
            "a socket"
        };
        return Err(refuse(path, format!("{what}, not a store")));
    }
    let path = std::fs::canonicalize(path).map_err(|e| PathError::new("resolving", path, e))?;
    if meta.is_dir() {
        let volume = path.join(shale_space::VOLUME_FILE_NAME);
        if std::fs::symlink_metadata(&volume).is_err() {
            if use_existing {
                return Err(format!("--use_existing_db: no store at {}", path.display()).into());
            }
            let entries =
                std::fs::read_dir(&path).map_err(|e| PathError::new("listing", &path, e))?.count();
            if entries > 0 {
                return Err(refuse(
                    &path,
                    format!(
                        "a directory of {entries} entries and no shale store ({} is missing); \
                         give a new or empty directory",
                        shale_space::VOLUME_FILE_NAME
                    ),
                ));
            }
        }
    } else if kind.is_block_device() && !use_existing && !is_blank(&path)? {
        return Err(refuse(
            &path,
            "a block device holding data; shale does not erase devices (pass \
             --use_existing_db to use the store on it, or zero its first 8 KiB)",
        ));
    }
    Ok(path)
}

/// Whether the first 8 KiB of a device are zero: nothing was ever stored there by shale.
fn is_blank(path: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    use std::io::Read;
    let mut head = vec![0u8; shale_space::HEADER_AREA_BYTES as usize];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|e| PathError::new("reading the first 8 KiB of", path, e))?;
    Ok(head.iter().all(|&b| b == 0))
}

/// Empties the store at `path` (a path from [`prepare`]) so a benchmark of `engine` starts
/// empty: a store of that engine not in use loses its volume file (an lsm store its WAL tail
/// too, through [`shale_lsm::destroy()`]); anything else, another engine's store included, is
/// refused untouched. A block device is never erased: a blank one is left for the open to lay
/// out, one holding data (a store a first fill benchmark made, say) is refused.
///
/// # Errors
/// The store is in use, or `path` is not a store of `engine` or a blank device; each names
/// the path.
pub fn destroy(path: &Path, engine: EngineKind) -> Result<(), Box<dyn std::error::Error>> {
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device()) {
        if is_blank(path)? {
            return Ok(());
        }
        return Err(refuse(
            path,
            "a block device holding data; shale does not erase devices (benchmarks that need \
             an empty store cannot run twice on it: zero its first 8 KiB between runs)",
        ));
    }
    let emptied = match engine {
        EngineKind::Lsm => shale_lsm::destroy(path).map_err(Into::into),
        other => destroy_volume_of(path, other),
    };
    emptied.map_err(|e| PathError::new("emptying the store at", path, e).into())
}

/// [`destroy`] of an lsm store: the removal of a temporary store of `bench`, `ycsb` and
/// `kvbench --engine lsm`.
///
/// # Errors
/// As [`destroy`].
pub fn destroy_lsm(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    destroy(path, EngineKind::Lsm)
}

/// [`destroy`] for the hash and table engines, whose stores keep nothing outside the volume
/// file that a benchmark makes (a table store's persistent-memory file is the caller's):
/// under the store lock, the volume's header must name `engine` (or, for a volume older than
/// format 3, its version log must hold that engine's payloads), then the file goes.
fn destroy_volume_of(path: &Path, engine: EngineKind) -> Result<(), Box<dyn std::error::Error>> {
    let volume = shale_space::volume_file(path);
    if std::fs::symlink_metadata(&volume).is_err() {
        return Ok(());
    }
    let _lock = shale_space::StoreLock::acquire(path)?;
    let opts = shale_space::VolumeOptions {
        engine: Some(engine),
        create_if_blank: false,
        ..Default::default()
    };
    let opened = shale_space::Volume::open_path_read_only(path, &opts, &Default::default())?;
    if opened.volume.engine().is_none() {
        // Older than format 3: the version log's payloads say (`engine_kind.rs`); a volume
        // without a WAL area whose log holds neither engine's payload yet is a hash or table
        // store that never committed.
        let found = match crate::engine_kind::engine_of_versions(&opened.versions) {
            EngineKind::Lsm if opened.volume.layout().wal_bytes == 0 => engine,
            kind => kind,
        };
        if found != engine {
            return Err(format!(
                "{} is {}, not {}; nothing was deleted",
                path.display(),
                found.a_store(),
                engine.a_store()
            )
            .into());
        }
    }
    drop(opened);
    std::fs::remove_file(&volume)
        .map_err(|e| PathError::new("removing the volume file", &volume, e))?;
    Ok(())
}

/// A temporary directory for a run without `--db`, named in the error if it cannot be made.
///
/// # Errors
/// The OS error, naming the directory it was to be made in.
pub fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    tempfile::Builder::new().prefix(prefix).tempdir().map_err(|e| {
        PathError::new("making a temporary store directory in", &std::env::temp_dir(), e).into()
    })
}

/// Opens the store at `path` (a path from [`prepare`]); with `use_existing`, only a store
/// that is there: nothing is created.
///
/// # Errors
/// The store's errors, naming the path.
pub fn open(
    path: &Path,
    mut options: Options,
    use_existing: bool,
) -> Result<Db, Box<dyn std::error::Error>> {
    if use_existing {
        options.volume.create_if_blank = false;
    } else {
        check_room(path, &options)?;
    }
    Db::open(path, options).map_err(|e| PathError::new("opening the store at", path, e).into())
}

/// Refuses, before the volume file is created, a layout larger than the room left on the
/// file system: naming the flags that size it beats the "No space left on device" or "File
/// too large" of `fallocate`. The WAL area counts whole although a new volume leaves it a
/// hole: a busy WAL fills every group, and would stop the store when the room ran out.
fn check_room(path: &Path, o: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let volume_exists = std::fs::metadata(path)
        .map(|m| !m.is_dir() || path.join(shale_space::VOLUME_FILE_NAME).exists())
        .unwrap_or(false);
    if volume_exists {
        return Ok(());
    }
    // The layout the engine will create: its WAL area derived from the options.
    let volume = o.volume_options();
    let l = &volume.layout;
    let bytes = shale_space::HEADER_AREA_BYTES
        + 2 * l.version_log_bytes
        + l.wal_bytes
        + u64::from(volume.initial_slots.max(1)) * l.slot_bytes;
    // The directory that will hold the volume: `path` or its nearest existing ancestor.
    let mut dir = path;
    while !dir.exists() {
        match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => dir = p,
            _ => return Ok(()),
        }
    }
    let Some(free) = free_bytes(dir) else {
        return Ok(());
    };
    if bytes > free {
        // The WAL groups hold the largest memtable: the tuner's largest batch where it grows
        // the batch (ADOC and ADOC-B), else the write buffer.
        let memtable = match o.tuner.mode {
            shale_lsm::TunerMode::Full | shale_lsm::TunerMode::Batch => format!(
                "the tuner's largest batch, {} MiB (--tuner=off or adoc-t: \
                 --write_buffer_size={})",
                o.tuner.batch_max_for(o.write_buffer_bytes as u64) >> 20,
                o.write_buffer_bytes
            ),
            _ => format!("--write_buffer_size={}", o.write_buffer_bytes),
        };
        return Err(format!(
            "a new store at {} needs {} MiB ({} MiB of WAL area: 1.5 x {memtable} x \
             (--max_write_buffer_number={} + 1)), more than the {} MiB free there",
            path.display(),
            bytes >> 20,
            l.wal_bytes >> 20,
            o.max_write_buffer_number,
            free >> 20
        )
        .into());
    }
    Ok(())
}

/// Bytes an unprivileged process may still allocate on the file system of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs reads the NUL-terminated path and writes only the struct it is given.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are valid for the call.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail.saturating_mul(st.f_frsize))
}

/// Refuses a flag value outside `range`, naming the flag, the value and the limit.
///
/// # Errors
/// The value is outside the range.
pub fn in_range<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
    why: &str,
) -> Result<(), String> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "--{flag}={value} is outside {}..={}{}",
            range.start(),
            range.end(),
            if why.is_empty() { String::new() } else { format!(" ({why})") }
        ))
    }
}

/// Smallest and largest memtable (`--write_buffer_size`): the engine's bounds.
pub const WRITE_BUFFER_BYTES: std::ops::RangeInclusive<usize> =
    shale_lsm::options::WRITE_BUFFER_BYTES_MIN..=shale_lsm::options::WRITE_BUFFER_BYTES_MAX;
/// Memtables before writes stall (`--max_write_buffer_number`): the engine's bounds.
pub const WRITE_BUFFER_NUMBER: std::ops::RangeInclusive<usize> =
    shale_lsm::options::WRITE_BUFFER_NUMBER_MIN..=shale_lsm::options::WRITE_BUFFER_NUMBER_MAX;
/// SST target sizes (`--target_file_size_base`): a slot's floor, and the engine's ceiling.
pub const TARGET_FILE_BYTES: std::ops::RangeInclusive<u64> =
    (64 << 10)..=shale_lsm::options::SST_BYTES_MAX;
/// Base level sizes (`--max_bytes_for_level_base`).
pub const LEVEL_BASE_BYTES: std::ops::RangeInclusive<u64> = (64 << 10)..=(1 << 50);
/// Bloom filter bits per key (`--bloom_bits`): RocksDB's own ceiling is 100.
pub const BLOOM_BITS: std::ops::RangeInclusive<u32> = 0..=100;
/// Most bytes of one key and value: an entry must fit an SST block
/// (`BLOCK_RAW_BYTES_MAX`), with room for a key.
pub const ENTRY_BYTES_MAX: usize = shale_lsm::sst::format::BLOCK_RAW_BYTES_MAX / 2;
/// Bytes a batch takes in a memtable beyond its keys and values, per entry (the engine's
/// node overhead of 160 bytes and the record framing), for the batch limit below.
const BATCH_OVERHEAD_PER_ENTRY: usize = 192;

/// Refuses batches the engine would refuse at every write: a batch must fit in half a memtable
/// (`Db::write`'s limit), so a benchmark fails at its flags, not at its first write.
///
/// # Errors
/// The batch is too large, naming the flags that size it.
pub fn check_batch(
    entries: usize,
    entry_bytes: usize,
    sizing: &str,
    write_buffer_bytes: usize,
) -> Result<(), String> {
    let batch = entries.saturating_mul(entry_bytes.saturating_add(BATCH_OVERHEAD_PER_ENTRY));
    let limit = write_buffer_bytes / 2;
    if batch > limit {
        return Err(format!(
            "{sizing} makes batches of about {batch} bytes in a memtable, over the engine's \
             limit of half a memtable ({limit} bytes with --write_buffer_size={write_buffer_bytes})"
        ));
    }
    Ok(())
}

/// Names a compression the engine has (none, lz4 or zstd) and its db_bench name.
///
/// # Errors
/// Any other name, in the message of `--compression_type`.
pub fn parse_compression(name: &str) -> Result<(Compression, &'static str), String> {
    match name.to_ascii_lowercase().as_str() {
        "none" | "no" => Ok((Compression::None, "NoCompression")),
        "lz4" => Ok((Compression::Lz4, "LZ4")),
        "zstd" => Ok((Compression::Zstd, "ZSTD")),
        other => Err(format!("--compression_type={other} is not supported (none, lz4 or zstd)")),
    }
}

/// Lays out a new volume to suit the options: slots no larger than the target SST size. The
/// WAL area is the engine's to size from the write buffer (`Options::volume_options`, with
/// `volume.layout.wal_bytes` left at 0).
pub fn fit_volume(o: &mut Options) {
    let layout = &mut o.volume.layout;
    if o.target_file_size_base < layout.slot_bytes {
        let below = 1u64 << (63 - o.target_file_size_base.max(1).leading_zeros());
        layout.slot_bytes = below.max(SLOT_BYTES_MIN);
    }
}

/// The engine's option names and the flags of `shale bench` and `shale ycsb` that set them, so
/// that an option the engine refuses is named as the user wrote it.
const FLAG_OF_OPTION: &[(&str, &str)] = &[
    ("write_buffer_bytes", "--write_buffer_size"),
    ("max_write_buffer_number", "--max_write_buffer_number"),
    ("target_file_size_base", "--target_file_size_base"),
    ("max_bytes_for_level_base", "--max_bytes_for_level_base"),
    ("max_bytes_for_level_multiplier", "--max_bytes_for_level_multiplier"),
    ("soft_pending_compaction_bytes_limit", "--soft_pending_compaction_bytes_limit"),
    ("hard_pending_compaction_bytes_limit", "--hard_pending_compaction_bytes_limit"),
    ("delayed_write_rate", "--delayed_write_rate"),
    ("max_background_jobs", "--max_background_jobs"),
    ("level0_file_num_compaction_trigger", "--level0_file_num_compaction_trigger"),
    ("level0_slowdown_writes_trigger", "--level0_slowdown_writes_trigger"),
    ("level0_stop_writes_trigger", "--level0_stop_writes_trigger"),
    ("block_cache_bytes", "--cache_size"),
    ("sst.block_bytes", "--block_size"),
    ("sst.bloom_bits_per_key", "--bloom_bits"),
];

/// Checks the options with the engine's own validation, naming the flags behind the option it
/// refuses.
///
/// # Errors
/// The engine's message, with the flags that set the options it names.
pub fn validate_for_flags(o: &Options) -> Result<(), String> {
    o.validate().map_err(|e| {
        let msg = e.to_string();
        let flags: Vec<&str> = FLAG_OF_OPTION
            .iter()
            .filter(|(option, _)| msg.contains(option))
            .map(|(_, flag)| *flag)
            .collect();
        if flags.is_empty() {
            format!("the engine refuses these options: {msg}")
        } else {
            format!("{}: the engine refuses these options: {msg}", flags.join(", "))
        }
    })
}

/// The store flags `shale bench` and `shale ycsb` share, each checked against its limit.
pub struct StoreSizeFlags {
    pub write_buffer_size: Option<usize>,
    pub max_write_buffer_number: Option<usize>,
    pub target_file_size_base: Option<u64>,
    pub max_bytes_for_level_base: Option<u64>,
}

/// Checks the shared store flags, naming the first one past its limit.
///
/// # Errors
/// The flag, its value and its range.
pub fn check_store_sizes(f: &StoreSizeFlags) -> Result<(), String> {
    if let Some(v) = f.write_buffer_size {
        in_range("write_buffer_size", v, WRITE_BUFFER_BYTES, "bytes of one memtable")?;
    }
    if let Some(v) = f.max_write_buffer_number {
        in_range("max_write_buffer_number", v, WRITE_BUFFER_NUMBER, "")?;
    }
    if let Some(v) = f.target_file_size_base {
        in_range("target_file_size_base", v, TARGET_FILE_BYTES, "")?;
    }
    if let Some(v) = f.max_bytes_for_level_base {
        in_range("max_bytes_for_level_base", v, LEVEL_BASE_BYTES, "")?;
    }
    Ok(())
}

/// The flags of a tiered store, shared by `shale bench` and `shale ycsb` (`Options::tiers`).
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct TierArgs {
    /// A capacity volume beside `--db` (a directory, a volume file or a block device): `--db`
    /// becomes the fast volume, holding the WAL and the levels above the level pointer, and
    /// this one the rest (SpanDB's tiers). Emptied with `--db` for a fresh store.
    #[arg(long = "capacity_path")]
    pub capacity_path: Option<PathBuf>,
    /// The level pointer at open: new SSTs of levels below it go to the fast volume (0 to 8;
    /// default 2).
    #[arg(long = "fast_levels")]
    pub fast_levels: Option<usize>,
    /// Whether the head thread moves the level pointer by the fast volume's bandwidth and
    /// room (default true).
    #[arg(long = "tier_adaptive", value_parser = crate::bench::parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub tier_adaptive: Option<bool>,
    /// Bytes of SSTs the fast volume may hold; past them new SSTs go to the capacity volume
    /// (default 0: as many as it has room for).
    #[arg(long = "fast_bytes_max")]
    pub fast_bytes_max: Option<u64>,
}

impl TierArgs {
    /// Sets `o.tiers` from the flags given; the capacity path is set by [`TierArgs::prepare`].
    pub fn apply(&self, o: &mut Options) {
        if let Some(v) = self.fast_levels {
            o.tiers.fast_levels = v;
        }
        if let Some(v) = self.tier_adaptive {
            o.tiers.adaptive = v;
        }
        if let Some(v) = self.fast_bytes_max {
            o.tiers.fast_bytes_max = v;
        }
    }

    /// Checks the capacity path as [`prepare`] checks `--db`, empties it with the store unless
    /// `use_existing`, and sets it in `o`.
    ///
    /// # Errors
    /// As [`prepare`] and [`destroy`].
    pub fn prepare(
        &self,
        o: &mut Options,
        use_existing: bool,
    ) -> Result<(), Box<dyn std::error::Error>> {
        if let Some(cap) = &self.capacity_path {
            let cap = prepare(cap, use_existing)?;
            if !use_existing {
                destroy(&cap, EngineKind::Lsm)?;
            }
            o.tiers.capacity_path = Some(cap);
        }
        Ok(())
    }
}

/// Empties a tiered store's capacity volume too, when `o` names one (a fresh store between
/// benchmarks).
///
/// # Errors
/// As [`destroy`].
pub fn destroy_capacity(o: &Options) -> Result<(), Box<dyn std::error::Error>> {
    match &o.tiers.capacity_path {
        Some(cap) => destroy(cap, EngineKind::Lsm),
        None => Ok(()),
    }
}

/// Sets the tuner's options from `--tuner` and `--tuner_window_ms`, and the memory limit its
/// batch stays within from `--memory_limit`, where given.
pub fn apply_tuner(
    o: &mut Options,
    mode: Option<shale_lsm::TunerMode>,
    window_ms: Option<u64>,
    memory_limit: Option<shale_lsm::MemoryLimit>,
) {
    if let Some(m) = mode {
        o.tuner.mode = m;
    }
    if let Some(w) = window_ms {
        o.tuner.window_ms = w;
    }
    if let Some(l) = memory_limit {
        o.memory_limit = l;
    }
}
