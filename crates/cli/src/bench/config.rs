//! From db_bench flags to the engine's options.
//!
//! Each flag either maps to an engine knob, or is accepted with a warning that the engine has
//! no such knob yet and the flag has no effect. None is silently ignored.

use shale_lsm::Options;
use shale_lsm::options::BACKGROUND_JOBS_MAX;

use crate::bench::Args;
use crate::bench::workload::{Benchmark, FILLBATCH_ENTRIES, parse_benchmarks};
use crate::store::{
    BLOOM_BITS, ENTRY_BYTES_MAX, check_batch, fit_volume, in_range, parse_compression,
};

/// Most threads per benchmark: each is an OS thread, and beyond this spawning them fails.
pub const THREADS_MAX: usize = 1024;
/// Longest `--duration` and `--stats_interval_seconds`: about 136 years, far below where a
/// deadline would overflow the clock.
pub const SECONDS_MAX: u64 = 1 << 32;
/// Most `--num` for filluniquerandom, which holds a shuffled list of every key number (8 bytes
/// each) in memory: 2 GiB.
pub const UNIQUE_KEYS_MAX: u64 = 1 << 28;
/// Most entries of one SST data block (`--block_size`): the floor keeps index blocks sane, the
/// ceiling is a quarter of the engine's largest block (`BLOCK_RAW_BYTES_MAX`).
pub const BLOCK_BYTES: std::ops::RangeInclusive<usize> =
    256..=shale_lsm::sst::format::BLOCK_RAW_BYTES_MAX / 4;
/// Level growth factors (`--max_bytes_for_level_multiplier`): the engine's floor, and a
/// ceiling past which level sizes overflow.
pub const LEVEL_MULTIPLIER: std::ops::RangeInclusive<f64> = 2.0..=1000.0;

/// What the store is opened with, and how the header describes it.
#[derive(Clone, Debug)]
pub struct DbPlan {
    /// The engine's options.
    pub options: Options,
    /// The compression's name, for the header.
    pub compression_name: &'static str,
}

/// Maps flags to options, calling `warn` once per flag that has no effect.
///
/// # Errors
/// A flag value the engine cannot take (an unknown compression, options it refuses, a key too
/// short to number --num keys).
pub fn plan(args: &Args, warn: &mut dyn FnMut(String)) -> Result<DbPlan, String> {
    check_shape(args)?;
    warn_unsupported(args, warn);
    let mut o = Options::default();
    if let Some(v) = args.write_buffer_size {
        o.write_buffer_bytes = v;
    }
    if let Some(v) = args.max_write_buffer_number {
        o.max_write_buffer_number = v;
    }
    if let Some(v) = args.target_file_size_base {
        o.target_file_size_base = v;
    }
    if let Some(v) = args.max_bytes_for_level_base {
        o.max_bytes_for_level_base = v;
    }
    if let Some(m) = args.max_bytes_for_level_multiplier {
        if m.fract() != 0.0 {
            warn(format!(
                "--max_bytes_for_level_multiplier={m}: the engine takes a whole factor, using {}",
                m.round()
            ));
        }
        o.max_bytes_for_level_multiplier = m.round() as u64;
    }
    if let Some(v) = args.soft_pending_compaction_bytes_limit {
        o.soft_pending_compaction_bytes_limit = v;
    }
    if let Some(v) = args.hard_pending_compaction_bytes_limit {
        o.hard_pending_compaction_bytes_limit = v;
    }
    if let Some(v) = args.delayed_write_rate {
        o.delayed_write_rate = v;
    }
    // db_bench 11.8.1's default is false (its DEFINE_bool), though the library's (and the
    // engine's) is true since 8.4: the same flags must mean the same in both tools.
    o.dynamic_level_bytes = args.level_compaction_dynamic_level_bytes.unwrap_or(false);
    if let Some(jobs) = args.max_background_jobs {
        o.max_background_jobs = background_jobs(jobs, warn);
    }
    if let Some(v) = args.wal_loggers {
        o.wal_loggers = v;
    }
    if let Some(v) = args.level0_file_num_compaction_trigger {
        o.level0_file_num_compaction_trigger = v;
    }
    if let Some(v) = args.level0_slowdown_writes_trigger {
        o.level0_slowdown_writes_trigger = v;
    }
    if let Some(v) = args.level0_stop_writes_trigger {
        o.level0_stop_writes_trigger = v;
    }
    if let Some(v) = args.cache_size {
        // db_bench makes no block cache for a size of 0 or below (`NewCache`).
        o.block_cache_bytes = usize::try_from(v).unwrap_or(0);
    }
    if let Some(v) = args.prepopulate_block_cache {
        o.prepopulate_block_cache = v == 1;
    }
    if let Some(v) = args.block_size {
        o.sst.block_bytes = v;
    }
    if let Some(v) = args.block_align {
        o.sst.block_align = v;
    }
    if let Some(v) = args.use_direct_reads {
        o.use_direct_reads = v;
    }
    if let Some(v) = args.idle_compaction_io {
        o.idle_compaction_io = v;
    }
    if let Some(v) = args.background_cpu_priority {
        o.background_cpu_priority = v;
    }
    if let Some(v) = args.use_direct_io_for_flush_and_compaction {
        o.use_direct_io_for_flush_and_compaction = v;
    }
    if let Some(v) = args.cache_index_and_filter_blocks {
        o.cache_index_and_filter_blocks = v;
    }
    if let Some(bits) = args.bloom_bits.filter(|b| *b >= 0.0) {
        if bits.fract() != 0.0 {
            warn(format!(
                "--bloom_bits={bits}: the engine takes whole bits per key, using {}",
                bits.round()
            ));
        }
        o.sst.bloom_bits_per_key = bits.round() as u32;
    }
    let compression = parse_compression(args.compression_type.as_deref().unwrap_or("none"))?;
    o.sst.compression = compression.0;
    fit_volume(&mut o);
    crate::store::validate_for_flags(&o)?;
    Ok(DbPlan { options: o, compression_name: compression.1 })
}

