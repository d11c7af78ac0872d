//! The reboot test (issue #41) for the hash engine: a real child process stores keys by path
//! and is killed with SIGKILL part way; every file in /dev/shm it held is removed, as a
//! reboot removes them (the hash engine acknowledges only durable stores, so it holds none),
//! and the store is reopened: it holds every acknowledged store and equals the state after
//! some prefix of the stores, with nothing half-applied.
//!
//! Store `n` (1, 2, ...) writes `value(n)` under key `n % KEYS`, overwriting, so a lost
//! store, a hole or a half-applied one shows as a key whose value no prefix of the stores
//! leaves there.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use shale_hash::{HashOptions, HashStore, SEGMENT_BYTES_MIN, StoreMode};

const CHILD_DIR: &str = "SHALE_HASH_REBOOT_DIR";
/// Keys the stores cycle over.
const KEYS: u64 = 50;
/// Acknowledged stores the parent waits for before each kill.
const ACKED_BEFORE_KILL: u64 = 400;

fn options() -> HashOptions {
    // Small segments: garbage collection runs while the child writes.
    HashOptions { segment_bytes: SEGMENT_BYTES_MIN, ..HashOptions::default() }
}

fn key(n: u64) -> Vec<u8> {
    format!("key-{:04}", n % KEYS).into_bytes()
}

/// The value store `n` writes: its number, padded past one log page now and then.
fn value(n: u64) -> Vec<u8> {
    let mut v = format!("{n:010}").into_bytes();
    v.resize(if n % 7 == 0 { 5000 } else { 300 }, b'.');
    v
}

fn number_in(v: &[u8]) -> u64 {
    std::str::from_utf8(&v[..10]).unwrap().parse().unwrap()
}

/// The child: stores 1, 2, ... from where the store left off, printing "acked n" once
/// store `n` returns (durable).
fn child(dir: &Path) {
    let store = HashStore::open(dir, options()).expect("child: open");
    let mut next = 1;
    for k in 0..KEYS {
        if let Some(v) = store.retrieve(&key(k)).expect("child: retrieve") {
            next = next.max(number_in(&v) + 1);
        }
    }
    println!("ready");
    for n in next.. {
        store.store(&key(n), &value(n), StoreMode::Overwrite).expect("child: store");
        println!("acked {n}");
    }
}

#[test]
#[ignore = "child process entry point, run by the reboot tests below (run_and_kill)"]
fn reboot_child_entry_point() {
    let dir = shale_testkit::child_env(CHILD_DIR, "run_and_kill, in the tests below");
    child(Path::new(&dir));
}

/// Runs the child until it has acknowledged `ACKED_BEFORE_KILL` more stores, kills it, and
/// returns the last store acknowledged and the /dev/shm files it held.
fn run_and_kill(dir: &Path) -> (u64, Vec<PathBuf>) {
    let mut child = shale_testkit::child_command("reboot_child_entry_point")
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    while acked.len() < ACKED_BEFORE_KILL as usize {
        let line = lines.next().expect("the child ended before the kill").unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            acked.push(n.parse::<u64>().unwrap());
        }
    }
    let held = shale_testkit::shm_files_of(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    // Lines written before the kill are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(n) = line.strip_prefix("acked ") {
            acked.push(n.parse().unwrap());
        }
    }
    (*acked.last().unwrap(), held)
}

/// The store equals the state after stores 1..=m for some m >= `acked` (at most one store
/// past it, the one in flight): each key holds the last of those stores that wrote it.
fn check_prefix(store: &HashStore, acked: u64) -> u64 {
    let values: Vec<Option<u64>> =
        (0..KEYS).map(|k| store.retrieve(&key(k)).unwrap().map(|v| number_in(&v))).collect();
    let m = values.iter().flatten().copied().max().unwrap_or(0);
    assert!(m >= acked, "acknowledged store {acked} lost: the newest is {m}");
    assert!(m <= acked + 1, "store {m} is there, past the one in flight ({})", acked + 1);
    for k in 0..KEYS {
        let want = (1..=m).rev().find(|n| n % KEYS == k);
        assert_eq!(values[k as usize], want, "key {k} after stores 1..={m}");
        if let Some(n) = want {
            assert_eq!(store.retrieve(&key(k)).unwrap(), Some(value(n)), "key {k}'s bytes");
        }
    }
    m
}

/// On the repository's file system: /tmp may be tmpfs, which a reboot empties too.
fn scratch(name: &str) -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    base
}

#[test]
fn a_reboot_loses_no_acknowledged_store_of_a_hash_store() {
    let dir = scratch("hash-reboot").join("store");
    // Three kills, each run going on from what the last left.
    for round in 0..3 {
        let (acked, held) = run_and_kill(&dir);
        assert!(held.is_empty(), "the store held files in /dev/shm: {held:?}");
        for f in &held {
            let _ = std::fs::remove_file(f);
        }
        let store = HashStore::open(&dir, options()).unwrap();
        let m = check_prefix(&store, acked);
        eprintln!("round {round}: acknowledged up to {acked}, the store holds 1..={m}");
        store.close();
    }
}

/// A copy (`cp -a`, the usual reflex after a crash) and a rename of a crashed hash store
/// each open with every acknowledged store, and the original still does after its copy was
/// opened and written: the engine keeps nothing outside the store's directory that a copy
/// could take from it or a rename could lose.
#[test]
fn a_copy_and_a_rename_of_a_crashed_hash_store_hold_every_acknowledged_store() {
    let base = scratch("hash-reboot-copy");
    let original = base.join("original");
    let (acked, _) = run_and_kill(&original);
    let copy = base.join("copy");
    let cp = Command::new("cp").arg("-a").arg(&original).arg(&copy).status().unwrap();
    assert!(cp.success());
    let m = {
        let store = HashStore::open(&copy, options()).unwrap();
        let m = check_prefix(&store, acked);
        store.store(b"only in the copy", b"x", StoreMode::Overwrite).unwrap();
        store.close();
        m
    };
    let renamed = base.join("renamed");
    std::fs::rename(&original, &renamed).unwrap();
    let store = HashStore::open(&renamed, options()).unwrap();
    assert_eq!(check_prefix(&store, acked), m, "the copy and the original hold the same stores");
    assert_eq!(store.retrieve(b"only in the copy").unwrap(), None);
}
