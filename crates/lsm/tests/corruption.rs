//! Corruption of persisted bytes (P4): a flipped byte yields `Error::Corruption`, never wrong
//! data, never a panic, and never a silent loss of synced writes.
//!
//! Three areas of a store on the simulated device are damaged, one byte at a time, each on a
//! fresh copy of a cleanly written image (so the block cache cannot hide the damage):
//! - (a) SSTs: bytes sampled inside every live SST's extent. Every get, a full scan and
//!   `Db::check` must each return the right data or a Corruption error; a flipped byte that
//!   belongs to the SST (not its zero padding) must make `Db::check` (or the open) fail.
//!   Every byte of every range-deletion block too: a lost tombstone would bring deleted keys
//!   back, so each flip must fail the open or a read.
//! - (b) the WAL: bytes of the pages of a synced write that a later synced write follows. The
//!   open must fail with Corruption rather than cut the log there, which would silently drop
//!   the later synced writes (only a torn tail after the last synced write may be cut).
//! - (c) the version log, either mirror: the open returns Corruption or repairs from the other
//!   mirror; either way no wrong data is ever read.
//!
//! Why: checksums are only worth what the code that checks them does with a mismatch.

mod common;

use std::sync::Arc;

use common::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use shale_io::{Damage, SimDevice};
use shale_lsm::{Db, Error, WriteBatch, WriteOptions};

const KEYS: u16 = 200;
const VALUE_FILLER_MAX: usize = 900;
/// Values of the WAL case: large enough that some writes span pages.
const WAL_VALUE_FILLER_MAX: usize = 4000;

/// The tests' options: those of `common` with L0 compacted only past four SSTs, so that the
/// stores below keep several sorted runs (a seek then reads a block of each, in a batch).
fn options() -> shale_lsm::Options {
    let mut o = small_options();
    o.level0_file_num_compaction_trigger = 4;
    // Sync writes through the WAL pipeline, so its pages' durable claims are checked too.
    o.adaptive_wal_loggers = false;
    o
}

/// A closed store with SSTs in L0 and L1, and what it holds.
fn store_with_ssts() -> (Vec<u8>, State) {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 3).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options()).unwrap();
    let mut state = State::new();
    for round in 0..3u32 {
        for n in (0..KEYS).filter(|n| round == 0 || n % (round as u16 + 2) == 0) {
            let stamp = (round * 1000 + u32::from(n), 0);
            db.put(&key(n), &value(n, stamp, VALUE_FILLER_MAX)).unwrap();
            state.insert(n, stamp);
        }
        if round == 0 {
            db.compact_range().unwrap();
        } else {
            db.flush().unwrap();
        }
    }
    let stats = db.stats();
    assert!(stats.files_per_level.iter().sum::<usize>() >= 2, "too few SSTs: {stats:?}");
    db.close().unwrap();
    (dev.current_image(), state)
}

/// What reading a damaged store gave.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The open failed with Corruption.
    OpenFailed,
    /// Some read or the check returned Corruption; every other read was right.
    Detected,
    /// Everything read right and the check passed.
    Clean,
}

fn corruption_or_panic(e: Error, ctx: &str) {
    assert!(matches!(e, Error::Corruption { .. }), "{ctx}: not a Corruption error: {e:?}");
}

/// Seeks to every key of a damaged image, opened apart so that its cache is cold and the
/// blocks every seek lands in are read in batches: whether it saw Corruption (it panics on
/// wrong data or another error), and how many blocks the seeks read in batches. An image
/// whose open fails is left to the caller.
fn seeks_on_a_cold_cache(image: &[u8], want: &State, ctx: &str) -> (bool, u64) {
    let dev = SimDevice::from_image(image.to_vec(), 4096, 0).unwrap();
    let Ok(db) = Db::open_device(Arc::new(dev), options()) else { return (false, 0) };
    let detected = match seek_state(&db, KEYS, VALUE_FILLER_MAX) {
        Ok(got) => {
            assert_eq!(&got, want, "{ctx}: seeks returned wrong data");
            false
        }
        Err(e) => {
            corruption_or_panic(e, &format!("{ctx}: seek"));
            true
        }
    };
    (detected, db.stats().seek_batch_reads)
}

