//! A flush leaves out the versions a newer version of their key hides from every reader,
//! and keeps what a snapshot still reads (and every tombstone).

use shale_lsm::{Db, Options, ReadOptions};

fn options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 4 << 20;
    o
}

/// 400 versions of each of 5 keys, 1 KiB values: 2 MB of versions, 5 KiB of newest ones.
fn overwrite(db: &Db, round: u32) {
    for v in 0..400u32 {
        for k in 0..5u32 {
            db.put(format!("key{k}").as_bytes(), &value(k, round * 1000 + v)).unwrap();
        }
    }
}

fn value(k: u32, v: u32) -> Vec<u8> {
    format!("{k}:{v}:").into_bytes().into_iter().cycle().take(1024).collect()
}

#[test]
fn a_flush_writes_only_the_versions_a_reader_can_see() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    overwrite(&db, 0);
    db.flush().unwrap();
    let written = db.stats().sst_bytes_written;
    // One slot holds the 5 newest versions; all 2,000 would need 2 MB.
    assert!(written <= 1 << 20, "flush wrote {written} bytes for 5 live keys");
    for k in 0..5 {
        assert_eq!(db.get(format!("key{k}").as_bytes()).unwrap(), Some(value(k, 399)));
    }

    // A snapshot in the middle of the next round keeps the versions it reads.
    for k in 0..5u32 {
        db.put(format!("key{k}").as_bytes(), &value(k, 5000)).unwrap();
    }
    let snap = db.snapshot();
    overwrite(&db, 1);
    db.delete(b"key0").unwrap();
    db.flush().unwrap();
    let at_snap = ReadOptions { snapshot: Some(&snap), ..Default::default() };
    for k in 0..5u32 {
        let key = format!("key{k}");
        assert_eq!(db.get_opt(key.as_bytes(), &at_snap).unwrap(), Some(value(k, 5000)), "{key}");
        let now = (k != 0).then(|| value(k, 1399));
        assert_eq!(db.get(key.as_bytes()).unwrap(), now, "{key}");
    }
    drop(snap);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"key0").unwrap(), None, "the tombstone was flushed");
    assert_eq!(db.get(b"key3").unwrap(), Some(value(3, 1399)));
}
