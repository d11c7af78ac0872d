//! `shale inspect PATH`: the layout, version-log state and slot use of a volume, read without
//! writing anything (a blank or missing path is an error, never a new volume).

use std::path::PathBuf;

use shale_io::FileOptions;
use shale_space::{IoClass, Volume, VolumeOptions, hex};

/// Arguments of `shale inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// A volume: its directory, its file, or a block device.
    path: PathBuf,
    /// Also list every live extent.
    #[arg(long)]
    extents: bool,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The lsm engine's levels, read from the committed version records without opening anything.
fn print_levels(versions: &shale_space::Versions) -> Result<(), Box<dyn std::error::Error>> {
    let folded = match shale_lsm::version_edit::fold(versions) {
        Ok(f) => f,
        Err(e) => {
            // The volume may hold another engine's state; inspect still shows the volume.
            println!("lsm           not an lsm store: its version records do not decode ({e})");
            return Ok(());
        }
    };
    if folded.live.is_empty() && folded.last_seq == 0 {
        println!("lsm           no engine state yet");
        return Ok(());
    }
    println!(
        "lsm           last sequence {}, oldest unflushed WAL generation {}, next {}",
        folded.last_seq, folded.oldest_unflushed_ltn, folded.next_ltn
    );
    let mut levels: std::collections::BTreeMap<u8, Vec<&shale_lsm::version_edit::SstMeta>> =
        Default::default();
    for (level, meta) in folded.live.values() {
        levels.entry(*level).or_default().push(meta);
    }
    for (level, files) in &levels {
        let bytes: u64 = files.iter().map(|m| m.bytes).sum();
        let entries: u64 = files.iter().map(|m| m.entries).sum();
        println!(
            "              L{level}: {} SSTs, {:.1} MiB, {} entries",
            files.len(),
            bytes as f64 / MIB,
            entries
        );
    }
    Ok(())
}

/// Runs the command.
///
/// # Errors
/// Whatever opening the volume reports (foreign, damaged, newer format, I/O).
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    let opened = Volume::open_path(&args.path, &opts, &FileOptions::default())?;
    let v = &opened.volume;
    let h = v.header();
    let l = h.layout;
    let info = v.device().info();
    println!("volume        {}", hex(&h.volume_id));
    println!("path          {}", shale_space::volume_file(&args.path).display());
    println!(
        "format        version {}, created {} (unix seconds)",
        h.format_version, h.created_unix_secs
    );
    println!(
        "device        {} backend, {} bytes ({:.1} MiB), {}-byte blocks, {}",
        info.backend,
        info.capacity,
        info.capacity as f64 / MIB,
        info.block_size,
        if info.growable { "growable" } else { "fixed size" }
    );
    println!("layout        area           offset        bytes");
    println!("              header         {:>12}  {:>12}", 0, shale_space::HEADER_AREA_BYTES);
    println!(
        "              version log A  {:>12}  {:>12}",
        l.mirror_offset(0),
        l.version_log_bytes
    );
    println!(
        "              version log B  {:>12}  {:>12}",
        l.mirror_offset(1),
        l.version_log_bytes
    );
    println!("              WAL            {:>12}  {:>12}", l.wal_offset, l.wal_bytes);
    println!("              slots          {:>12}  {:>12} each", l.slot_offset, l.slot_bytes);
    let s = v.log_state();
    println!(
        "version log   base SN {} (lsn {}, ring offset {}), {} deltas since, next lsn {}",
        s.base_sn, s.base_lsn, s.base_pos, s.deltas, s.next_lsn
    );
    println!(
        "              head at {}, {} of {} ring bytes live ({:.1}%), {} WOR wraps in the live chain, \
         {} copies repaired from mirror B",
        s.head,
        s.used_bytes,
        s.ring_bytes,
        100.0 * s.used_bytes as f64 / s.ring_bytes as f64,
        s.wraps,
        s.repaired
    );
    let u = v.slot_usage();
    println!(
        "slots         {} total: {} live, {} free ({} free runs, longest {})",
        u.total, u.live, u.free, u.free_runs, u.largest_free_run
    );
    let live = v.live_extents();
    println!("extents       {} live", live.len());
    if args.extents {
        for e in &live {
            let r = v.extent_range(*e);
            println!(
                "              slot {:>8} x {:<6} bytes {}..{}",
                e.first, e.count, r.start, r.end
            );
        }
    }
    print_levels(&opened.versions)?;
    let log_io = v.io(IoClass::VersionLog);
    println!("recovery I/O  {} reads, {} bytes of version log", log_io.reads, log_io.read_bytes);
    v.check_slots()?;
    Ok(())
}