/// Refuses benchmark shapes that cannot run as asked, and values beyond their limits, each
/// named with its limit (so an absurd value fails here, not as an OS error later).
fn check_shape(args: &Args) -> Result<(), String> {
    in_range("threads", args.threads, 1..=THREADS_MAX, "each is an OS thread")?;
    in_range("batch_size", args.batch_size, 1..=usize::MAX, "")?;
    in_range("duration", args.duration, 0..=SECONDS_MAX, "")?;
    in_range("stats_interval_seconds", args.stats_interval_seconds, 0..=SECONDS_MAX, "")?;
    in_range("value_size", args.value_size, 0..=ENTRY_BYTES_MAX, "an entry must fit an SST block")?;
    check_store_flags(args)?;
    let benchmarks = benchmarks(args)?;
    if benchmarks.contains(&Benchmark::FillUniqueRandom) {
        in_range(
            "num",
            args.num,
            0..=UNIQUE_KEYS_MAX,
            "filluniquerandom shuffles every key number in memory",
        )?;
    }
    // A batch must fit the engine's batch limit, or every write of the benchmark fails.
    let wbs = args.write_buffer_size.unwrap_or(Options::default().write_buffer_bytes);
    let entry = args.key_size.saturating_add(args.value_size);
    check_batch(
        args.batch_size,
        entry,
        &format!(
            "--batch_size={} x (--key_size={} + --value_size={})",
            args.batch_size, args.key_size, args.value_size
        ),
        wbs,
    )?;
    if benchmarks.contains(&Benchmark::FillBatch) {
        check_batch(
            FILLBATCH_ENTRIES,
            entry,
            &format!(
                "fillbatch's {FILLBATCH_ENTRIES} entries x (--key_size + --value_size={})",
                args.value_size
            ),
            wbs,
        )?;
    }
    if args.key_size == 0 || args.key_size > shale_lsm::options::KEY_BYTES_MAX {
        return Err(format!(
            "--key_size={} is outside 1..={}",
            args.key_size,
            shale_lsm::options::KEY_BYTES_MAX
        ));
    }
    // Keys shorter than 8 bytes hold only the low bytes of their number: they must still be
    // distinct for every number below --num.
    if args.key_size < 8 && args.num > 1u64 << (8 * args.key_size) {
        return Err(format!(
            "--key_size={} cannot number --num={} distinct keys",
            args.key_size, args.num
        ));
    }
    Ok(())
}

/// The benchmarks `--benchmarks` names, in order.
///
/// An empty list runs none, as db_bench's.
///
/// # Errors
/// An unknown name, with the flag named.
pub fn benchmarks(args: &Args) -> Result<Vec<Benchmark>, String> {
    parse_benchmarks(&args.benchmarks).map_err(|e| format!("--benchmarks={}: {e}", args.benchmarks))
}

