//! The skiplist under shuttle: inserts and seeks from several threads, in schedules shuttle
//! picks (random and PCT). A failure prints the schedule to replay.
//!
//! Regression (issue #9): a seek loaded its last node's link again after its walk, and could
//! return a node linked there meanwhile, one before its target; a read of a key whose insert
//! had returned then missed it.

use std::sync::Arc;

use shale_lsm_model::memtable::List;
use shuttle::sync::atomic::{AtomicBool, Ordering};

/// Schedules per check: enough to hit the seek bug many times over (it took a few dozen).
const ITERATIONS: usize = 3000;
/// PCT's bound on the preemptions that matter.
const PCT_DEPTH: usize = 3;

/// Two inserters next to each other in key order, each reading its own insert back at once
/// (read-your-writes), and a reader whose seeks must land at or after their targets and find
/// every key whose insert it saw complete.
fn neighbours_insert_and_seek() {
    // Small chunks: the racing inserts also race for a new arena chunk.
    let list = Arc::new(List::new(1 << 20, 256));
    assert!(list.insert(b"a", 1, b"-"));
    assert!(list.insert(b"e", 2, b"-"));
    let done: Arc<Vec<AtomicBool>> = Arc::new((0..3).map(|_| AtomicBool::new(false)).collect());
    let writer = |keys: Vec<(&'static [u8], u64, usize)>| {
        let (list, done) = (list.clone(), done.clone());
        shuttle::thread::spawn(move || {
            for (k, seq, flag) in keys {
                assert!(list.insert(k, seq, b"v"));
                assert_eq!(list.get(k, u64::MAX).map(|(s, _)| s), Some(seq), "own insert of {k:?}");
                done[flag].store(true, Ordering::SeqCst);
            }
        })
    };
    let w1 = writer(vec![(b"c", 10, 0)]);
    let w2 = writer(vec![(b"b", 11, 1), (b"d", 12, 2)]);
    let reader = {
        let (list, done) = (list.clone(), done.clone());
        shuttle::thread::spawn(move || {
            for (k, flag) in [(&b"c"[..], 0), (b"b", 1), (b"d", 2), (b"c", 0)] {
                let completed = done[flag].load(Ordering::SeqCst);
                let found = list.seek(k, u64::MAX);
                if let Some((user_key, _)) = &found {
                    assert!(user_key.as_slice() >= k, "seek for {k:?} landed on {user_key:?}");
                }
                if completed {
                    assert_eq!(found.map(|(u, _)| u), Some(k.to_vec()), "{k:?} was inserted");
                }
            }
        })
    };
    for t in [w1, w2, reader] {
        t.join().unwrap();
    }
    let keys: Vec<Vec<u8>> = list.entries().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, [&b"a"[..], b"b", b"c", b"d", b"e"]);
}

#[test]
fn seeks_land_at_or_after_their_targets_under_random_schedules() {
    shuttle::check_random(neighbours_insert_and_seek, ITERATIONS);
}

#[test]
fn seeks_land_at_or_after_their_targets_under_pct_schedules() {
    shuttle::check_pct(neighbours_insert_and_seek, ITERATIONS, PCT_DEPTH);
}

/// Versions of one key from one thread while another inserts other keys around it: each
/// read at the latest sequence returns the version just inserted, a read at an older
/// snapshot the version of that snapshot.
fn versions_of_one_key_beside_other_inserts() {
    let list = Arc::new(List::new(1 << 20, 512));
    let versions = {
        let list = list.clone();
        shuttle::thread::spawn(move || {
            for seq in [3u64, 5, 7] {
                assert!(list.insert(b"k", seq, &seq.to_le_bytes()));
                assert_eq!(list.get(b"k", u64::MAX).map(|(s, _)| s), Some(seq));
                assert_eq!(list.get(b"k", seq - 1).map(|(s, _)| s), (seq > 3).then(|| seq - 2));
            }
        })
    };
    let others = {
        let list = list.clone();
        shuttle::thread::spawn(move || {
            for (k, seq) in [(&b"j"[..], 4u64), (b"l", 6), (b"k\0", 8)] {
                assert!(list.insert(k, seq, b"x"));
                assert_eq!(list.get(k, u64::MAX).map(|(s, _)| s), Some(seq));
            }
        })
    };
    versions.join().unwrap();
    others.join().unwrap();
    assert_eq!(list.entries().len(), 6);
    list.check_version_flags();
}