/// Opens a damaged image and reads all of it every way; panics on wrong data or an error
/// other than Corruption.
fn read_damaged(image: Vec<u8>, want: &State, ctx: &str) -> Outcome {
    let dev = SimDevice::from_image(image.clone(), 4096, 0).unwrap();
    let db = match Db::open_device(Arc::new(dev), options()) {
        Ok(db) => db,
        Err(e) => {
            corruption_or_panic(e, &format!("{ctx}: open"));
            return Outcome::OpenFailed;
        }
    };
    let (mut detected, _) = seeks_on_a_cold_cache(&image, want, ctx);
    // First, on a cold cache: every block a batch needs is read by its batch.
    match multi_get_state(&db, KEYS, 32, VALUE_FILLER_MAX) {
        Ok(got) => assert_eq!(&got, want, "{ctx}: a multi_get returned wrong data"),
        Err(e) => {
            corruption_or_panic(e, &format!("{ctx}: multi_get"));
            detected = true;
        }
    }
    for n in 0..KEYS {
        match db.get(&key(n)) {
            Ok(got) => {
                let want = want.get(&n).map(|&s| value(n, s, VALUE_FILLER_MAX));
                assert!(
                    got == want,
                    "{ctx}: get of key {n} returned wrong data: {:?} (a value of write {:?})",
                    got.as_deref().map(String::from_utf8_lossy),
                    got.as_deref().and_then(|v| stamp_of(n, v, VALUE_FILLER_MAX))
                );
            }
            Err(e) => {
                corruption_or_panic(e, &format!("{ctx}: get of key {n}"));
                detected = true;
            }
        }
    }
    match scan_state(&db, VALUE_FILLER_MAX) {
        Ok(got) => assert_eq!(&got, want, "{ctx}: a scan returned wrong data"),
        Err(e) => {
            corruption_or_panic(e, &format!("{ctx}: scan"));
            detected = true;
        }
    }
    if let Err(e) = db.check() {
        corruption_or_panic(e, &format!("{ctx}: check"));
        detected = true;
    }
    if detected { Outcome::Detected } else { Outcome::Clean }
}

#[test]
fn a_flipped_sst_byte_is_reported_never_read_as_data() {
    let (image, want) = store_with_ssts();
    let extents = {
        let dev = SimDevice::from_image(image.clone(), 4096, 0).unwrap();
        let db = Db::open_device(Arc::new(dev), options()).unwrap();
        let v = db.volume().clone();
        v.live_extents().into_iter().map(|e| v.extent_range(e)).collect::<Vec<_>>()
    };
    assert!(extents.len() >= 2, "expected several SSTs, found {}", extents.len());
    // Damage a batched seek reads must be damage it reports: the seeks do read batches here.
    let (_, batched) = seeks_on_a_cold_cache(&image, &want, "undamaged");
    assert!(batched > 0, "no seek read a batch: {} SSTs", extents.len());
    let mut rng = SmallRng::seed_from_u64(11);
    let mut counts = [0u32; 3];
    let mut padding_flips = 0;
    for range in &extents {
        let bytes = &image[range.start as usize..range.end as usize];
        let mut data: Vec<u64> =
            (0..bytes.len() as u64).filter(|&i| bytes[i as usize] != 0).collect();
        let mut zeros: Vec<u64> =
            (0..bytes.len() as u64).filter(|&i| bytes[i as usize] == 0).collect();
        // Always the first and last data bytes (a data block's start, the footer's end).
        let (first, last) = (data[0], *data.last().unwrap());
        data.shuffle(&mut rng);
        data.truncate(40);
        data.extend([first, last]);
        zeros.shuffle(&mut rng);
        zeros.truncate(4);
        for (offsets, is_data) in [(data, true), (zeros, false)] {
            for at in offsets {
                let offset = range.start + at;
                let mut damaged = image.clone();
                damaged[offset as usize] ^= 1 << rng.gen_range(0..8);
                let ctx = format!("SST byte at device offset {offset} (extent {range:?})");
                let outcome = read_damaged(damaged, &want, &ctx);
                if is_data {
                    assert_ne!(outcome, Outcome::Clean, "{ctx}: damage went unnoticed by check");
                } else {
                    padding_flips += 1;
                }
                counts[outcome as usize] += 1;
            }
        }
    }
    println!(
        "corruption: SST flips: {} open failed, {} detected by reads or check, {} harmless \
         ({padding_flips} in zero padding)",
        counts[0], counts[1], counts[2]
    );
}

