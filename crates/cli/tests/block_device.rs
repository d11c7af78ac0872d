//! `shale bench`, `ycsb` and `iobench` on a block device (a loop device; skipped without root,
//! a failure where `SHALE_REQUIRE_PREREQS=1`, `shale_testkit::prerequisite`):
//! a blank device gets a store, a device holding data is never erased (P6), and a second fill
//! benchmark on a device is refused rather than run on a store that is not empty.

#[path = "common/child.rs"]
mod child;

use std::path::Path;

use shale_testkit::LoopDevice;

/// A loop device over a file of `bytes` (its first bytes set to `head`), or why not.
fn device(dir: &Path, bytes: u64, head: &[u8]) -> Option<LoopDevice> {
    let backing = dir.join("backing.img");
    std::fs::write(&backing, head).unwrap();
    std::fs::OpenOptions::new().write(true).open(&backing).unwrap().set_len(bytes).unwrap();
    shale_testkit::prerequisite::require("a loop device", LoopDevice::attach(&backing))
}

fn first_bytes(dev: &Path, n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open(dev).unwrap().read_exact(&mut buf).unwrap();
    buf
}

#[test]
fn a_blank_device_gets_a_store_and_a_second_fill_is_refused() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(dev) = device(dir.path(), 600 << 20, &[]) else { return };
    let db = format!("--db={}", dev.path().display());
    let o = child::run(&["bench", &db, "--num=100", "--benchmarks=fillseq,readseq"]);
    o.assert_ok("fill a blank device");
    assert!(o.stdout.contains("readseq") && o.stdout.contains(" 100 operations;"), "{}", o.stdout);
    let header = first_bytes(dev.path(), 8192);
    child::run(&["bench", &db, "--num=50", "--benchmarks=fillseq"])
        .assert_refused("a fill on a device holding a store", "does not erase devices");
    child::run(&["bench", &db, "--num=50", "--benchmarks=readseq,fillrandom"])
        .assert_refused("a second fill in one run", "does not erase devices");
    child::run(&["ycsb", "--phase=load", &db, "--records=10"])
        .assert_refused("ycsb load on a device holding a store", "does not erase devices");
    let dev_path = dev.path().to_str().unwrap();
    let io = ["iobench", "--path", dev_path, "--pattern", "randwrite", "--seconds", "0.1"];
    child::run(&io).assert_refused("iobench on a device", "--overwrite");
    let mut over = io.to_vec();
    over.push("--overwrite");
    child::run(&over).assert_refused("iobench --overwrite on a store", "a shale volume");
    assert_eq!(first_bytes(dev.path(), 8192), header, "the store is untouched");
    let o = child::run(&["bench", &db, "--use_existing_db", "--num=100", "--benchmarks=readseq"]);
    o.assert_ok("the store is still there");
    assert!(o.stdout.contains(" 100 operations;"), "{}", o.stdout);
}

/// With the tuner on, a new store's WAL area is sized for its 512 MiB batches: 2.25 GiB, more
/// than this device. On a block device it takes at most an eighth of the device, so the
/// store is made (before, "no room for a slot after the 2432712704-byte header, version log
/// and WAL areas").
#[test]
fn a_small_blank_device_gets_a_store_with_the_tuner_on() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(dev) = device(dir.path(), 600 << 20, &[]) else { return };
    let db = format!("--db={}", dev.path().display());
    let o = child::run(&["bench", &db, "--tuner=adoc", "--num=100", "--benchmarks=fillseq"]);
    o.assert_ok("fill a small blank device with the tuner on");
    let o = child::run(&[
        "bench",
        &db,
        "--use_existing_db",
        "--tuner=adoc",
        "--num=100",
        "--benchmarks=readseq",
    ]);
    o.assert_ok("reopen it");
    assert!(o.stdout.contains(" 100 operations;"), "{}", o.stdout);
}

#[test]
fn a_device_holding_foreign_data_is_refused_untouched() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let head: Vec<u8> =
        (0..65536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let Some(dev) = device(dir.path(), 64 << 20, &head) else { return };
    let db = format!("--db={}", dev.path().display());
    child::run(&["bench", &db, "--num=10", "--benchmarks=fillseq"])
        .assert_refused("bench on a foreign device", "a block device holding data");
    child::run(&["ycsb", "--phase=load", &db, "--records=10"])
        .assert_refused("ycsb on a foreign device", "a block device holding data");
    child::run(&["bench", &db, "--use_existing_db", "--num=10", "--benchmarks=readseq"])
        .assert_refused("bench --use_existing_db on a foreign device", "opening the store at");
    assert_eq!(first_bytes(dev.path(), head.len()), head, "the device's bytes are untouched");
}
