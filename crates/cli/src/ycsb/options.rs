//! From `shale ycsb`'s store flags to the engine's options.
//!
//! The flags are db_bench's names for the same knobs, as `shale bench` takes them. The volume
//! is laid out to suit them as `shale bench` lays it out (its `config` module is private to
//! it, so the few lines are repeated here).

use shale_lsm::Options;
use shale_lsm::sst::Compression;

use crate::ycsb::Args;

/// Smallest slot a volume is laid out with when `--target_file_size_base` asks for small SSTs.
const SLOT_BYTES_MIN: u64 = 64 << 10;

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
    o.sst.compression = match args.compression_type.to_ascii_lowercase().as_str() {
        "none" | "no" => Compression::None,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => {
            return Err(format!("--compression_type={other} is not supported (none, lz4 or zstd)"));
        }
    };
    fit_volume(&mut o);
    o.validate().map_err(|e| format!("the engine refuses these options: {e}"))?;
    Ok(o)
}

/// Lays out a new volume to suit the options: slots no larger than the target SST size, and a
/// WAL area with room for each WAL group to hold a full memtable's batches.
fn fit_volume(o: &mut Options) {
    let groups = u64::from(o.wal_groups());
    let layout = &mut o.volume.layout;
    if o.target_file_size_base < layout.slot_bytes {
        let below = 1u64 << (63 - o.target_file_size_base.max(1).leading_zeros());
        layout.slot_bytes = below.max(SLOT_BYTES_MIN);
    }
    // A group holds a memtable's batches plus record framing: half as much again is room.
    let group = (o.write_buffer_bytes as u64 * 3 / 2).next_multiple_of(shale_space::AREA_ALIGN);
    layout.wal_bytes = layout.wal_bytes.max(group * groups);
}
