//! A store by path: a directory holding the volume file (and, when asked for, the
//! persistent memory file: a real mapping written back with clwb/clflushopt and sfence),
//! the store lock, reopens, dropped tables' segments used again, and bad paths.

mod common;

use common::*;
use shale_io::{Affinity, QueuePairOptions};
use shale_table::{
    Error, FilePmem, FilePmemOptions, Isolation, PMEM_FILE_NAME, TableOptions, TableStore,
    UndoLogPlace,
};

/// Emulated persistent memory, asked for.
fn opts() -> TableOptions {
    TableOptions { undo_log_bytes: 1 << 20, undo_log: UndoLogPlace::Pmem, ..small_options() }
}

#[test]
fn a_store_by_path_reopens_with_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let store = TableStore::open(&path, opts()).unwrap();
    let r = TableStore::open(&path, opts());
    assert!(matches!(r, Err(Error::Space(shale_space::Error::InUse(_)))), "{r:?}");
    let a = store.create_table("a", schema()).unwrap();
    let b = store.create_table("b", schema()).unwrap();
    for i in 0..40 {
        store.insert(a, &row(&key(i), &text(&key(i), 0, 3000), i)).unwrap();
        store.insert(b, &row(&key(i), b"b", i)).unwrap();
    }
    // Uncommitted at the close: rolled back by the drop's abort.
    let mut txn = store.begin(Isolation::Serializable);
    txn.update(a, &key(1), "text", b"uncommitted").unwrap();
    drop(txn);
    store.drop_table("b").unwrap();
    assert!(matches!(store.insert(b, &row(&key(1), b"b", 1)), Err(Error::NoSuchTable(_))));
    let c = store.create_table("c", schema()).unwrap();
    assert_ne!(c, b, "ids are never used again");
    for i in 0..40 {
        store.insert(c, &row(&key(i), &text(&key(i), 5, 2500), i)).unwrap();
    }
    drop(store);
    assert!(path.join(PMEM_FILE_NAME).exists());

    let store = TableStore::open(&path, opts()).unwrap();
    assert_eq!(store.tables().len(), 2);
    assert_eq!(store.table_id("a"), Some(a));
    assert_eq!(store.table_id("b"), None);
    for i in 0..40 {
        assert_eq!(store.select_cell(a, &key(i), "text").unwrap(), Some(text(&key(i), 0, 3000)));
        assert_eq!(store.select_cell(c, &key(i), "text").unwrap(), Some(text(&key(i), 5, 2500)));
    }
}

#[test]
fn a_store_by_path_sends_its_block_io_through_queue_pairs() {
    // io_uring queues with polling kernel threads, placed per mode; small caches, so that
    // scans and point reads read blocks back through the pairs from several threads.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let with = |affinity| TableOptions {
        cache_blocks: 32,
        queue_pairs: Some(QueuePairOptions { pairs: 3, depth: 8, affinity, ..Default::default() }),
        ..opts()
    };
    let store = TableStore::open(&path, with(Affinity::PairBinding)).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..300 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 1500), i)).unwrap();
    }
    let all = all_rows(&store, t);
    assert_eq!(all.len(), 300);
    let stats = store.queue_pair_stats();
    assert!(stats.iter().filter(|s| s.requests > 0).count() > 1, "{stats:?}");
    drop(store);

    let store = std::sync::Arc::new(TableStore::open(&path, with(Affinity::Separated)).unwrap());
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let store = store.clone();
            s.spawn(move || {
                for i in (w..300).step_by(3) {
                    let got = store.select_cell(t, &key(i), "text").unwrap();
                    assert_eq!(got, Some(text(&key(i), 0, 1500)), "row {i}");
                }
            });
        }
    });
    check_ranges(&store, t, &all);
    assert!(store.queue_pair_stats().iter().all(|s| s.requests > 0 && s.pending == 0));
}

