//! Where the undo log lives (`undo_file.rs`): on the volume by default (no DAX here), in a
//! persistent memory file only when asked for, and such a file bound to one store instance:
//! a missing file refuses the open naming it, a copy of the store never uses or removes the
//! original's file, a copy made with its file takes that file, a rename keeps it.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use shale_table::{Error, Isolation, PMEM_FILE_NAME, TableOptions, TableStore, UndoLogPlace};

/// A directory for persistent memory files: in /dev/shm where there is one, as emulation
/// puts them.
fn shm_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() }
}

fn pmem_opts(pmem: &Path) -> TableOptions {
    TableOptions {
        undo_log: UndoLogPlace::Pmem,
        pmem_path: Some(pmem.to_path_buf()),
        undo_log_bytes: 1 << 20,
        ..small_options()
    }
}

/// `cp -a` of a store directory: every file copied (new inodes), the copy's files not the
/// original's.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
    }
}

/// A store with a table `t` holding rows 0..10, committed, and a transaction left open
/// over row 1 when the files are copied (`copy` gets them as the crash left them).
fn store_with_open_transaction(
    path: &Path,
    opts: &TableOptions,
    copy: &Path,
    pmem_copy: &[(PathBuf, PathBuf)],
) {
    let store = TableStore::open(path, opts.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..10 {
        store.insert(t, &row(&key(i), b"committed", i)).unwrap();
    }
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.update(t, &key(1), "text", b"in flight").unwrap();
    // Another commit writes the block the open transaction changed in place.
    store.insert(t, &row(&key(20), b"other", 20)).unwrap();
    copy_dir(path, copy);
    for (from, to) in pmem_copy {
        std::fs::copy(from, to).unwrap();
    }
    drop(txn);
    drop(store);
}

fn text_of(store: &TableStore, i: u64) -> Option<Vec<u8>> {
    let t = store.table_id("t").unwrap();
    store.select_cell(t, &key(i), "text").unwrap()
}

#[test]
fn by_default_the_undo_log_is_on_the_volume_and_no_file_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path(), small_options()).unwrap();
    assert_eq!(store.undo_log_path(), None);
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(1), b"x", 1)).unwrap();
    let s = store.stats();
    assert_eq!(s.undo.appended, 0, "{s:?}");
    assert!(s.spill.appended > 0, "{s:?}");
    drop(store);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.contains(&PMEM_FILE_NAME.to_string()), "{names:?}");
    // A pmem_path alone is not a request for emulated persistent memory: only DAX there.
    let shm = shm_dir();
    let o = TableOptions { pmem_path: Some(shm.path().join("u.pmem")), ..small_options() };
    let store = TableStore::open(dir.path(), o).unwrap();
    assert_eq!(store.undo_log_path(), None);
    assert!(!shm.path().join("u.pmem").exists());
    assert!(!shale_table::dax_at(shm.path()), "this test assumes no DAX in {:?}", shm.path());
}

#[test]
fn a_missing_persistent_memory_file_refuses_the_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_dir();
    let pmem = shm.path().join("undo.pmem");
    let store = TableStore::open(dir.path(), pmem_opts(&pmem)).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem.as_path()));
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(1), b"x", 1)).unwrap();
    drop(store);
    // The store knows its file: the default options open it there.
    let store = TableStore::open(dir.path(), small_options()).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem.as_path()));
    drop(store);
    // What a reboot does to /dev/shm.
    std::fs::remove_file(&pmem).unwrap();
    let volume = std::fs::read(dir.path().join("volume.shale")).unwrap();
    for o in [small_options(), pmem_opts(&pmem)] {
        match TableStore::open(dir.path(), o) {
            Err(Error::UndoLogMissing { path }) => assert_eq!(path, pmem),
            r => panic!("{r:?}"),
        }
    }
    let msg = TableStore::open(dir.path(), small_options()).unwrap_err().to_string();
    assert!(msg.contains(&pmem.display().to_string()), "{msg}");
    assert!(!pmem.exists(), "a refused open made the file");
    assert_eq!(std::fs::read(dir.path().join("volume.shale")).unwrap(), volume);
    // An empty file in its place (made by someone else) is no log either.
    std::fs::write(&pmem, b"").unwrap();
    assert!(matches!(
        TableStore::open(dir.path(), small_options()),
        Err(Error::UndoLogMissing { .. })
    ));
    std::fs::remove_file(&pmem).unwrap();
    // Accepting the loss (the store was closed cleanly): it opens, on the volume now.
    let o = TableOptions { accept_lost_undo_log: true, ..small_options() };
    let store = TableStore::open(dir.path(), o).unwrap();
    assert_eq!(store.undo_log_path(), None);
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(b"x".to_vec()));
    drop(store);
    // And the catalog no longer names the file.
    let store = TableStore::open(dir.path(), small_options()).unwrap();
    assert_eq!(store.undo_log_path(), None);
}

