//! From `shale ycsb`'s store flags to the engine's options.
//!
//! The flags are db_bench's names for the same knobs, as `shale bench` takes them, and the
//! volume is laid out to suit them the same way (`crate::store`).

use shale_lsm::Options;

use crate::store::{
    BLOOM_BITS, ENTRY_BYTES_MAX, check_batch, fit_volume, in_range, parse_compression,
};
use crate::ycsb::Args;

/// Most client threads: each is an OS thread, and beyond this spawning them fails.
pub const THREADS_MAX: usize = 1024;

/// Refuses values beyond their limits, each named with its limit, before anything runs (an
/// absurd record size would otherwise fail at the first write, or exhaust memory building it).
///
/// # Errors
/// The first value beyond its limit.
pub fn check_limits(args: &Args) -> Result<(), String> {
    in_range("threads", args.threads, 1..=THREADS_MAX, "each is an OS thread")?;
    in_range("fieldcount", args.field_count(), 1..=ENTRY_BYTES_MAX, "")?;
    in_range("fieldlength", args.field_length(), 0..=ENTRY_BYTES_MAX, "")?;
    let record = args.field_count().saturating_mul(args.field_length().saturating_add(16));
    in_range(
        "fieldcount x fieldlength",
        record,
        0..=ENTRY_BYTES_MAX,
        "a record must fit an SST block",
    )?;
    // "user" and the record number, padded: a key must stay within the engine's limit.
    in_range(
        "zeropadding",
        args.zeropadding,
        1..=shale_lsm::options::KEY_BYTES_MAX - 4,
        "digits of a key",
    )?;
    crate::store::check_store_sizes(&crate::store::StoreSizeFlags {
        write_buffer_size: args.write_buffer_size,
        max_write_buffer_number: args.max_write_buffer_number,
        target_file_size_base: args.target_file_size_base,
        max_bytes_for_level_base: args.max_bytes_for_level_base,
    })?;
    if let Some(v) = args.bloom_bits {
        in_range("bloom_bits", v, BLOOM_BITS, "bits per key")?;
    }
    for (flag, v) in [
        ("readproportion", args.readproportion),
        ("updateproportion", args.updateproportion),
        ("insertproportion", args.insertproportion),
        ("scanproportion", args.scanproportion),
        ("readmodifywriteproportion", args.readmodifywriteproportion),
    ] {
        if let Some(v) = v {
            in_range(flag, v, 0.0..=1e9, "a weight among the operations")?;
        }
    }
    let wbs = args.write_buffer_size.unwrap_or(Options::default().write_buffer_bytes);
    check_batch(1, record, "--fieldcount x --fieldlength", wbs)
}

/// The engine's options for `args`.
///
/// # Errors
/// An unknown compression, or options the engine refuses (naming the first).
pub fn options(args: &Args) -> Result<Options, String> {
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
    if let Some(v) = args.cache_size {
        o.block_cache_bytes = v;
    }
    if let Some(bits) = args.bloom_bits {
        o.sst.bloom_bits_per_key = bits;
    }
    if let Some(v) = args.idle_compaction_io {
        o.idle_compaction_io = v;
    }
    if let Some(v) = args.background_cpu_priority {
        o.background_cpu_priority = v;
    }
    o.sst.compression = parse_compression(&args.compression_type)?.0;
    fit_volume(&mut o);
    crate::store::validate_for_flags(&o)?;
    Ok(o)
}