/// A closed store whose L0 SST holds range tombstones over data in L1, and what it holds.
fn store_with_range_tombstones() -> (Vec<u8>, State) {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 7).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options()).unwrap();
    let mut state = State::new();
    for n in 0..KEYS {
        db.put(&key(n), &value(n, (1, n), VALUE_FILLER_MAX)).unwrap();
        state.insert(n, (1, n));
    }
    db.compact_range().unwrap();
    for (start, end) in [(50, 90), (120, 121), (170, 199)] {
        db.delete_range(&key(start), &key(end)).unwrap();
        state.retain(|n, _| !(start..end).contains(n));
    }
    db.flush().unwrap();
    assert_eq!(db.check().unwrap().range_tombstones, 3);
    db.close().unwrap();
    (dev.current_image(), state)
}

/// Device byte ranges of the range-deletion blocks (with their trailers) of every live SST.
fn range_del_blocks(image: &[u8]) -> Vec<std::ops::Range<u64>> {
    use shale_lsm::sst::SstProperties;
    use shale_lsm::sst::footer::{FOOTER_BYTES, Footer};
    use shale_lsm::sst::format::decode_block;
    let dev = SimDevice::from_image(image.to_vec(), 4096, 0).unwrap();
    let db = Db::open_device(Arc::new(dev), options()).unwrap();
    let v = db.volume().clone();
    let mut out = Vec::new();
    for range in v.live_extents().into_iter().map(|e| v.extent_range(e)) {
        let sst = &image[range.start as usize..range.end as usize];
        let footer = Footer::decode(&sst[sst.len() - FOOTER_BYTES..], sst.len() as u64).unwrap();
        let h = footer.properties;
        let stored = &sst[h.offset as usize..(h.offset + h.stored_bytes()) as usize];
        let props = SstProperties::decode(&decode_block(stored, h, "p").unwrap(), 0).unwrap();
        if let Some(h) = props.range_del {
            out.push(range.start + h.offset..range.start + h.offset + h.stored_bytes());
        }
    }
    out
}

#[test]
fn a_flipped_byte_in_a_range_deletion_block_is_corruption() {
    let (image, want) = store_with_range_tombstones();
    assert_eq!(read_damaged(image.clone(), &want, "undamaged"), Outcome::Clean);
    let blocks = range_del_blocks(&image);
    assert_eq!(blocks.len(), 1, "one SST with tombstones expected");
    let mut counts = [0u32; 3];
    for block in blocks {
        for offset in block.clone() {
            let mut damaged = image.clone();
            damaged[offset as usize] ^= 1 << (offset % 8);
            let ctx = format!("range-deletion block byte at device offset {offset} ({block:?})");
            let outcome = read_damaged(damaged, &want, &ctx);
            assert_ne!(outcome, Outcome::Clean, "{ctx}: damage went unnoticed");
            counts[outcome as usize] += 1;
        }
    }
    println!(
        "corruption: range-deletion block flips: {} open failed, {} detected by reads or check",
        counts[0], counts[1]
    );
}