#[test]
fn a_copy_of_the_store_refuses_the_originals_file_and_leaves_it_alone() {
    let base = tempfile::tempdir().unwrap();
    let (original, copy) = (base.path().join("a"), base.path().join("b"));
    let shm = shm_dir();
    let pmem = shm.path().join("undo.pmem");
    store_with_open_transaction(&original, &pmem_opts(&pmem), &copy, &[]);
    let before = std::fs::read(&pmem).unwrap();
    // The copy's catalog names the original's file: refused, whatever the options say.
    for o in [small_options(), pmem_opts(&pmem)] {
        match TableStore::open(&copy, o) {
            Err(Error::UndoLogOfOriginal { path }) => assert_eq!(path, pmem),
            r => panic!("{r:?}"),
        }
    }
    assert_eq!(std::fs::read(&pmem).unwrap(), before, "the copy's open changed the file");
    // Accepting the loss: never onto the original's file...
    let accept = |o: TableOptions| TableOptions { accept_lost_undo_log: true, ..o };
    let r = TableStore::open(&copy, accept(pmem_opts(&pmem)));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // ...but on the volume (or a file of its own), the original's file untouched.
    let store = TableStore::open(&copy, accept(small_options())).unwrap();
    assert_eq!(store.undo_log_path(), None);
    assert_eq!(text_of(&store, 20), Some(b"other".to_vec()));
    drop(store);
    assert_eq!(std::fs::read(&pmem).unwrap(), before);
    // The original rolls its transaction back from its own file.
    let store = TableStore::open(&original, small_options()).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem.as_path()));
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
    assert_eq!(text_of(&store, 20), Some(b"other".to_vec()));
}

#[test]
fn a_copy_made_with_its_file_rolls_back_from_it() {
    let base = tempfile::tempdir().unwrap();
    let (original, copy) = (base.path().join("a"), base.path().join("b"));
    let shm = shm_dir();
    let (pmem, pmem_copy) = (shm.path().join("undo.pmem"), shm.path().join("copy.pmem"));
    store_with_open_transaction(
        &original,
        &pmem_opts(&pmem),
        &copy,
        &[(pmem.clone(), pmem_copy.clone())],
    );
    let before = std::fs::read(&pmem).unwrap();
    let store = TableStore::open(&copy, pmem_opts(&pmem_copy)).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem_copy.as_path()));
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
    assert_eq!(text_of(&store, 20), Some(b"other".to_vec()));
    drop(store);
    // The copy now names its own file, and the default options find it.
    let store = TableStore::open(&copy, small_options()).unwrap();
    assert_eq!(store.undo_log_path(), Some(pmem_copy.as_path()));
    drop(store);
    assert_eq!(std::fs::read(&pmem).unwrap(), before);
    let store = TableStore::open(&original, small_options()).unwrap();
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
}

#[test]
fn a_copy_of_a_directory_with_its_file_inside_takes_its_own_file() {
    let base = tempfile::tempdir().unwrap();
    let (original, copy) = (base.path().join("a"), base.path().join("b"));
    let o = TableOptions { undo_log: UndoLogPlace::Pmem, ..small_options() };
    store_with_open_transaction(&original, &o, &copy, &[]);
    let before = std::fs::read(original.join(PMEM_FILE_NAME)).unwrap();
    let store = TableStore::open(&copy, small_options()).unwrap();
    assert_eq!(store.undo_log_path(), Some(copy.join(PMEM_FILE_NAME).as_path()));
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
    drop(store);
    assert_eq!(std::fs::read(original.join(PMEM_FILE_NAME)).unwrap(), before);
    let store = TableStore::open(&original, small_options()).unwrap();
    assert_eq!(store.undo_log_path(), Some(original.join(PMEM_FILE_NAME).as_path()));
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
}

#[test]
fn a_renamed_store_keeps_its_file() {
    let base = tempfile::tempdir().unwrap();
    let shm = shm_dir();
    let pmem = shm.path().join("undo.pmem");
    for (i, o) in
        [pmem_opts(&pmem), TableOptions { undo_log: UndoLogPlace::Pmem, ..small_options() }]
            .into_iter()
            .enumerate()
    {
        let (from, to) = (base.path().join(format!("a{i}")), base.path().join(format!("b{i}")));
        let unused = base.path().join(format!("unused{i}"));
        store_with_open_transaction(&from, &o, &unused, &[]);
        std::fs::rename(&from, &to).unwrap();
        let store = TableStore::open(&to, small_options()).unwrap();
        let file = store.undo_log_path().unwrap().to_path_buf();
        assert!(file == pmem || file == to.join(PMEM_FILE_NAME), "{file:?}");
        assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
        assert_eq!(text_of(&store, 20), Some(b"other".to_vec()));
        drop(store);
        let _ = std::fs::remove_file(&pmem);
    }
}

#[test]
fn asked_for_the_volume_a_store_retires_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let shm = shm_dir();
    let pmem = shm.path().join("undo.pmem");
    let unused = dir.path().join("unused");
    store_with_open_transaction(&dir.path().join("s"), &pmem_opts(&pmem), &unused, &[]);
    let o = TableOptions { undo_log: UndoLogPlace::Volume, ..small_options() };
    let store = TableStore::open(dir.path().join("s"), o).unwrap();
    assert_eq!(text_of(&store, 1), Some(b"committed".to_vec()));
    assert_eq!(store.undo_log_path(), None);
    assert!(!pmem.exists());
    drop(store);
    let store = TableStore::open(dir.path().join("s"), small_options()).unwrap();
    assert_eq!(store.undo_log_path(), None);
    drop(store);
    // Destroying a store takes its own file and nothing else.
    let keep = dir.path().join("s").join("notes.txt");
    std::fs::write(&keep, b"mine").unwrap();
    TableStore::destroy(dir.path().join("s")).unwrap();
    assert!(!dir.path().join("s").join("volume.shale").exists());
    assert!(keep.exists());
}

#[test]
fn destroying_a_copy_leaves_the_originals_file() {
    let base = tempfile::tempdir().unwrap();
    let (original, copy) = (base.path().join("a"), base.path().join("b"));
    let shm = shm_dir();
    let pmem = shm.path().join("undo.pmem");
    store_with_open_transaction(&original, &pmem_opts(&pmem), &copy, &[]);
    TableStore::destroy(&copy).unwrap();
    assert!(pmem.exists());
    TableStore::destroy(&original).unwrap();
    assert!(!pmem.exists());
}