/// The store flags' limits (shared in spirit with `shale ycsb`'s: `crate::store`).
fn check_store_flags(args: &Args) -> Result<(), String> {
    crate::store::check_store_sizes(&crate::store::StoreSizeFlags {
        write_buffer_size: args.write_buffer_size,
        max_write_buffer_number: args.max_write_buffer_number,
        target_file_size_base: args.target_file_size_base,
        max_bytes_for_level_base: args.max_bytes_for_level_base,
    })?;
    if let Some(v) = args.max_bytes_for_level_multiplier {
        in_range("max_bytes_for_level_multiplier", v, LEVEL_MULTIPLIER, "")?;
    }
    if let Some(v) = args.block_size {
        in_range("block_size", v, BLOCK_BYTES, "")?;
    }
    check_l0_triggers(args)?;
    if let Some(v) = args.bloom_bits.filter(|b| b.is_nan() || *b >= 0.0) {
        in_range(
            "bloom_bits",
            v,
            f64::from(*BLOOM_BITS.start())..=f64::from(*BLOOM_BITS.end()),
            "bits per key; negative means the default",
        )?;
    }
    Ok(())
}

/// The L0 triggers must be ordered, compaction <= slowdown <= stop, and the first at least 1;
/// the engine's defaults fill in the flags not given, and the message names the flags.
fn check_l0_triggers(args: &Args) -> Result<(), String> {
    let d = Options::default();
    let given = |v: Option<usize>, default: usize| v.unwrap_or(default);
    let t = given(args.level0_file_num_compaction_trigger, d.level0_file_num_compaction_trigger);
    let s = given(args.level0_slowdown_writes_trigger, d.level0_slowdown_writes_trigger);
    let p = given(args.level0_stop_writes_trigger, d.level0_stop_writes_trigger);
    in_range("level0_file_num_compaction_trigger", t, 1..=usize::MAX, "")?;
    if t > s || s > p {
        return Err(format!(
            "the L0 triggers must satisfy --level0_file_num_compaction_trigger={t} <= \
             --level0_slowdown_writes_trigger={s} <= --level0_stop_writes_trigger={p} \
             (flags not given take the engine's defaults)"
        ));
    }
    Ok(())
}

/// Warns about each given flag the engine has no knob for.
fn warn_unsupported(args: &Args, warn: &mut dyn FnMut(String)) {
    if args.disable_wal == Some(true) {
        warn("--disable_wal is not supported yet and has no effect: every write goes through the WAL".into());
    }
}

