//! `shale inspect PATH`: the layout, version-log state and slot use of a volume, and what
//! its engine keeps there (told from the store, `engine_kind.rs`), read without writing
//! anything (a blank or missing path is an error, never a new volume): for an lsm store its
//! levels with every SST (`--summary`: the levels without their SSTs); for a hash store its
//! segments with their generations, records and live bytes, its keys and its index
//! checkpoint; for a table store its tables with their schemas, rows and blocks, and where
//! its undo log is. A tiered store is inspected with `--capacity_path`: both volumes, each
//! SST's tier. A hash or table store's layout is read as `shale check` reads it, under a
//! shared store lock: one open for writing is named in use.

use std::path::PathBuf;

use shale_io::FileOptions;
use shale_space::{IoClass, Tier, Volume, VolumeOptions, hex};

use crate::engine_kind::EngineKind;

/// Arguments of `shale inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// A volume: its directory, its file, or a block device.
    path: PathBuf,
    /// Also list every live extent.
    #[arg(long)]
    extents: bool,
    /// Show each level's totals only, without its SSTs.
    #[arg(long)]
    summary: bool,
    /// The capacity volume of a tiered store (its directory, its file, or a block device).
    #[arg(long = "capacity_path", alias = "capacity-path")]
    capacity_path: Option<PathBuf>,
}

const MIB: f64 = 1024.0 * 1024.0;
/// Bytes of a key shown before it is cut short.
const KEY_SHOWN_BYTES_MAX: usize = 32;

