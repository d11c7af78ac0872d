//! Flush and compaction outputs are streamed into an extent reserved for them while they are
//! built (`sst::writer`); an output that outgrows its reservation is relocated, never cut
//! short, and the slots it did not use go back to the volume.

mod common;

use shale_lsm::{Db, Options};

fn options() -> Options {
    let mut o = common::small_options();
    o.write_buffer_bytes = 256 << 10;
    o
}

fn value(v: u32) -> Vec<u8> {
    format!("v{v}:").into_bytes().into_iter().cycle().take(1024).collect()
}

/// One key with 600 versions of 1 KiB, each kept by a snapshot: a compaction must write them
/// into one output (outputs are cut only between user keys), 600 KiB against a reservation of
/// the 64 KiB cut size and two slots.
#[test]
fn an_output_past_its_reservation_is_relocated_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut snapshots = Vec::new();
    for v in 0..600u32 {
        db.put(b"hot", &value(v)).unwrap();
        db.put(format!("cold{v:04}").as_bytes(), &value(v)).unwrap();
        snapshots.push((v, db.snapshot()));
    }
    db.flush().unwrap();
    db.compact_range().unwrap();
    let s = db.stats();
    assert!(s.sst_relocations > 0, "no output outgrew its reservation: {s:?}");
    for (v, snap) in snapshots.iter().step_by(37) {
        let at = shale_lsm::ReadOptions { snapshot: Some(snap), ..Default::default() };
        assert_eq!(db.get_opt(b"hot", &at).unwrap(), Some(value(*v)), "version {v}");
    }
    db.check().unwrap();
    let slots = db.stats();
    drop(snapshots);
    db.close().unwrap();

    // After a reopen every SST is whole, and no slot leaked (the check's slot map).
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"hot").unwrap(), Some(value(599)));
    for v in (0..600u32).step_by(13) {
        assert_eq!(db.get(format!("cold{v:04}").as_bytes()).unwrap(), Some(value(v)));
    }
    db.check().unwrap();
    assert!(slots.sst_bytes_written > 600 << 10);
}

/// Outputs far larger than a write request stream through many of them, on both write paths,
/// and every SST takes exactly the slots of its image.
#[test]
fn large_outputs_stream_and_keep_only_their_slots() {
    for direct in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options();
        o.write_buffer_bytes = 2 << 20;
        o.target_file_size_base = 1 << 20;
        o.use_direct_io_for_flush_and_compaction = direct;
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..6000u32 {
            db.put(format!("k{:08}", (i * 7919) % 6000).as_bytes(), &value(i)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range().unwrap();
        let s = db.stats();
        assert_eq!(s.sst_relocations, 0, "direct {direct}: {s:?}");
        db.check().unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), o).unwrap();
        for i in (0..6000u32).step_by(7) {
            let k = format!("k{:08}", (i * 7919) % 6000);
            assert_eq!(db.get(k.as_bytes()).unwrap(), Some(value(i)), "direct {direct}: {k}");
        }
        db.check().unwrap();
    }
}