#[test]
fn versions_of_a_key_read_back_beside_other_inserts() {
    shuttle::check_random(versions_of_one_key_beside_other_inserts, ITERATIONS);
    shuttle::check_pct(versions_of_one_key_beside_other_inserts, ITERATIONS, PCT_DEPTH);
}

/// Versions of one key inserted out of sequence order by two threads (as two write groups
/// that overlap insert them), the first two racing to be the key's node in the levels: the
/// point index keeps each chain from the newest sequence down
/// whatever the order of the inserts, so a read at any snapshot finds the newest version at
/// or below it, the same one a seek of the levels finds.
fn versions_of_one_key_inserted_out_of_order() {
    let list = Arc::new(List::new(1 << 20, 512));
    let older_first = {
        let list = list.clone();
        shuttle::thread::spawn(move || {
            assert!(list.insert(b"k", 5, b"5"));
            assert_eq!(list.get(b"k", 5).map(|(s, _)| s), Some(5));
        })
    };
    let newer_then_oldest = {
        let list = list.clone();
        shuttle::thread::spawn(move || {
            assert!(list.insert(b"k", 6, b"6"));
            assert_eq!(list.get(b"k", 6).map(|(s, _)| s), Some(6));
            assert!(list.insert(b"k", 4, b"4"));
            assert_eq!(list.get(b"k", 4).map(|(s, _)| s), Some(4));
        })
    };
    older_first.join().unwrap();
    newer_then_oldest.join().unwrap();
    // The first two raced to be the key's node in the levels: one won, the others are
    // versions beside it, and every entry is listed once, newest first.
    assert_eq!(list.key_nodes(), [b"k".to_vec()]);
    list.check_version_flags();
    assert_eq!(list.entries(), [(b"k".to_vec(), 6), (b"k".to_vec(), 5), (b"k".to_vec(), 4)]);
    for snapshot in [3, 4, 5, 6, u64::MAX] {
        let got = list.get(b"k", snapshot);
        assert_eq!(got, list.get_by_seek(b"k", snapshot), "at snapshot {snapshot}");
        let want = [6u64, 5, 4].into_iter().find(|&s| s <= snapshot);
        assert_eq!(got.map(|(s, _)| s), want, "at snapshot {snapshot}");
    }
}

#[test]
fn the_point_index_finds_the_newest_version_whatever_the_insert_order() {
    shuttle::check_random(versions_of_one_key_inserted_out_of_order, ITERATIONS);
    shuttle::check_pct(versions_of_one_key_inserted_out_of_order, ITERATIONS, PCT_DEPTH);
}

/// Three threads inserting versions of one key out of order, two of them racing for its key
/// node: once all return, each node's flags say exactly whether the key has older and newer
/// versions than it (what cursors rely on to skip chain walks), and a walk by seeks lists
/// every version once, newest first.
fn three_threads_flag_one_keys_versions() {
    let list = Arc::new(List::new(1 << 20, 512));
    let inserter = |seqs: Vec<u64>| {
        let list = list.clone();
        shuttle::thread::spawn(move || {
            for seq in seqs {
                assert!(list.insert(b"k", seq, &seq.to_le_bytes()));
                assert_eq!(list.get(b"k", seq).map(|(s, _)| s), Some(seq));
            }
        })
    };
    let threads = [inserter(vec![3]), inserter(vec![5, 1]), inserter(vec![4, 2])];
    for t in threads {
        t.join().unwrap();
    }
    list.check_version_flags();
    let seqs: Vec<u64> = list.entries().into_iter().map(|(_, s)| s).collect();
    assert_eq!(seqs, [5, 4, 3, 2, 1]);
}

#[test]
fn version_flags_are_exact_after_racing_inserts() {
    shuttle::check_random(three_threads_flag_one_keys_versions, ITERATIONS);
    shuttle::check_pct(three_threads_flag_one_keys_versions, ITERATIONS, PCT_DEPTH);
}
