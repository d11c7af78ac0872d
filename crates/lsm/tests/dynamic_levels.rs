//! Dynamic level sizing (RocksDB's `level_compaction_dynamic_level_bytes`): a new store puts
//! its first data in the last level, L0 compacts straight into the base level, the base level
//! rises as the last level grows, and the targets follow the last level's size, each level a
//! multiplier's fraction of the next. Static sizing, for contrast, fills L1 first.
//!
//! Why: the shape decides write and space amplification; a picker that used the wrong targets
//! would still keep the data, so only the shape shows it.

use shale_lsm::{Db, Options, Stats};

const LEVELS: usize = 7;

fn options(dynamic: bool) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.dynamic_level_bytes = dynamic;
    o
}

/// Puts keys `from..to` (scattered) with 500-byte values.
fn fill(db: &Db, from: u32, to: u32) {
    for i in from..to {
        let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000_007);
        db.put(k.as_bytes(), &[(i % 251) as u8; 500]).unwrap();
    }
}

fn settled(db: &Db) -> Stats {
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    db.stats()
}

#[test]
fn a_new_store_puts_its_data_in_the_last_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    assert_eq!(db.stats().base_level, LEVELS - 1, "empty: L0 compacts into the last level");
    fill(&db, 0, 400); // about 200 KiB: less than the base level's target
    let s = settled(&db);
    assert!(s.files_per_level[LEVELS - 1] > 0, "{s:?}");
    assert!(s.files_per_level[1..LEVELS - 1].iter().all(|&n| n == 0), "{s:?}");
    assert_eq!(s.base_level, LEVELS - 1);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn the_base_level_rises_and_targets_follow_the_last_level() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(true);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut bases = vec![db.stats().base_level];
    for round in 0..8u32 {
        fill(&db, round * 2000, (round + 1) * 2000);
        let s = settled(&db);
        let last = s.bytes_per_level[LEVELS - 1];
        let below_l0: u64 = s.bytes_per_level[1..].iter().sum();
        // Every level above the base level is empty; no level is over its target.
        assert!(s.files_per_level[1..s.base_level].iter().all(|&n| n == 0), "{s:?}");
        assert_eq!(s.pending_compaction_bytes, 0, "{s:?}");
        // The last level is the largest, and holds most of the data.
        assert!(s.bytes_per_level[1..].iter().all(|&b| b <= last), "{s:?}");
        assert!(last * 10 >= below_l0 * 7, "last level {last} of {below_l0}: {s:?}");
        // Targets: the last level's is its size (once the store outgrows the base size), and
        // each level above is a tenth of the next, never below the base size.
        let t = &s.level_target_bytes;
        if last > 2 * o.max_bytes_for_level_base {
            assert!(t[LEVELS - 1].abs_diff(last) <= last / 100, "{s:?}");
        }
        for l in s.base_level..LEVELS - 1 {
            let expect = (t[l + 1] / 10).max(o.max_bytes_for_level_base);
            assert!(t[l].abs_diff(expect) <= 10, "L{l}: {s:?}");
        }
        bases.push(s.base_level);
    }
    // About 7.6 MB at the end: L6 holds most of it, L5's target is a tenth of that, L4's would
    // be 76 KB (raised to the 256 KiB base size), and L3's 7.6 KB is below a tenth of the base
    // size: L4 is the base level, L1-L3 stay empty.
    assert!(bases.windows(2).all(|w| w[1] <= w[0]), "the base level only rises: {bases:?}");
    assert_eq!(*bases.first().unwrap(), LEVELS - 1);
    assert_eq!(*bases.last().unwrap(), 4, "{bases:?}");
    for i in (0..16_000u32).step_by(331) {
        let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000_007);
        assert_eq!(db.get(k.as_bytes()).unwrap(), Some(vec![(i % 251) as u8; 500]));
    }
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn static_sizing_fills_l1_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(false)).unwrap();
    fill(&db, 0, 4000);
    let s = settled(&db);
    assert_eq!(s.base_level, 1);
    assert!(s.files_per_level[1] > 0, "{s:?}");
    assert_eq!(s.files_per_level[LEVELS - 1], 0, "{s:?}");
    assert_eq!(s.level_target_bytes[1..4], [256 << 10, 2560 << 10, 25600 << 10]);
    db.close().unwrap();
}

#[test]
fn a_static_tree_reopened_with_dynamic_sizing_keeps_its_levels() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(false)).unwrap();
    fill(&db, 0, 4000);
    let before = settled(&db);
    db.close().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    // Data never moves up: the first non-empty level stays the base level.
    assert_eq!(db.stats().base_level, 1, "{before:?}");
    fill(&db, 4000, 8000);
    let s = settled(&db);
    assert_eq!(s.pending_compaction_bytes, 0, "{s:?}");
    db.check().unwrap();
    for i in (0..8000u32).step_by(97) {
        let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000_007);
        assert!(db.get(k.as_bytes()).unwrap().is_some(), "key {i} lost");
    }
    db.close().unwrap();
}
