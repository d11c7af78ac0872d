//! Issue #41, found item 4: flipped bytes in one header copy or in mirror A's version-log
//! anchor went unreported (`check` said ok, a read-write open left the damage), so the store
//! was lost once the second copy was hit. Now `check` names each damaged copy and exits
//! non-zero, `inspect` lists them, and a read-write open rewrites them from their twins.

#[path = "common/child.rs"]
mod child;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

fn flip(volume: &Path, offset: u64) {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(volume).unwrap();
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.read_exact(&mut b).unwrap();
    b[0] ^= 0x5a;
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&b).unwrap();
}

/// Mirror A's offset, from `inspect`'s layout table.
fn mirror_a_offset(dir: &Path) -> u64 {
    let o = child::run(&["inspect", &dir.display().to_string()]);
    o.assert_ok("inspect");
    let line = o.stdout.lines().find(|l| l.contains("version log A")).expect("layout line");
    line.split_whitespace().rev().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_damaged_copy_is_reported_by_check_and_inspect_and_repaired_by_a_write_open() {
    for (name, which) in [("format header copy A", 0), ("version log mirror A anchor", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        child::run(&["bench", &format!("--db={d}"), "--num=500", "--benchmarks=fillseq"])
            .assert_ok("fill");
        let offset = if which == 0 { 50 } else { mirror_a_offset(dir.path()) + 20 };
        flip(&dir.path().join("volume.shale"), offset);
        let checked = child::run(&["check", &d]);
        checked.assert_refused(&format!("check with a damaged {name}"), "damaged redundant copies");
        assert!(checked.stdout.contains(&format!("damaged: {name}")), "{}", checked.stdout);
        let inspected = child::run(&["inspect", &d]);
        inspected.assert_ok("inspect");
        assert!(inspected.stdout.contains(&format!("damaged: {name}")), "{}", inspected.stdout);
        // A read-write open repairs it: check is clean again.
        child::run(&[
            "bench",
            &format!("--db={d}"),
            "--use_existing_db=1",
            "--num=500",
            "--benchmarks=readseq",
        ])
        .assert_ok("a read-write open");
        let again = child::run(&["check", &d]);
        again.assert_ok(&format!("check after the repair of {name}"));
        assert!(!again.stdout.contains("damaged"), "{}", again.stdout);
    }
}
