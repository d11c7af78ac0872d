//! The lsm functions called as C calls them, from Rust: NULL arguments, absent and empty
//! values, batches, snapshots and iterators over them not seeing later writes, bounds, a
//! store in use, and snapshots and iterators that outlive `shale_db_close`.

use std::ffi::{CStr, CString, c_int};
use std::path::Path;
use std::ptr::{null, null_mut};

use shale::*;

fn status(s: shale_status) -> c_int {
    s as c_int
}

fn message(err: *mut shale_error) -> String {
    // SAFETY: `err` is NULL or an error the library returned, freed here once.
    unsafe {
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

fn ok(f: impl FnOnce(*mut *mut shale_error) -> c_int) {
    let (rc, msg) = call(f);
    assert_eq!(rc, 0, "{msg}");
}

fn options() -> shale_db_options {
    shale_db_options {
        write_buffer_size: 256 << 10,
        block_cache_size: 1 << 20,
        ..shale_db_options_default()
    }
}

fn try_open(dir: &Path) -> (c_int, *mut shale_db) {
    let path = CString::new(dir.to_str().unwrap()).unwrap();
    let mut db = null_mut();
    // SAFETY: valid path, options and out-parameter.
    let (rc, _) = call(|e| unsafe { shale_db_open(path.as_ptr(), &options(), &mut db, e) });
    (rc, db)
}

fn open(dir: &Path) -> *mut shale_db {
    let (rc, db) = try_open(dir);
    assert_eq!(rc, 0);
    db
}

fn put(db: *mut shale_db, key: &str, value: &str) {
    // SAFETY: a live store; slices valid for their lengths.
    ok(|e| unsafe {
        shale_db_put(db, key.as_ptr(), key.len(), value.as_ptr(), value.len(), false, e)
    });
}

/// The value of `key` as of `snap` (NULL: now).
fn get(db: *mut shale_db, snap: *const shale_snapshot, key: &str) -> Option<Vec<u8>> {
    let mut value = null_mut();
    let mut len = usize::MAX;
    // SAFETY: a live store and snapshot; out-parameters valid; the value is freed once.
    unsafe {
        ok(|e| shale_db_get(db, snap, key.as_ptr(), key.len(), &mut value, &mut len, e));
        if value.is_null() {
            assert_eq!(len, 0);
            return None;
        }
        let v = std::slice::from_raw_parts(value, len).to_vec();
        shale_free(value.cast());
        Some(v)
    }
}

/// Every key=value from the first key on.
fn scan(it: *mut shale_iterator) -> Vec<String> {
    let mut seen = Vec::new();
    // SAFETY: a live iterator; key and value read before it moves.
    unsafe {
        shale_db_iter_seek_to_first(it);
        while shale_db_iter_valid(it) {
            let (mut kl, mut vl) = (0, 0);
            let k = std::slice::from_raw_parts(shale_db_iter_key(it, &mut kl), kl);
            let v = std::slice::from_raw_parts(shale_db_iter_value(it, &mut vl), vl);
            seen.push(format!("{}={}", String::from_utf8_lossy(k), String::from_utf8_lossy(v)));
            shale_db_iter_next(it);
        }
        ok(|e| shale_db_iter_status(it, e));
    }
    seen
}

fn iter(
    db: *mut shale_db,
    snap: *const shale_snapshot,
    lower: Option<&str>,
    upper: Option<&str>,
) -> *mut shale_iterator {
    let bound = |b: Option<&str>| b.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
    let ((lp, ll), (up, ul)) = (bound(lower), bound(upper));
    let mut it = null_mut();
    // SAFETY: a live store and snapshot; bounds valid for their lengths.
    ok(|e| unsafe { shale_db_iter_create(db, snap, lp, ll, up, ul, &mut it, e) });
    it
}

#[test]
fn null_arguments_are_invalid_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let invalid = status(shale_status::SHALE_INVALID_ARGUMENT);
    let db = open(dir.path());
    let (mut value, mut len, mut it) = (null_mut(), 0usize, null_mut());
    // SAFETY: every pointer is NULL or valid; NULL is what is tested.
    unsafe {
        let mut out = null_mut();
        assert_eq!(call(|e| shale_db_open(null(), null(), &mut out, e)).0, invalid);
        assert_eq!(
            call(|e| shale_db_put(null(), b"k".as_ptr(), 1, null(), 0, false, e)).0,
            invalid
        );
        assert_eq!(call(|e| shale_db_put(db, null(), 1, null(), 0, false, e)).0, invalid);
        assert_eq!(call(|e| shale_db_delete(db, null(), 3, false, e)).0, invalid);
        assert_eq!(
            call(|e| shale_db_get(db, null(), b"k".as_ptr(), 1, null_mut(), &mut len, e)).0,
            invalid
        );
        assert_eq!(
            call(|e| shale_db_get(db, null(), b"k".as_ptr(), 1, &mut value, null_mut(), e)).0,
            invalid
        );
        assert_eq!(call(|e| shale_db_write(db, null(), false, e)).0, invalid);
        assert_eq!(call(|e| shale_writebatch_put(null_mut(), null(), 0, null(), 0, e)).0, invalid);
        assert_eq!(call(|e| shale_writebatch_delete(null_mut(), null(), 0, e)).0, invalid);
        assert_eq!(
            call(|e| shale_db_iter_create(null(), null(), null(), 0, null(), 0, &mut it, e)).0,
            invalid
        );
        assert_eq!(
            call(|e| shale_db_iter_create(db, null(), null(), 0, null(), 0, null_mut(), e)).0,
            invalid
        );
        assert_eq!(call(|e| shale_db_iter_status(null(), e)).0, invalid);
        assert!(shale_db_snapshot_create(null()).is_null());
        shale_db_iter_seek_to_first(null_mut());
        shale_db_iter_seek(null_mut(), null(), 0);
        shale_db_iter_next(null_mut());
        shale_db_iter_prev(null_mut());
        assert!(!shale_db_iter_valid(null()));
        assert!(shale_db_iter_key(null(), &mut len).is_null());
        assert_eq!(len, 0);
        assert_eq!(shale_writebatch_count(null()), 0);
        shale_writebatch_clear(null_mut());
        shale_writebatch_destroy(null_mut());
        shale_db_snapshot_release(null_mut());
        shale_db_iter_destroy(null_mut());
        assert_eq!(shale_db_close(null_mut(), null_mut()), 0);
        ok(|e| shale_db_close(db, e));
    }
}

#[test]
fn absent_and_empty_values_differ() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    put(db, "empty", "");
    assert_eq!(get(db, null(), "empty"), Some(Vec::new()));
    assert_eq!(get(db, null(), "absent"), None);
    // An empty key is a key.
    put(db, "", "nothing");
    assert_eq!(get(db, null(), ""), Some(b"nothing".to_vec()));
    let big = vec![b'k'; (64 << 10) + 1];
    // SAFETY: a live store; the key is valid for its length.
    let (rc, msg) =
        call(|e| unsafe { shale_db_put(db, big.as_ptr(), big.len(), null(), 0, true, e) });
    assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT), "{msg}");
    // SAFETY: a live store, closed once.
    ok(|e| unsafe { shale_db_close(db, e) });
}

