//! What `shale bench` and `shale ycsb` share about the store they open: emptying it, naming
//! its compression, laying out a new volume to suit the options.

use std::path::Path;

use shale_lsm::Options;
use shale_lsm::sst::Compression;

/// Smallest slot a volume is laid out with when `--target_file_size_base` asks for small SSTs.
const SLOT_BYTES_MIN: u64 = 64 << 10;

/// Removes the store at `path` so a benchmark starts empty: a directory's volume file, or the
/// volume file itself. Nothing else is deleted; a block device is refused. `tool` names the
/// command in the error.
pub fn destroy(path: &Path, tool: &str) -> Result<(), Box<dyn std::error::Error>> {
    let target =
        if path.is_dir() { path.join(shale_space::VOLUME_FILE_NAME) } else { path.to_path_buf() };
    match std::fs::metadata(&target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
        Ok(m) if m.is_file() => Ok(std::fs::remove_file(&target)?),
        Ok(_) => Err(format!(
            "--db {} is not a directory or volume file; {tool} only empties those \
             (pass --use_existing_db to keep it)",
            path.display()
        )
        .into()),
    }
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

/// Lays out a new volume to suit the options: slots no larger than the target SST size, and a
/// WAL area with room for each WAL group to hold a full memtable's batches.
pub fn fit_volume(o: &mut Options) {
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
