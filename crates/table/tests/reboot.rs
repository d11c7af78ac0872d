//! The reboot test (issue #41): a real child process runs transactions on a table store by
//! path and is killed with SIGKILL part way through one; then every file in /dev/shm the
//! child held is removed, as a reboot removes them, and the store is reopened.
//!
//! - With the default options (the undo log on the volume: no DAX here) the child holds no
//!   file in /dev/shm, and the reopened store holds every acknowledged transaction and no
//!   part of an unacknowledged one: transaction `n` inserts row `t{n}` and writes `n` into
//!   a spread of rows, large enough that the small block cache writes its blocks before
//!   the commit, so the kill leaves changes of an open transaction on the device.
//! - With emulated persistent memory asked for (a file in /dev/shm), removing the file makes
//!   the reopen refuse, naming it; with the file left in place it recovers as above.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use shale_table::{Column, Error, Isolation, Schema, TableOptions, TableStore, UndoLogPlace};

const CHILD_DIR: &str = "SHALE_TABLE_REBOOT_DIR";
const CHILD_PMEM: &str = "SHALE_TABLE_REBOOT_PMEM";
/// Rows every transaction writes into (besides its own insert).
const SPREAD_ROWS: u64 = 24;
/// Rows of the table before the transactions: each transaction writes every third.
const BASE_ROWS: u64 = 72;
/// Acknowledged transactions the parent waits for before the kill.
const ACKED_BEFORE_KILL: u64 = 30;

fn options(pmem: Option<&Path>) -> TableOptions {
    let mut o = TableOptions {
        segment_bytes: 64 << 10,
        version_log_bytes: 1 << 20,
        // A small cache: dirty blocks are written before their transaction commits.
        cache_blocks: 16,
        space_reclaim_interval: None,
        ..TableOptions::default()
    };
    if let Some(p) = pmem {
        o.undo_log = UndoLogPlace::Pmem;
        o.pmem_path = Some(p.to_path_buf());
        o.undo_log_bytes = 4 << 20;
    }
    o
}

fn schema() -> Schema {
    Schema::new(vec![Column::fixed("id", 8), Column::var("v", 1200)]).unwrap()
}

fn base_key(i: u64) -> Vec<u8> {
    format!("b{i:07}").into_bytes()
}

fn txn_key(n: u64) -> Vec<u8> {
    format!("t{n:07}").into_bytes()
}

/// The value transaction `n` writes: its number, padded so that rows span blocks.
fn value(n: u64) -> Vec<u8> {
    let mut v = format!("{n:010}").into_bytes();
    v.resize(1100, b'.');
    v
}

/// The base rows transaction `n` writes into.
fn spread(n: u64) -> impl Iterator<Item = u64> {
    (0..SPREAD_ROWS).map(move |j| (n + j * 3) % BASE_ROWS)
}

/// The child: makes the table (value 0 everywhere), then runs transactions 1, 2, ...,
/// printing "changed n j" once the transaction's `j`th update returns and "acked n" once
/// its commit does.
fn child(dir: &Path, pmem: Option<&Path>) {
    let store = TableStore::open(dir, options(pmem)).expect("child: open");
    let t = store.create_table("t", schema()).expect("child: create");
    for i in 0..BASE_ROWS {
        store.insert(t, &[&base_key(i)[..], &value(0)]).expect("child: base row");
    }
    println!("ready");
    for n in 1.. {
        let mut txn = store.begin(Isolation::ReadCommitted);
        txn.insert(t, &[&txn_key(n)[..], &value(n)]).expect("child: insert");
        for (j, i) in spread(n).enumerate() {
            txn.update(t, &base_key(i), "v", &value(n)).expect("child: update");
            println!("changed {n} {j}");
        }
        txn.commit().expect("child: commit");
        println!("acked {n}");
    }
}

#[test]
#[ignore = "child process entry point, run by the reboot tests below (run_and_kill)"]
fn reboot_child_entry_point() {
    let dir = shale_testkit::child_env(CHILD_DIR, "run_and_kill, in the tests below");
    let pmem = std::env::var(CHILD_PMEM).ok().map(PathBuf::from);
    child(Path::new(&dir), pmem.as_deref());
}