#[test]
fn a_persistent_memory_file_elsewhere_and_bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let pmem = dir.path().join("elsewhere.pmem");
    let o = TableOptions { pmem_path: Some(pmem.clone()), ..opts() };
    let store = TableStore::open(dir.path().join("db"), o.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(1), b"x", 1)).unwrap();
    drop(store);
    // The log and its owner trailer (the store's volume file, for `shale orphans`).
    let bytes = (1 << 20) + shale_table::pmem_owner::OWNER_BYTES;
    assert_eq!(std::fs::metadata(&pmem).unwrap().len(), bytes);
    let owner = shale_table::pmem_owner::describe(&pmem).unwrap().unwrap();
    let volume = std::path::absolute(shale_space::volume_file(&dir.path().join("db"))).unwrap();
    assert_eq!(owner.volume_path.as_deref(), Some(volume.as_path()));
    assert!(!dir.path().join("db").join(PMEM_FILE_NAME).exists());
    let store = TableStore::open(dir.path().join("db"), o.clone()).unwrap();
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(b"x".to_vec()));
    drop(store);
    // The file keeps its size whatever the options say (they size a new one); a file where
    // a directory must be is refused.
    let store =
        TableStore::open(dir.path().join("db"), TableOptions { undo_log_bytes: 2 << 20, ..o })
            .unwrap();
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(b"x".to_vec()));
    drop(store);
    assert_eq!(std::fs::metadata(&pmem).unwrap().len(), bytes);
    let r = TableStore::open(&pmem, opts());
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let missing = TableOptions { create_if_missing: false, ..opts() };
    assert!(TableStore::open(dir.path().join("nothing"), missing).is_err());
    assert!(!dir.path().join("nothing").exists());
}

#[test]
fn the_mapping_uses_a_line_write_back_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let p = FilePmem::open(&dir.path().join("p"), 64 << 10, FilePmemOptions::default()).unwrap();
    let name = p.line_flush_name();
    #[cfg(target_arch = "x86_64")]
    assert!(["clwb", "clflushopt", "clflush"].contains(&name), "{name}");
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(name, "msync");
}

/// A store by path whose persistent memory ring (64 KiB) is far smaller than one
/// transaction: the undo log spills into the volume file, commits and aborts, and the
/// spill area (and the index's pages, past 50 entries) come back at the reopen.
#[test]
fn a_store_by_path_spills_its_undo_log_to_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let o = TableOptions {
        undo_log_bytes: shale_table::RING_OFFSET as u64 + (64 << 10),
        undo_spill_bytes: 1 << 20,
        index_memory_entries: Some(50),
        undo_log: UndoLogPlace::Pmem,
        ..small_options()
    };
    let store = TableStore::open(&path, o.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..80 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 2000), i)).unwrap();
    }
    for (version, commit) in [(1, true), (2, false)] {
        let mut txn = store.begin(Isolation::ReadCommitted);
        for i in 0..80 {
            txn.update(t, &key(i), "text", &text(&key(i), version, 2000)).unwrap();
        }
        if commit { txn.commit().unwrap() } else { txn.abort().unwrap() }
    }
    let s = store.stats();
    assert!(s.spill.appended > 80, "{s:?}");
    assert!(s.index_paged_entries >= 30, "{s:?}");
    drop(store);
    let store = TableStore::open(&path, o).unwrap();
    for i in 0..80 {
        assert_eq!(
            store.select_cell(t, &key(i), "text").unwrap(),
            Some(text(&key(i), 1, 2000)),
            "row {i}"
        );
    }
}

/// Allocated bytes of a file (`st_blocks`).
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn the_undo_log_file_allocates_only_what_its_ring_uses() {
    // The log's file is sparse: the open's search of the ring reads only its written pages
    // (on tmpfs a read of a hole through the mapping allocates the page), and short
    // transactions go back to the ring's start past the wrap mark. In /dev/shm, where the
    // emulation puts persistent memory by default, when the machine has one.
    let dir = tempfile::tempdir().unwrap();
    let shm = std::path::Path::new("/dev/shm");
    let pmem_dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let pmem = pmem_dir.path().join("undo.pmem");
    let o = TableOptions {
        undo_log_bytes: 8 << 20,
        undo_wrap_bytes: 64 << 10,
        pmem_path: Some(pmem.clone()),
        undo_log: UndoLogPlace::Pmem,
        ..small_options()
    };
    let path = dir.path().join("db");
    let store = TableStore::open(&path, o.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    drop(store);
    // Reopened: the search of an empty ring read no hole.
    let store = TableStore::open(&path, o.clone()).unwrap();
    assert!(allocated(&pmem) <= 16 << 10, "{} bytes after a reopen", allocated(&pmem));
    for i in 0..3000 {
        store.insert(t, &row(&key(i), b"v", i)).unwrap();
    }
    let appended = store.stats().undo.appended;
    drop(store);
    let store = TableStore::open(&path, o).unwrap();
    for i in (0..3000).step_by(97) {
        assert_eq!(store.select_cell(t, &key(i), "text").unwrap(), Some(b"v".to_vec()));
    }
    // Thousands of records (at least 56 bytes each) in one wrap mark's worth of pages.
    assert!(appended >= 3000 && appended * 56 > 2 * (64 << 10), "{appended} records");
    let bytes = allocated(&pmem);
    assert!(bytes <= (64 << 10) + (16 << 10), "{bytes} bytes allocated for {appended} records");
}
