//! `shale_db_checkpoint`, `shale_kvs_checkpoint`, `shale_kvs_shards_checkpoint` and
//! `shale_table_checkpoint` called as C
//! calls them: the checkpoint opens as a store of the same engine with the source's data,
//! the count comes back, and a destination that holds anything is refused with
//! SHALE_INVALID_ARGUMENT, untouched.

use std::ffi::{CStr, CString, c_int};
use std::path::Path;
use std::ptr::{null, null_mut};

use shale::*;

fn message(err: *mut shale_error) -> String {
    // SAFETY: `err` is NULL or an error the library returned, freed here once.
    unsafe {
        if err.is_null() {
            return String::new();
        }
        let m = CStr::from_ptr(shale_error_message(err)).to_string_lossy().into_owned();
        shale_error_free(err);
        m
    }
}

fn call(f: impl FnOnce(*mut *mut shale_error) -> c_int) -> (c_int, String) {
    let mut err = null_mut();
    let rc = f(&mut err);
    assert_eq!(rc == 0, err.is_null(), "an error object exactly when a call fails");
    (rc, message(err))
}

fn c_path(p: &Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

/// A non-empty directory beside the stores; its file stays as it is.
fn occupied(dir: &Path) -> CString {
    let full = dir.join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("theirs"), b"keep me").unwrap();
    c_path(&full)
}

fn still_occupied(dir: &Path) {
    assert_eq!(std::fs::read(dir.join("full").join("theirs")).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(dir.join("full")).unwrap().count(), 1);
}

const INVALID: c_int = shale_status::SHALE_INVALID_ARGUMENT as c_int;

#[test]
fn an_lsm_store_is_checkpointed_through_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (c_path(&dir.path().join("src")), dir.path().join("dst"));
    let mut db = null_mut();
    // SAFETY: valid arguments throughout; the handle is closed once at the end.
    unsafe {
        assert_eq!(call(|e| shale_db_open(src.as_ptr(), null(), &mut db, e)).0, 0);
        for i in 0..100u32 {
            let (k, v) = (format!("key{i:03}"), i.to_le_bytes());
            let rc = call(|e| shale_db_put(db, k.as_ptr(), k.len(), v.as_ptr(), 4, false, e));
            assert_eq!(rc.0, 0, "{}", rc.1);
        }
        let mut entries = 0u64;
        let rc = call(|e| shale_db_checkpoint(db, c_path(&dst).as_ptr(), &mut entries, e));
        assert_eq!((rc.0, entries), (0, 100), "{}", rc.1);
        let full = occupied(dir.path());
        let (rc, msg) = call(|e| shale_db_checkpoint(db, full.as_ptr(), null_mut(), e));
        assert_eq!(rc, INVALID, "{msg}");
        assert!(msg.contains("not empty"), "{msg}");
        still_occupied(dir.path());
        assert_eq!(call(|e| shale_db_close(db, e)).0, 0);
    }
    let copy = shale_lsm::Db::open(&dst, shale_lsm::Options::default()).unwrap();
    assert_eq!(copy.get(b"key042").unwrap(), Some(42u32.to_le_bytes().to_vec()));
}

#[test]
fn a_kvs_store_is_checkpointed_through_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (c_path(&dir.path().join("src")), dir.path().join("dst"));
    let mut store = null_mut();
    // SAFETY: valid arguments throughout; the handle is closed once at the end.
    unsafe {
        assert_eq!(call(|e| shale_kvs_open(src.as_ptr(), null(), &mut store, e)).0, 0);
        for i in 0..50u32 {
            let (k, v) = (format!("key-{i:03}"), i.to_le_bytes());
            let rc =
                call(|e| shale_kvs_store_tuple(store, k.as_ptr(), k.len(), v.as_ptr(), 4, 0, e));
            assert_eq!(rc.0, 0, "{}", rc.1);
        }
        let mut keys = 0u64;
        let rc = call(|e| shale_kvs_checkpoint(store, c_path(&dst).as_ptr(), &mut keys, e));
        assert_eq!((rc.0, keys), (0, 50), "{}", rc.1);
        let full = occupied(dir.path());
        assert_eq!(call(|e| shale_kvs_checkpoint(store, full.as_ptr(), null_mut(), e)).0, INVALID);
        still_occupied(dir.path());
        shale_kvs_close(store);
    }
    let copy = shale_hash::HashStore::open(&dst, shale_hash::HashOptions::default()).unwrap();
    assert_eq!(copy.retrieve(b"key-042").unwrap(), Some(42u32.to_le_bytes().to_vec()));
}