/// Runs the child until it has acknowledged `ACKED_BEFORE_KILL` transactions and made
/// `changes` updates of the next one, looks at the /dev/shm files it holds, kills it, and
/// returns the last transaction acknowledged and those files. Past about 8 updates, the
/// open transaction's blocks have been written (half the cache dirty writes them).
fn run_and_kill(dir: &Path, pmem: Option<&Path>, changes: u64) -> (u64, Vec<PathBuf>) {
    let mut cmd = shale_testkit::child_command("reboot_child_entry_point");
    cmd.env(CHILD_DIR, dir).stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(p) = pmem {
        cmd.env(CHILD_PMEM, p);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    let kill_at = format!("changed {} {}", ACKED_BEFORE_KILL + 1, changes - 1);
    loop {
        let line = lines.next().expect("the child ended before the kill").unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            acked.push(n.parse::<u64>().unwrap());
        }
        if line == kill_at {
            break;
        }
    }
    let held = shale_testkit::shm_files_of(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    // Lines already written before the kill are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(n) = line.strip_prefix("acked ") {
            acked.push(n.parse().unwrap());
        }
    }
    (*acked.last().unwrap(), held)
}

/// Every acknowledged transaction is there, and none past the last one present in part:
/// the store equals the state after transactions 1..=m for some m >= `acked`.
fn check_prefix(store: &TableStore, acked: u64) {
    let t = store.table_id("t").unwrap();
    let mut m = 0;
    while store.select(t, &txn_key(m + 1)).unwrap().is_some() {
        m += 1;
    }
    assert!(m >= acked, "acknowledged transaction {} lost (store holds 1..={m})", m + 1);
    assert!(store.select(t, &txn_key(m + 2)).unwrap().is_none(), "a hole after {m}");
    for i in 0..BASE_ROWS {
        let last = (1..=m).rev().find(|&n| spread(n).any(|r| r == i)).unwrap_or(0);
        let got = store.select_cell(t, &base_key(i), "v").unwrap().unwrap();
        assert!(
            got == value(last),
            "row {i}: {:?} where transactions 1..={m} leave {last}",
            String::from_utf8_lossy(&got[..got.len().min(10)])
        );
    }
}

/// On the repository's file system: /tmp may be tmpfs, which a reboot empties too.
fn scratch(name: &str) -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    base
}

#[test]
fn a_reboot_loses_nothing_of_a_store_with_the_default_options() {
    let base = scratch("table-reboot-default");
    let dir = base.join("store");
    // Killed after 1 update of the open transaction (its blocks only in the cache), after
    // 12 and after all 24 (blocks written, commit not begun or under way).
    for changes in [1, 12, SPREAD_ROWS] {
        let _ = std::fs::remove_dir_all(&dir);
        let (acked, held) = run_and_kill(&dir, None, changes);
        assert!(held.is_empty(), "the store held files in /dev/shm: {held:?}");
        // What a reboot does: every /dev/shm file the store made goes (there are none).
        for f in &held {
            let _ = std::fs::remove_file(f);
        }
        let store = TableStore::open(&dir, options(None)).unwrap();
        assert_eq!(store.undo_log_path(), None);
        check_prefix(&store, acked);
    }
}

#[test]
fn a_reboot_that_removes_the_emulated_log_refuses_the_reopen_naming_it() {
    let base = scratch("table-reboot-pmem");
    let shm = Path::new("/dev/shm");
    let pmem_dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir_in(&base).unwrap()
    };
    let pmem = pmem_dir.path().join("undo.pmem");
    // The file left in place: recovered from it.
    let dir = base.join("kept");
    let (acked, held) = run_and_kill(&dir, Some(&pmem), 16);
    if shm.is_dir() {
        assert_eq!(held, vec![pmem.clone()]);
    }
    let store = TableStore::open(&dir, TableOptions::default()).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem.as_path()));
    check_prefix(&store, acked);
    drop(store);
    std::fs::remove_file(&pmem).unwrap();
    // The file removed, as a reboot removes it: the reopen is refused, naming it.
    let dir = base.join("lost");
    let (_, held) = run_and_kill(&dir, Some(&pmem), 16);
    for f in &held {
        std::fs::remove_file(f).unwrap();
    }
    std::fs::remove_file(&pmem).ok();
    match TableStore::open(&dir, TableOptions::default()) {
        Err(Error::UndoLogMissing { path }) => assert_eq!(path, pmem),
        r => panic!("reopen without the log: {r:?}"),
    }
    let msg = TableStore::open(&dir, options(Some(&pmem))).unwrap_err().to_string();
    assert!(msg.contains(&pmem.display().to_string()), "{msg}");
}
