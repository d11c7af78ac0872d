//! Property test of `shale bench`'s flag parsing and option validation, in process: any
//! combination of flags and values parses to an error or to options the engine accepts,
//! never a panic (issue #9's "every option at zero, negative, one past its limit, absurd").

use proptest::prelude::*;

use crate::bench::options_from_args;
use crate::store::{WRITE_BUFFER_BYTES, WRITE_BUFFER_NUMBER};

/// Every flag `shale bench` maps, a few it accepts and ignores, and some it does not know.
const FLAGS: &[&str] = &[
    "benchmarks",
    "num",
    "reads",
    "threads",
    "duration",
    "key_size",
    "value_size",
    "batch_size",
    "seed",
    "sync",
    "disable_wal",
    "db",
    "use_existing_db",
    "write_buffer_size",
    "max_write_buffer_number",
    "max_background_jobs",
    "target_file_size_base",
    "max_bytes_for_level_base",
    "max_bytes_for_level_multiplier",
    "soft_pending_compaction_bytes_limit",
    "hard_pending_compaction_bytes_limit",
    "delayed_write_rate",
    "level_compaction_dynamic_level_bytes",
    "level0_file_num_compaction_trigger",
    "level0_slowdown_writes_trigger",
    "level0_stop_writes_trigger",
    "compression_type",
    "bloom_bits",
    "cache_size",
    "prepopulate_block_cache",
    "block_size",
    "block_align",
    "histogram",
    "statistics",
    "stats_interval_seconds",
    "benchmark_write_rate_limit",
    "max_open_files",
    "open_files",
    "use_direct_reads",
    "use_direct_io_for_flush_and_compaction",
    "idle_compaction_io",
    "background_cpu_priority",
    "cache_index_and_filter_blocks",
    "mmap_read",
    "nommap_read",
    "compression_ratio",
    "no_such_flag",
    "",
];

/// Values at the edges: zero, negative, limits and one past them, absurd, not numbers.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1".to_string()),
        Just("2".to_string()),
        Just("65535".to_string()),
        Just("65536".to_string()),
        Just("2147483648".to_string()),
        Just("4294967297".to_string()),
        Just("67108864".to_string()),
        Just("1000000000000000".to_string()),
        Just(u64::MAX.to_string()),
        Just(i64::MIN.to_string()),
        Just("1e15".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("0.5".to_string()),
        Just("true".to_string()),
        Just(String::new()),
        Just("fillseq,readrandom".to_string()),
        Just("fillbatch,filluniquerandom".to_string()),
        Just("nosuchbench".to_string()),
        Just("lz4".to_string()),
        Just("idle".to_string()),
        Just("low".to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        "[ -~]{0,12}",
    ]
}