#[test]
fn a_table_store_is_checkpointed_through_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (c_path(&dir.path().join("src")), dir.path().join("dst"));
    let mut store = null_mut();
    let cols = [
        shale_table_column { name: c"k".as_ptr(), variable: false, len: 4 },
        shale_table_column { name: c"v".as_ptr(), variable: true, len: 64 },
    ];
    // SAFETY: valid arguments throughout; the handle is closed once at the end.
    unsafe {
        assert_eq!(call(|e| shale_table_open(src.as_ptr(), null(), &mut store, e)).0, 0);
        let mut t = 0;
        assert_eq!(
            call(|e| shale_table_create(store, c"t".as_ptr(), cols.as_ptr(), 2, &mut t, e)).0,
            0
        );
        for i in 0..30u32 {
            let (k, v) = (i.to_be_bytes(), format!("row {i}"));
            let cells = [k.as_ptr(), v.as_ptr()];
            let lens = [4, v.len()];
            let rc = call(|e| {
                shale_table_insert(store, null_mut(), t, cells.as_ptr(), lens.as_ptr(), 2, e)
            });
            assert_eq!(rc.0, 0, "{}", rc.1);
        }
        let mut rows = 0u64;
        let rc = call(|e| shale_table_checkpoint(store, c_path(&dst).as_ptr(), &mut rows, e));
        assert_eq!((rc.0, rows), (0, 30), "{}", rc.1);
        let full = occupied(dir.path());
        assert_eq!(
            call(|e| shale_table_checkpoint(store, full.as_ptr(), null_mut(), e)).0,
            INVALID
        );
        still_occupied(dir.path());
        shale_table_close(store);
    }
    let copy = shale_table::TableStore::open(&dst, shale_table::TableOptions::default()).unwrap();
    let t = copy.table_id("t").unwrap();
    assert_eq!(copy.select_cell(t, &7u32.to_be_bytes(), "v").unwrap(), Some(b"row 7".to_vec()));
}

#[test]
fn a_set_of_kvs_stores_is_checkpointed_through_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    let srcs: Vec<CString> = (0..3).map(|i| c_path(&dir.path().join(format!("s{i}")))).collect();
    let dsts: Vec<CString> = (0..3).map(|i| c_path(&dir.path().join(format!("d{i}")))).collect();
    let src_ptrs: Vec<_> = srcs.iter().map(|p| p.as_ptr()).collect();
    let dst_ptrs: Vec<_> = dsts.iter().map(|p| p.as_ptr()).collect();
    let mut set = null_mut();
    // SAFETY: valid arguments throughout; the handles are closed once at the end.
    unsafe {
        let rc = call(|e| shale_kvs_shards_open(src_ptrs.as_ptr(), 3, null(), &mut set, e));
        assert_eq!(rc.0, 0, "{}", rc.1);
        for i in 0..60u32 {
            let (k, v) = (format!("key-{i:03}"), i.to_le_bytes());
            let rc = call(|e| {
                shale_kvs_shards_store_tuple(set, k.as_ptr(), k.len(), v.as_ptr(), 4, 0, e)
            });
            assert_eq!(rc.0, 0, "{}", rc.1);
        }
        // Too few paths: refused, nothing made.
        let rc = call(|e| shale_kvs_shards_checkpoint(set, dst_ptrs.as_ptr(), 2, null_mut(), e));
        assert_eq!(rc.0, INVALID, "{}", rc.1);
        assert!(!dir.path().join("d0").exists());
        // One destination that holds something: refused, it untouched, nothing made beside.
        let full = occupied(dir.path());
        let with_full = [dst_ptrs[0], dst_ptrs[1], full.as_ptr()];
        let rc = call(|e| shale_kvs_shards_checkpoint(set, with_full.as_ptr(), 3, null_mut(), e));
        assert_eq!(rc.0, INVALID, "{}", rc.1);
        still_occupied(dir.path());
        // The three stores and the occupied directory: no destination, no staging directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
        let mut keys = 0u64;
        let rc = call(|e| shale_kvs_shards_checkpoint(set, dst_ptrs.as_ptr(), 3, &mut keys, e));
        assert_eq!((rc.0, keys), (0, 60), "{}", rc.1);
        shale_kvs_shards_close(set);
        let mut copy = null_mut();
        let rc = call(|e| shale_kvs_shards_open(dst_ptrs.as_ptr(), 3, null(), &mut copy, e));
        assert_eq!(rc.0, 0, "{}", rc.1);
        let (k, mut buf, mut len) = ("key-042", [0u8; 8], 0usize);
        let rc = call(|e| {
            shale_kvs_shards_retrieve_tuple(
                copy,
                k.as_ptr(),
                k.len(),
                0,
                buf.as_mut_ptr(),
                8,
                &mut len,
                e,
            )
        });
        assert_eq!((rc.0, len, &buf[..4]), (0, 4, &42u32.to_le_bytes()[..]), "{}", rc.1);
        shale_kvs_shards_close(copy);
    }
}