/// A key as printable text: ASCII letters, digits and punctuation as they are, every other
/// byte (and the quote and backslash) as `\xNN`, cut after `KEY_SHOWN_BYTES_MAX` bytes with
/// its full length noted, so binary keys and terminal escapes print safely.
fn shown_key(key: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in key.iter().take(KEY_SHOWN_BYTES_MAX) {
        if (b.is_ascii_graphic() || b == b' ') && b != b'"' && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    if key.len() > KEY_SHOWN_BYTES_MAX {
        out.push_str(&format!("...({} bytes)", key.len()));
    }
    out
}

/// One SST: id, slots, bytes, entries, sequence numbers, and its user-key range.
/// One SST's line; a tiered store's names its volume.
fn print_sst(m: &shale_lsm::version_edit::SstMeta, tiered: bool) {
    let user_key = |k: &[u8]| shown_key(shale_lsm::key::user_key(k));
    let tier = if tiered { format!("{:<9}", m.extent.tier.name()) } else { String::new() };
    println!(
        "                SST {:<6} {tier}slots {:>6}+{:<3} {:>10} bytes {:>8} entries  seq {}..{}  \
         {}..{}",
        m.id,
        m.extent.first,
        m.extent.count,
        m.bytes,
        m.entries,
        m.smallest_seq,
        m.largest_seq,
        user_key(&m.smallest),
        user_key(&m.largest)
    );
}

/// The lsm engine's levels, read from the committed version records without opening anything:
/// each level's totals, then (unless `summary`) its SSTs, L0 newest first, deeper levels in
/// key order.
fn print_levels(
    versions: &shale_space::Versions,
    summary: bool,
    tiered: bool,
) -> Result<(), Box<dyn std::error::Error>> {
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
    for (level, files) in &mut levels {
        let bytes: u64 = files.iter().map(|m| m.bytes).sum();
        let slots: u64 = files.iter().map(|m| u64::from(m.extent.count)).sum();
        let entries: u64 = files.iter().map(|m| m.entries).sum();
        let on_capacity = files.iter().filter(|m| m.extent.tier == Tier::Capacity).count();
        let tiers = if on_capacity > 0 {
            format!(
                " ({} on the fast volume, {on_capacity} on the capacity one)",
                files.len() - on_capacity
            )
        } else {
            String::new()
        };
        println!(
            "              L{level}: {} SSTs, {:.1} MiB, {slots} slots, {entries} entries{tiers}",
            files.len(),
            bytes as f64 / MIB,
        );
        if summary {
            continue;
        }
        if *level == 0 {
            files.sort_by_key(|m| std::cmp::Reverse(m.id));
        } else {
            files.sort_by(|a, b| shale_lsm::key::compare(&a.smallest, &b.smallest));
        }
        for m in files.iter() {
            print_sst(m, tiered);
        }
    }
    Ok(())
}

/// A hash store's record log and index (`shale_hash::check_store`, which reads every
/// segment).
fn print_hash(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let r = shale_hash::check_store(path)
        .map_err(|e| format!("hash store: its layout cannot be read: {}", shale_io::Chain(&e)))?;
    let live: u64 = r.segments.iter().map(|s| s.live_bytes).sum();
    println!(
        "hash          {} segments, {} live keys ({:.1} MiB of live records), {} records ({} \
         stores, {} deletes)",
        r.segments.len(),
        r.keys,
        live as f64 / MIB,
        r.records,
        r.stores,
        r.records - r.stores
    );
    let index = if r.bounded { "bounded (pages on the volume)" } else { "in memory" };
    match r.checkpoint {
        Some((g, n)) => println!("index         {index}; checkpoint generation {g}, {n} entries"),
        None => println!("index         {index}; no checkpoint"),
    }
    if let Some((i, n)) = r.shard {
        println!("shard         {i} of {n}");
    }
    for s in &r.segments {
        let sealed = match s.sealed_pages {
            Some(p) => format!("sealed at {p} pages"),
            None => "active".to_string(),
        };
        println!(
            "              segment generation {:<6} slots {:>6}+{:<3} {:>7} pages ({sealed}) \
             {:>9} records {:>12} live bytes",
            s.generation, s.first_slot, s.slots, s.pages, s.records, s.live_bytes
        );
    }
    Ok(())
}

/// A table store's tables (`shale_table::check_store`, which reads every block).
fn print_tables(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let r = shale_table::check_store(path)
        .map_err(|e| format!("table store: its tables cannot be read: {}", shale_io::Chain(&e)))?;
    let undo = match &r.undo_file {
        Some(p) => format!("in {}", p.display()),
        None => "on the volume".to_string(),
    };
    let spill = match (r.spill_bytes, &r.undo_file) {
        (Some(b), None) => format!(" (a ring of {:.1} MiB)", b as f64 / MIB),
        (Some(b), Some(_)) => format!(", its spill area on the volume {:.1} MiB", b as f64 / MIB),
        (None, _) => String::new(),
    };
    println!("table         {} tables; undo log {undo}{spill}", r.tables.len());
    for t in &r.tables {
        println!(
            "              table {} (id {}): {} rows, {} dead ({} bytes), {} segments, {} of {} \
             blocks used",
            shown_key(t.name.as_bytes()),
            t.id,
            t.rows,
            t.dead_rows,
            t.dead_bytes,
            t.segments,
            t.blocks_used,
            t.blocks
        );
        let columns: Vec<String> = t
            .schema
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let ty = match c.ty {
                    shale_table::ColumnType::Fixed(n) => format!("fixed {n}"),
                    shale_table::ColumnType::Var(n) => format!("var up to {n}"),
                };
                let key = if i == 0 { ", primary key" } else { "" };
                format!("{} ({ty}{key})", shown_key(c.name.as_bytes()))
            })
            .collect();
        println!("                columns: {}", columns.join(", "));
    }
    Ok(())
}