#[test]
fn a_batch_applies_whole_and_can_be_reused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    put(db, "a", "1");
    let b = shale_writebatch_create();
    // SAFETY: a live store and batch; slices valid for their lengths.
    unsafe {
        ok(|e| shale_writebatch_put(b, b"b".as_ptr(), 1, b"2".as_ptr(), 1, e));
        ok(|e| shale_writebatch_delete(b, b"a".as_ptr(), 1, e));
        ok(|e| shale_writebatch_put(b, b"c".as_ptr(), 1, b"3".as_ptr(), 1, e));
        assert_eq!(shale_writebatch_count(b), 3);
        ok(|e| shale_db_write(db, b, true, e));
        assert_eq!(shale_writebatch_count(b), 3, "the batch is left as it was");
        shale_writebatch_clear(b);
        assert_eq!(shale_writebatch_count(b), 0);
        ok(|e| shale_writebatch_put(b, b"d".as_ptr(), 1, b"4".as_ptr(), 1, e));
        ok(|e| shale_db_write(db, b, false, e));
        shale_writebatch_destroy(b);
    }
    let it = iter(db, null(), None, None);
    assert_eq!(scan(it), ["b=2", "c=3", "d=4"]);
    // SAFETY: live handles, each freed once.
    unsafe {
        shale_db_iter_destroy(it);
        ok(|e| shale_db_close(db, e));
    }
}