/// One flag as it may be written: `--flag=value`, `--flag value`, or `--flag` alone.
fn flag() -> impl Strategy<Value = Vec<String>> {
    (prop::sample::select(FLAGS), value(), 0..3u8).prop_map(|(name, v, form)| match form {
        0 => vec![format!("--{name}={v}")],
        1 => vec![format!("--{name}"), v],
        _ => vec![format!("--{name}")],
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_flags_parse_to_an_error_or_options_the_engine_accepts(
        flags in prop::collection::vec(flag(), 0..8)
    ) {
        let flags: Vec<String> = flags.into_iter().flatten().collect();
        let argv: Vec<&str> = flags.iter().map(String::as_str).collect();
        if let Ok((args, plan, _warnings)) = options_from_args(&argv) {
            let o = &plan.options;
            prop_assert!(o.validate().is_ok(), "{argv:?}");
            prop_assert!(WRITE_BUFFER_BYTES.contains(&o.write_buffer_bytes), "{argv:?}");
            prop_assert!(WRITE_BUFFER_NUMBER.contains(&o.max_write_buffer_number), "{argv:?}");
            prop_assert!((1..=crate::bench::config::THREADS_MAX).contains(&args.threads));
            prop_assert!(args.duration <= crate::bench::config::SECONDS_MAX);
            prop_assert!(o.sst.block_bytes > 0 && o.sst.bloom_bits_per_key <= 100);
        }
    }
}

#[test]
fn each_limit_is_named_one_past_it() {
    for (flags, needle) in [
        (&["--write_buffer_size=65535"][..], "--write_buffer_size=65535 is outside 65536..="),
        (&["--write_buffer_size=4294967297"][..], "--write_buffer_size=4294967297 is outside"),
        (&["--max_write_buffer_number=65"][..], "--max_write_buffer_number=65 is outside 2..=64"),
        (&["--max_write_buffer_number=1"][..], "--max_write_buffer_number=1"),
        (&["--threads=1025"][..], "--threads=1025 is outside 1..=1024"),
        (&["--threads=0"][..], "--threads=0"),
        (&["--key_size=0"][..], "--key_size=0"),
        (&["--key_size=65537"][..], "--key_size=65537"),
        (&["--value_size=33554433"][..], "--value_size=33554433 is outside 0..=33554432"),
        (&["--batch_size=0"][..], "--batch_size=0"),
        (
            &["--batch_size=1000000"][..],
            "--batch_size=1000000 x (--key_size=16 + --value_size=100)",
        ),
        (&["--duration=4294967297"][..], "--duration=4294967297"),
        (&["--stats_interval_seconds=4294967297"][..], "--stats_interval_seconds="),
        (&["--block_size=0"][..], "--block_size=0 is outside 256..="),
        (&["--bloom_bits=101"][..], "--bloom_bits=101 is outside 0..=100"),
        (&["--bloom_bits=NaN"][..], "--bloom_bits=NaN"),
        (&["--max_bytes_for_level_multiplier=1"][..], "--max_bytes_for_level_multiplier=1"),
        (&["--max_bytes_for_level_multiplier=1001"][..], "--max_bytes_for_level_multiplier=1001"),
        (&["--target_file_size_base=65535"][..], "--target_file_size_base=65535"),
        (&["--target_file_size_base=68719476737"][..], "--target_file_size_base=68719476737"),
        (&["--max_bytes_for_level_base=0"][..], "--max_bytes_for_level_base=0"),
        (&["--level0_file_num_compaction_trigger=0"][..], "--level0_file_num_compaction_trigger=0"),
        (&["--level0_stop_writes_trigger=1"][..], "--level0_stop_writes_trigger=1"),
        (
            &["--benchmarks=filluniquerandom", "--num=268435457"][..],
            "--num=268435457 is outside 0..=268435456",
        ),
        (&["--compression_type=snappy"][..], "--compression_type=snappy"),
        (&["--num=-1"][..], "--num"),
        (&["--prepopulate_block_cache=2"][..], "--prepopulate_block_cache"),
    ] {
        let err = options_from_args(flags).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
}

#[test]
fn values_at_their_limits_are_accepted() {
    for flags in [
        &["--write_buffer_size=65536", "--target_file_size_base=65536"][..],
        &["--write_buffer_size=2147483648"][..],
        &["--max_write_buffer_number=64"][..],
        &["--threads=1024", "--num=0", "--value_size=0", "--seed=18446744073709551615"][..],
        &["--value_size=33554432", "--write_buffer_size=134217728"][..],
        &["--bloom_bits=0", "--bloom_bits=100", "--bloom_bits=-1"][..],
        &["--max_background_jobs=-1", "--max_background_jobs=9223372036854775807"][..],
        &["--duration=4294967296", "--cache_size=0", "--benchmark_write_rate_limit=0"][..],
        &["--soft_pending_compaction_bytes_limit=0", "--hard_pending_compaction_bytes_limit=0"][..],
    ] {
        let r = options_from_args(flags);
        assert!(r.is_ok(), "{flags:?}: {:?}", r.err().map(|e| e.to_string()));
    }
}
