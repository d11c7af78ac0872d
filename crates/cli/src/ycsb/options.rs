//! From `shale ycsb`'s store flags to the engine's options.
//!
//! The flags are db_bench's names for the same knobs, as `shale bench` takes them, and the
//! volume is laid out to suit them the same way (`crate::store`).

use shale_lsm::Options;

use crate::store::{fit_volume, parse_compression};
use crate::ycsb::Args;

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
    o.sst.compression = parse_compression(&args.compression_type)?.0;
    fit_volume(&mut o);
    o.validate().map_err(|e| format!("the engine refuses these options: {e}"))?;
    Ok(o)
}