#[test]
fn an_iterator_over_a_snapshot_does_not_see_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        put(db, k, v);
    }
    // SAFETY: a live store.
    let snap = unsafe { shale_db_snapshot_create(db) };
    assert!(!snap.is_null());
    put(db, "b", "changed");
    put(db, "d", "4");
    // SAFETY: a live store; the key is valid for its length.
    ok(|e| unsafe { shale_db_delete(db, b"a".as_ptr(), 1, true, e) });
    // Enough writes to flush a memtable or two, so the snapshot reads SSTs as well.
    for i in 0..3000 {
        put(db, &format!("z{i:05}"), &"x".repeat(100));
    }

    assert_eq!(get(db, snap, "b"), Some(b"2".to_vec()));
    assert_eq!(get(db, snap, "d"), None);
    assert_eq!(get(db, null(), "b"), Some(b"changed".to_vec()));
    let it = iter(db, snap, None, None);
    // The snapshot may go before its iterator: the iterator holds it.
    // SAFETY: a live snapshot, released once.
    unsafe { shale_db_snapshot_release(snap) };
    assert_eq!(scan(it), ["a=1", "b=2", "c=3"]);
    // SAFETY: a live iterator, then freed once.
    unsafe {
        let mut len = 0;
        assert!(shale_db_iter_key(it, &mut len).is_null(), "past the end");
        shale_db_iter_seek(it, b"b".as_ptr(), 1);
        shale_db_iter_prev(it);
        let k = shale_db_iter_key(it, &mut len);
        assert_eq!(std::slice::from_raw_parts(k, len), b"a");
        shale_db_iter_destroy(it);
    }
    let bounded = iter(db, null(), Some("b"), Some("z00001"));
    assert_eq!(scan(bounded), ["b=changed", "c=3", "d=4", &format!("z00000={}", "x".repeat(100))]);
    // SAFETY: live handles, each freed once.
    unsafe {
        shale_db_iter_destroy(bounded);
        ok(|e| shale_db_close(db, e));
    }
}

#[test]
fn a_snapshot_of_another_store_is_refused() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (open(one.path()), open(two.path()));
    // SAFETY: live handles, each freed once.
    unsafe {
        let snap = shale_db_snapshot_create(a);
        let (mut value, mut len, mut it) = (null_mut(), 0, null_mut());
        let (rc, msg) = call(|e| shale_db_get(b, snap, b"k".as_ptr(), 1, &mut value, &mut len, e));
        assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT), "{msg}");
        assert_eq!(msg, "invalid argument: the snapshot belongs to another store");
        let (rc, _) = call(|e| shale_db_iter_create(b, snap, null(), 0, null(), 0, &mut it, e));
        assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT));
        assert!(it.is_null());
        shale_db_snapshot_release(snap);
        ok(|e| shale_db_close(a, e));
        ok(|e| shale_db_close(b, e));
    }
}

#[test]
fn a_store_open_twice_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    assert_eq!(try_open(dir.path()).0, status(shale_status::SHALE_IN_USE));
    // SAFETY: a live store, closed once.
    ok(|e| unsafe { shale_db_close(db, e) });
    let again = open(dir.path());
    // SAFETY: a live store, closed once.
    ok(|e| unsafe { shale_db_close(again, e) });
}

#[test]
fn snapshots_and_iterators_keep_a_closed_store_open_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    put(db, "kept", "yes");
    // SAFETY: live handles, each freed once; the iterator and snapshot are used after the
    // store's handle is closed, which is what is tested.
    unsafe {
        let snap = shale_db_snapshot_create(db);
        let it = iter(db, snap, None, None);
        ok(|e| shale_db_close(db, e));
        assert_eq!(try_open(dir.path()).0, status(shale_status::SHALE_IN_USE));
        assert_eq!(scan(it), ["kept=yes"]);
        shale_db_iter_destroy(it);
        assert_eq!(try_open(dir.path()).0, status(shale_status::SHALE_IN_USE));
        shale_db_snapshot_release(snap);
    }
    // The last release closed it: nothing acknowledged was lost.
    let db = open(dir.path());
    assert_eq!(get(db, null(), "kept"), Some(b"yes".to_vec()));
    // SAFETY: a live store, closed once.
    ok(|e| unsafe { shale_db_close(db, e) });
}