/// Runs the command.
///
/// # Errors
/// Whatever opening the volume reports (foreign, damaged, newer format, I/O).
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    // Read-only all the way down (O_RDONLY, no creation, no commit), so it works on a
    // read-only mount; it takes no store lock, so it also reads a store open for writing.
    let no_files = FileOptions::default();
    let opened = match &args.capacity_path {
        None => Volume::open_path_read_only(&args.path, &opts, &no_files)?,
        Some(cap) => Volume::open_path_tiered_read_only(&args.path, cap, &opts, &no_files)?,
    };
    let v = &opened.volume;
    let h = v.header();
    let l = h.layout;
    let info = v.device().info();
    let path_is_file =
        std::fs::metadata(shale_space::volume_file(&args.path)).is_ok_and(|m| m.is_file());
    println!("volume        {} ({} volume)", hex(&h.volume_id), h.role.name());
    println!("path          {}", shale_space::volume_file(&args.path).display());
    if let (Some(cap), Some(ch)) = (&args.capacity_path, v.tier_header(Tier::Capacity)) {
        let ci = v.tier_device_ref(Tier::Capacity).expect("a tiered volume").info();
        println!(
            "capacity      {} at {}: {} backend, {} bytes ({:.1} MiB), slots from byte {}",
            hex(&ch.volume_id),
            shale_space::volume_file(cap).display(),
            ci.backend,
            ci.capacity,
            ci.capacity as f64 / MIB,
            ch.layout.slot_offset
        );
    }
    println!(
        "format        version {}, created {} (unix seconds), engine {}",
        h.format_version,
        h.created_unix_secs,
        h.engine.map_or("not recorded (format before 3)", |k| k.name())
    );
    println!(
        "device        {} backend, {} bytes ({:.1} MiB), {}-byte blocks, {}",
        info.backend,
        info.capacity,
        info.capacity as f64 / MIB,
        info.block_size,
        // Opened read-only, a file cannot grow now; it is still a file that grows in use.
        if info.growable || path_is_file { "growable" } else { "fixed size" }
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
         {} objects read from mirror B",
        s.head,
        s.used_bytes,
        s.ring_bytes,
        100.0 * s.used_bytes as f64 / s.ring_bytes as f64,
        s.wraps,
        s.repaired
    );
    let damaged = v.damaged_copies();
    println!(
        "redundancy    {}",
        if damaged.is_empty() {
            "every header copy and version log copy intact".to_string()
        } else {
            format!("{} damaged copies (a read-write open repairs them)", damaged.len())
        }
    );
    for d in damaged {
        println!("              damaged: {} at byte offset {}", d.what, d.offset);
    }
    for &tier in v.tiers() {
        let u = v.tier_slot_usage(tier);
        let name = if v.is_tiered() { format!("{:<9}", tier.name()) } else { String::new() };
        println!(
            "slots         {name}{} total: {} live, {} free ({} free runs, longest {})",
            u.total, u.live, u.free, u.free_runs, u.largest_free_run
        );
    }
    let live = v.live_extents();
    println!("extents       {} live", live.len());
    if args.extents {
        for e in &live {
            let r = v.extent_range(*e);
            let (_, start) = Tier::split(r.start);
            let name = if v.is_tiered() { format!("{:<9}", e.tier.name()) } else { String::new() };
            println!(
                "              {name}slot {:>8} x {:<6} bytes {}..{}",
                e.first,
                e.count,
                start,
                start + (r.end - r.start)
            );
        }
    }
    match crate::engine_kind::engine_of_versions(&opened.versions) {
        EngineKind::Lsm => print_levels(&opened.versions, args.summary, v.is_tiered())?,
        EngineKind::Hash => print_hash(&args.path)?,
        EngineKind::Table => print_tables(&args.path)?,
    }
    let log_io = v.io(IoClass::VersionLog);
    println!("recovery I/O  {} reads, {} bytes of version log", log_io.reads, log_io.read_bytes);
    v.check_slots()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_safely() {
        assert_eq!(shown_key(b"user:42 a"), r#""user:42 a""#);
        assert_eq!(shown_key(b"\x00\xff\x1b[2J\"\\"), r#""\x00\xff\x1b[2J\x22\x5c""#);
        let long = vec![b'k'; 40];
        assert_eq!(shown_key(&long), format!("\"{}\"...(40 bytes)", "k".repeat(32)));
    }
}
