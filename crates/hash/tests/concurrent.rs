//! Several writer and reader threads on one store in a volume file (the real file backend,
//! O_DIRECT): every acknowledged store is read back by any thread at once, and after a
//! reopen.

use std::sync::Arc;

use shale_hash::{HashOptions, HashStore, StoreMode};

#[test]
fn writers_and_readers_share_a_store_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(HashStore::open(dir.path(), HashOptions::default()).unwrap());
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..300u32 {
                    let key = format!("t{t}-{i:05}").into_bytes();
                    let value = vec![(i % 251) as u8; (i as usize * 37) % 9000];
                    store.store(&key, &value, StoreMode::Overwrite).unwrap();
                    assert_eq!(store.retrieve(&key).unwrap(), Some(value), "read-your-write");
                    // Another thread's earlier keys are readable too.
                    let other = format!("t{}-{:05}", (t + 1) % 4, i / 2).into_bytes();
                    let _ = store.retrieve(&other).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.stats().keys, 1200);
    drop(store);
    let store = HashStore::open(dir.path(), HashOptions::default()).unwrap();
    assert_eq!(store.stats().keys, 1200);
    assert_eq!(store.stats().recovered_records, 1200);
    for i in (0..300u32).step_by(7) {
        let key = format!("t3-{i:05}").into_bytes();
        assert_eq!(
            store.retrieve(&key).unwrap(),
            Some(vec![(i % 251) as u8; (i as usize * 37) % 9000])
        );
    }
}

#[test]
fn a_second_handle_on_a_store_is_refused_through_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = HashStore::open(dir.path(), HashOptions::default()).unwrap();
    store.store(b"key-1", b"v", StoreMode::Overwrite).unwrap();
    let volume_file = dir.path().join(shale_space::VOLUME_FILE_NAME);
    for name in [dir.path().to_path_buf(), volume_file] {
        let second = HashStore::open(&name, HashOptions::default());
        assert!(
            matches!(second, Err(shale_hash::Error::Space(shale_space::Error::InUse(_)))),
            "{}: {second:?}",
            name.display()
        );
    }
    drop(store);
    let again = HashStore::open(dir.path(), HashOptions::default()).unwrap();
    assert_eq!(again.retrieve(b"key-1").unwrap(), Some(b"v".to_vec()));
}

/// Run to completion: a lone synchronous caller runs the worker's turns on its own thread
/// (no hand-off), and many callers at once still get every answer, through the thread when
/// the worker is held. Asserted on the driver's counts of turns, not on time.
#[test]
fn a_lone_caller_runs_the_workers_turns_itself() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        shale_hash::HashStore::open(dir.path(), shale_hash::HashOptions::default()).unwrap();
    for i in 0..200u32 {
        let key = format!("lone{i:04}");
        store.store(key.as_bytes(), &i.to_le_bytes(), shale_hash::StoreMode::Overwrite).unwrap();
    }
    // Each store was a batch this thread built and wrote: at least a turn each. The thread
    // may have run some too (a caller leaving a carried page wakes it), never all.
    let d = store.driver_stats();
    assert!(d.caller_turns >= 200, "callers ran {d:?}");
    drop(store);
    let store =
        shale_hash::HashStore::open(dir.path(), shale_hash::HashOptions::default()).unwrap();
    for i in 0..200u32 {
        let key = format!("lone{i:04}");
        assert_eq!(store.retrieve(key.as_bytes()).unwrap(), Some(i.to_le_bytes().to_vec()));
    }
    let store = std::sync::Arc::new(store);
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..100u32 {
                    let key = format!("t{t}k{i:03}");
                    let value = (t * 1000 + i).to_le_bytes();
                    store.store(key.as_bytes(), &value, shale_hash::StoreMode::Overwrite).unwrap();
                    assert_eq!(store.retrieve(key.as_bytes()).unwrap(), Some(value.to_vec()));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..8u32 {
        for i in (0..100u32).step_by(7) {
            let key = format!("t{t}k{i:03}");
            assert_eq!(
                store.retrieve(key.as_bytes()).unwrap(),
                Some((t * 1000 + i).to_le_bytes().to_vec())
            );
        }
    }
}
