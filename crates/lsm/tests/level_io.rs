//! `Stats::level_io`: where the bytes went, by level. Every byte of SST that is in the levels
//! came in by a flush or a compaction's write and has not been read out by a compaction
//! since (a compaction removes what it reads, a trivial move carries bytes between levels
//! without reading or writing them), so the bytes written less the bytes read equal the
//! bytes the levels hold, whatever the shape the compactions took.

mod common;

use common::*;
use shale_lsm::Db;

#[test]
fn bytes_written_less_bytes_read_are_the_bytes_the_levels_hold() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = small_options();
    // The odd-chunk rule on (it keeps an output back in the compaction's source level).
    opts.odd_chunk_rule = true;
    let db = Db::open(dir.path(), opts).unwrap();
    // Overwrites, so that compactions merge and drop versions, across several rounds.
    for round in 0..6u32 {
        for n in 0..1_500u16 {
            let value = vec![(round as u8).wrapping_add(n as u8); 200];
            db.put(&key(n), &value).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    let io = &s.level_io;
    assert_eq!(io[0].runs, s.flushes, "a run into L0 for every flush");
    let merged: u64 = io[1..].iter().map(|l| l.runs).sum();
    assert!(
        merged > 0 && merged <= s.compactions,
        "{merged} merges, {} compactions",
        s.compactions
    );
    assert!(io[1..].iter().any(|l| l.written > 0), "compactions wrote below L0: {io:?}");
    assert!(io[0].read_from_level > 0, "compactions read L0: {io:?}");
    let written: u64 = io.iter().map(|l| l.written).sum();
    let read: u64 = io.iter().map(|l| l.read_from_level + l.read_from_below).sum();
    let held: u64 = s.bytes_per_level.iter().sum();
    assert_eq!(
        written - read,
        held,
        "written {written}, read {read}: {io:?} {:?}",
        s.bytes_per_level
    );
    db.close().unwrap();
}
