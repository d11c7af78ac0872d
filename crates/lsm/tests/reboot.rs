//! Reboot test (issue #41): a real child process writes batches, one in four synced, with the
//! WAL tail in `/dev/shm` (the default), and is killed with SIGKILL; then the store's tail is
//! removed, as a reboot removes everything in `/dev/shm`, and the store is reopened. It must
//! pass `Db::check`, hold every synced acknowledged batch (P1), and hold exactly a prefix of
//! the batches written (P3: no hole, each batch all-or-nothing): what a machine crash leaves.
//! Several rounds on one store, so a reopen after a lost tail is followed by more writes.

use std::path::Path;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_lsm::batch::WriteBatch;
use shale_lsm::wal::tail::{SHM_DIR, TailOwner, tail_path};
use shale_lsm::{Db, Options, ReadOptions, WalTail, WriteOptions};

const CHILD_ENV: &str = "SHALE_REBOOT_CHILD_DIR";
const KEYS_PER_BATCH: u64 = 4;
const ROUNDS: u64 = 4;

fn options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 128 << 10;
    o.volume.layout.version_log_bytes = 1 << 20;
    o.wal_tail = WalTail::Shm;
    o
}

/// Batch n puts keys "b{n}-{i}"; every fourth is synced; "acked n" (and "synced n") once the
/// write returns. One thread, so batches reach the WAL in number order.
fn child(dir: &Path) {
    let db = Db::open(dir, options()).expect("child: open");
    let start: u64 = std::env::var("SHALE_REBOOT_START").unwrap().parse().unwrap();
    for n in start.. {
        let mut b = WriteBatch::new();
        for i in 0..KEYS_PER_BATCH {
            b.put(format!("b{n:08}-{i}").as_bytes(), &[(n % 251) as u8; 200]);
        }
        let sync = n % 4 == 0;
        db.write(&b, &WriteOptions { sync }).expect("child: write");
        println!("acked {n}");
        if sync {
            println!("synced {n}");
        }
    }
}

#[test]
#[ignore = "child process entry point, run by a_reboot_keeps_every_synced_batch_and_a_prefix"]
fn reboot_child_entry_point() {
    let parent = "a_reboot_keeps_every_synced_batch_and_a_prefix";
    child(Path::new(&shale_testkit::child_env(CHILD_ENV, parent)));
}

/// The store's WAL tail in /dev/shm.
fn tail_of(dir: &Path) -> std::path::PathBuf {
    let volume = dir.join(shale_space::VOLUME_FILE_NAME);
    let mut header = vec![0u8; 4096];
    std::io::Read::read_exact(&mut std::fs::File::open(&volume).unwrap(), &mut header).unwrap();
    let owner = TailOwner {
        volume_id: header[24..40].try_into().unwrap(),
        instance_id: Some(shale_space::instance_id(&volume).unwrap()),
    };
    tail_path(Path::new(SHM_DIR), &owner)
}

#[test]
fn a_reboot_keeps_every_synced_batch_and_a_prefix() {
    assert!(Path::new(SHM_DIR).is_dir(), "this test needs {SHM_DIR}, the WAL tail's default");
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reboot");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("store");
    let mut rng = SmallRng::seed_from_u64(0xb007);
    let mut next = 0u64;
    let mut lost_unsynced = 0u64;
    for round in 0..ROUNDS {
        let kill_after = Duration::from_millis(rng.gen_range(100..500));
        let envs =
            [(CHILD_ENV, dir.display().to_string()), ("SHALE_REBOOT_START", next.to_string())];
        let lines =
            shale_testkit::run_child_until_killed("reboot_child_entry_point", &envs, kill_after);
        let acked = shale_testkit::acked_numbers(&lines);
        let synced: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("synced "))
            .map(|n| n.parse().unwrap())
            .collect();
        assert!(!acked.is_empty(), "round {round}: the child acknowledged nothing");
        // The reboot: everything in /dev/shm is gone, the store's tail with it.
        let tail = tail_of(&dir);
        assert!(
            tail.exists(),
            "round {round}: the killed store left no tail at {}",
            tail.display()
        );
        std::fs::remove_file(&tail).unwrap();
        let db = Db::open(&dir, options()).unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        db.check().unwrap_or_else(|e| panic!("round {round}: check after the reboot: {e}"));
        let mut per_batch = std::collections::BTreeMap::<u64, u64>::new();
        let mut it = db.iter(&ReadOptions::default());
        it.seek_to_first();
        while it.valid() {
            let k = String::from_utf8(it.key().to_vec()).unwrap();
            *per_batch.entry(k[1..9].parse().unwrap()).or_default() += 1;
            it.next();
        }
        it.status().unwrap();
        drop(it);
        for (n, count) in &per_batch {
            assert_eq!(*count, KEYS_PER_BATCH, "round {round}: batch {n} is half there");
        }
        let present = per_batch.len() as u64;
        let last = per_batch.keys().next_back().copied();
        assert_eq!(last.map_or(0, |l| l + 1), present, "round {round}: a hole in the batches");
        for n in &synced {
            assert!(per_batch.contains_key(n), "round {round}: synced batch {n} lost");
        }
        lost_unsynced += acked.iter().filter(|n| !per_batch.contains_key(n)).count() as u64;
        next = present.max(next);
        db.close().unwrap();
    }
    println!(
        "reboot test: {ROUNDS} SIGKILLs with the WAL tail removed, every synced batch kept, \
         {lost_unsynced} unsynced acknowledged batches lost with the tail (allowed: P2 is about \
         the process)"
    );
}