#[test]
fn a_flipped_byte_in_synced_wal_pages_fails_the_open() {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 5).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options()).unwrap();
    let wal = {
        let l = db.volume().layout();
        // Past the two metadata pages: only log pages.
        (l.wal_offset + 8192) as usize..(l.wal_offset + l.wal_bytes) as usize
    };
    let mut acked_at = vec![dev.writes()];
    let mut want = State::new();
    for w in 1..=8u32 {
        let mut b = WriteBatch::new();
        for op in 0..2u16 {
            let n = (w as u16 * 7 + op) % KEYS;
            // Up to about 4 KiB per value, so some writes span WAL pages.
            let stamp = (w, op);
            b.put(&key(n), &value(n, stamp, WAL_VALUE_FILLER_MAX));
            want.insert(n, stamp);
        }
        db.write(&b, &WriteOptions { sync: true }).unwrap();
        acked_at.push(dev.writes());
    }
    assert_eq!(db.stats().flushes, 0, "the writes must stay in the WAL");
    assert_eq!(db.stats().wal_pipelined_groups, 8, "every sync write went through the pipeline");
    drop(db);
    let image = dev.crash_image(dev.writes(), Damage::Keep);
    let mut rng = SmallRng::seed_from_u64(13);
    let (mut failed, mut checked) = (0, 0);
    // Write i's pages: bytes its acknowledgement changed. The last write is left out: damage
    // to the last synced write is indistinguishable from a torn tail.
    for i in 1..acked_at.len() - 1 {
        let before = dev.crash_image(acked_at[i - 1], Damage::Keep);
        let after = dev.crash_image(acked_at[i], Damage::Keep);
        let mut changed: Vec<usize> = wal.clone().filter(|&o| before[o] != after[o]).collect();
        assert!(!changed.is_empty(), "write {i} changed no WAL byte");
        let (first, last) = (changed[0], *changed.last().unwrap());
        changed.shuffle(&mut rng);
        changed.truncate(6);
        changed.extend([first, last]);
        for offset in changed {
            let mut damaged = image.clone();
            damaged[offset] ^= 1 << rng.gen_range(0..8);
            let ctx = format!("WAL byte at device offset {offset} of synced write {i}");
            let dev = SimDevice::from_image(damaged, 4096, 0).unwrap();
            match Db::open_device(Arc::new(dev), options()) {
                Err(e) => {
                    corruption_or_panic(e, &ctx);
                    failed += 1;
                }
                Ok(db) => {
                    let got = scan_state(&db, WAL_VALUE_FILLER_MAX).unwrap();
                    panic!(
                        "{ctx}: opened without an error, {} of {} keys{}",
                        got.len(),
                        want.len(),
                        if got == want {
                            " (all synced writes intact)"
                        } else {
                            " (synced writes lost)"
                        }
                    );
                }
            }
            checked += 1;
        }
    }
    println!("corruption: {checked} flips in synced WAL pages, {failed} failed the open");
}

#[test]
fn a_flipped_version_log_byte_is_reported_or_repaired() {
    let (image, want) = store_with_ssts();
    let dev = SimDevice::from_image(image.clone(), 4096, 0).unwrap();
    let layout = Db::open_device(Arc::new(dev), options()).unwrap().volume().layout();
    let mut rng = SmallRng::seed_from_u64(17);
    let mut counts = [0u32; 3];
    let mut both = [0u32; 3];
    for mirror in 0..2 {
        let start = layout.mirror_offset(mirror) as usize;
        let area = start..start + layout.version_log_bytes as usize;
        let mut used: Vec<usize> = area.filter(|&o| image[o] != 0).collect();
        assert!(!used.is_empty(), "mirror {mirror} is empty");
        used.shuffle(&mut rng);
        used.truncate(40);
        for offset in used {
            let mut damaged = image.clone();
            damaged[offset] ^= 1 << rng.gen_range(0..8);
            let ctx = format!("version log mirror {mirror} byte at device offset {offset}");
            counts[read_damaged(damaged.clone(), &want, &ctx) as usize] += 1;
            // The same byte of both mirrors: nothing to repair from.
            let twin = if mirror == 0 {
                offset + layout.version_log_bytes as usize
            } else {
                offset - layout.version_log_bytes as usize
            };
            if damaged[twin] == image[offset] {
                damaged[twin] = damaged[offset];
                let ctx = format!("{ctx} and its twin in the other mirror");
                both[read_damaged(damaged, &want, &ctx) as usize] += 1;
            }
        }
    }
    println!(
        "corruption: version log flips in one mirror: {} open failed, {} detected, {} repaired; \
         in both mirrors: {} open failed, {} detected, {} harmless (superseded records)",
        counts[0], counts[1], counts[2], both[0], both[1], both[2]
    );
    assert!(both[0] + both[1] > 0, "no flip of both mirrors was reported");
}