/// The engine's background jobs for `--max_background_jobs`: one flush thread and at least one
/// compaction thread, so values below 2 (RocksDB takes 1, and -1 for its default of 2) become
/// 2, and values above the engine's bound become the bound, each with a warning.
fn background_jobs(jobs: i64, warn: &mut dyn FnMut(String)) -> usize {
    let max = BACKGROUND_JOBS_MAX as i64;
    let used = jobs.clamp(2, max);
    if used != jobs {
        warn(format!(
            "--max_background_jobs={jobs}: the engine runs one flush thread and 1 to {} compaction threads, using {used}",
            max - 1
        ));
    }
    used as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse_args;
    use shale_lsm::sst::Compression;

    fn plan_of(flags: &[&str]) -> (Result<DbPlan, String>, Vec<String>) {
        let args = parse_args(flags.iter().copied()).unwrap();
        let mut warnings = Vec::new();
        let plan = plan(&args, &mut |w| warnings.push(w));
        (plan, warnings)
    }

    #[test]
    fn flags_reach_the_engine_options() {
        let (plan, warnings) = plan_of(&[
            "--write_buffer_size=1048576",
            "--max_write_buffer_number=3",
            "--target_file_size_base=2097152",
            "--max_bytes_for_level_base=8388608",
            "--level0_file_num_compaction_trigger=2",
            "--level0_slowdown_writes_trigger=8",
            "--level0_stop_writes_trigger=12",
            "--cache_size=1000000",
            "--prepopulate_block_cache=0",
            "--block_size=8192",
            "--bloom_bits=6",
            "--compression_type=lz4",
            "--level_compaction_dynamic_level_bytes=false",
            "--use_direct_reads=1",
            "--cache_index_and_filter_blocks=true",
        ]);
        let o = plan.unwrap().options;
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(!o.dynamic_level_bytes);
        assert!(o.use_direct_reads);
        assert!(!plan_of(&[]).0.unwrap().options.use_direct_reads, "db_bench's default: buffered");
        assert!(!plan_of(&["--use_direct_reads=false"]).0.unwrap().options.use_direct_reads);
        assert!(plan_of(&["--use_direct_reads"]).0.unwrap().options.use_direct_reads);
        let direct_writes = |flags: &[&str]| {
            plan_of(flags).0.unwrap().options.use_direct_io_for_flush_and_compaction
        };
        assert!(!direct_writes(&[]), "db_bench's default: buffered SST writes");
        assert!(!direct_writes(&["--use_direct_io_for_flush_and_compaction=false"]));
        assert!(direct_writes(&["--use_direct_io_for_flush_and_compaction=true"]));
        assert!(direct_writes(&["--use_direct_io_for_flush_and_compaction"]));
        assert!(o.cache_index_and_filter_blocks);
        let cached =
            |flags: &[&str]| plan_of(flags).0.unwrap().options.cache_index_and_filter_blocks;
        assert!(!cached(&[]), "db_bench's default: held by the readers");
        assert!(!cached(&["--cache_index_and_filter_blocks=0"]));
        assert!(cached(&["--cache_index_and_filter_blocks"]));
        let dynamic = |flags: &[&str]| plan_of(flags).0.unwrap().options.dynamic_level_bytes;
        assert!(!dynamic(&[]), "db_bench's default: static level sizes");
        assert!(dynamic(&["--level_compaction_dynamic_level_bytes"]));
        assert!(dynamic(&["--level_compaction_dynamic_level_bytes=true"]));
        assert_eq!((o.write_buffer_bytes, o.max_write_buffer_number), (1 << 20, 3));
        assert_eq!((o.target_file_size_base, o.max_bytes_for_level_base), (2 << 20, 8 << 20));
        assert_eq!(
            (
                o.level0_file_num_compaction_trigger,
                o.level0_slowdown_writes_trigger,
                o.level0_stop_writes_trigger
            ),
            (2, 8, 12)
        );
        assert_eq!(
            (o.block_cache_bytes, o.prepopulate_block_cache, o.sst.block_bytes),
            (1_000_000, false, 8192)
        );
        assert_eq!(o.sst.bloom_bits_per_key, 6);
        assert_eq!(o.sst.compression, Compression::Lz4);
        let cpu = |flags: &[&str]| plan_of(flags).0.unwrap().options.background_cpu_priority;
        assert_eq!(cpu(&[]), shale_lsm::CpuPriority::Normal, "the engine's default");
        assert_eq!(cpu(&["--background_cpu_priority=idle"]), shale_lsm::CpuPriority::Idle);
        assert_eq!(cpu(&["--background_cpu_priority", "LOW"]), shale_lsm::CpuPriority::Low);
        let refused = parse_args(["--background_cpu_priority=lowest"]).unwrap_err().to_string();
        assert!(refused.contains("normal, low, idle"), "{refused}");
    }

    #[test]
    fn flags_without_a_knob_warn_by_name() {
        let (plan, warnings) = plan_of(&["--disable_wal=1"]);
        assert!(plan.is_ok());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("--disable_wal") && warnings[0].contains("no effect"));
        let (_, quiet) = plan_of(&["--disable_wal=false"]);
        assert!(quiet.is_empty(), "the engine already does what --disable_wal=false asks");
    }

    #[test]
    fn background_jobs_reach_the_engine_within_its_bounds() {
        let (plan, warnings) = plan_of(&["--max_background_jobs=6"]);
        assert_eq!(plan.unwrap().options.max_background_jobs, 6);
        assert!(warnings.is_empty(), "{warnings:?}");
        for (flag, used) in [("--max_background_jobs=1", 2), ("--max_background_jobs=-1", 2)] {
            let (plan, warnings) = plan_of(&[flag]);
            assert_eq!(plan.unwrap().options.max_background_jobs, used);
            assert!(warnings.len() == 1 && warnings[0].contains("using 2"), "{warnings:?}");
        }
        let (plan, warnings) = plan_of(&["--max_background_jobs=1000"]);
        assert_eq!(plan.unwrap().options.max_background_jobs, BACKGROUND_JOBS_MAX);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn bad_values_are_refused() {
        let err = plan_of(&["--compression_type=snappy"]).0.unwrap_err();
        assert!(err.contains("snappy"), "{err}");
        assert!(plan_of(&["--threads=0"]).0.is_err());
        assert!(plan_of(&["--key_size=1", "--num=1000"]).0.is_err());
        assert!(plan_of(&["--key_size=2", "--num=1000"]).0.is_ok());
        let err =
            plan_of(&["--level0_slowdown_writes_trigger=2", "--level0_stop_writes_trigger=1"]).0;
        assert!(err.unwrap_err().contains("--level0_stop_writes_trigger=1"));
    }

    #[test]
    fn small_target_files_get_small_slots() {
        let o = plan_of(&["--target_file_size_base=300000"]).0.unwrap().options;
        assert_eq!(o.volume.layout.slot_bytes, 256 << 10);
        let big = plan_of(&["--write_buffer_size=268435456"]).0.unwrap().options;
        assert!(big.volume_options().layout.wal_bytes >= 3 * (256 << 20));
    }
}
