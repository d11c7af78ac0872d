//! The table functions called as C calls them, from Rust: NULL arguments, bad isolation,
//! absent rows and cells, rows read out of range, each table error as its status (a wrong
//! size, a missing column or table, a lock held by another transaction, a full undo log),
//! and a store in use.

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

fn options() -> shale_table_options {
    shale_table_options {
        undo_log_bytes: 1 << 20,
        undo_spill_bytes: 0,
        lock_timeout_ms: 50,
        ..shale_table_options_default()
    }
}

fn try_open(dir: &Path) -> (c_int, *mut shale_table_store) {
    let path = CString::new(dir.to_str().unwrap()).unwrap();
    let mut store = null_mut();
    // SAFETY: valid path, options and out-parameter.
    let (rc, _) = call(|e| unsafe { shale_table_open(path.as_ptr(), &options(), &mut store, e) });
    (rc, store)
}

/// A store with a table "t" of (k: 4 bytes, v: up to 64 KiB).
fn open_with_table(dir: &Path) -> (*mut shale_table_store, u32) {
    let (rc, store) = try_open(dir);
    assert_eq!(rc, 0);
    let cols = [
        shale_table_column { name: c"k".as_ptr(), variable: false, len: 4 },
        shale_table_column { name: c"v".as_ptr(), variable: true, len: 64 << 10 },
    ];
    let mut id = 0;
    // SAFETY: a live store, a valid name, columns and out-parameter.
    ok(|e| unsafe { shale_table_create(store, c"t".as_ptr(), cols.as_ptr(), 2, &mut id, e) });
    (store, id)
}

fn insert(
    store: *mut shale_table_store,
    txn: *mut shale_table_txn,
    t: u32,
    k: &[u8],
    v: &[u8],
) -> (c_int, String) {
    let cells = [k.as_ptr(), v.as_ptr()];
    let lens = [k.len(), v.len()];
    // SAFETY: a live store and transaction (or NULL); cells valid for their lengths.
    call(|e| unsafe { shale_table_insert(store, txn, t, cells.as_ptr(), lens.as_ptr(), 2, e) })
}

fn cell(store: *mut shale_table_store, t: u32, k: &[u8]) -> Option<Vec<u8>> {
    let (mut value, mut len) = (null_mut(), 0);
    // SAFETY: a live store; out-parameters valid.
    ok(|e| unsafe {
        shale_table_select_cell(
            store,
            null_mut(),
            t,
            k.as_ptr(),
            k.len(),
            c"v".as_ptr(),
            &mut value,
            &mut len,
            e,
        )
    });
    if value.is_null() {
        return None;
    }
    // SAFETY: the library's value of `len` bytes, freed once.
    unsafe {
        let v = std::slice::from_raw_parts(value, len).to_vec();
        shale_free(value.cast());
        Some(v)
    }
}

#[test]
fn null_arguments_and_bad_isolation_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, t) = open_with_table(dir.path());
    let invalid = status(shale_status::SHALE_INVALID_ARGUMENT);
    // SAFETY: NULL where the calls check for it; the rest valid.
    unsafe {
        let mut out = null_mut();
        assert_eq!(call(|e| shale_table_open(null(), null(), &mut out, e)).0, invalid);
        assert_eq!(
            call(|e| shale_table_insert(null(), null_mut(), t, null(), null(), 0, e)).0,
            invalid
        );
        assert_eq!(
            call(|e| shale_table_insert(store, null_mut(), t, null(), null(), 2, e)).0,
            invalid
        );
        assert_eq!(call(|e| shale_table_erase(store, null_mut(), t, null(), 4, e)).0, invalid);
        assert_eq!(call(|e| shale_table_commit(null_mut(), e)).0, invalid);
        assert_eq!(call(|e| shale_table_abort(null_mut(), e)).0, invalid);
        let mut id = 0;
        assert_eq!(call(|e| shale_table_create(store, null(), null(), 0, &mut id, e)).0, invalid);
        assert!(shale_table_begin(store, 3).is_null());
        assert!(shale_table_begin(null(), 0).is_null());
        assert_eq!(shale_table_rows_count(null()), 0);
        let mut len = 9;
        assert!(shale_table_rows_cell(null(), 0, 0, &mut len).is_null());
        assert_eq!(len, 0);
        shale_table_rows_free(null_mut());
        shale_table_scan_destroy(null_mut());
        shale_table_close(store);
        shale_table_close(null_mut());
    }
}

#[test]
fn every_table_error_has_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let (store, t) = open_with_table(dir.path());
    let st = |s: shale_status| status(s);
    ok(|_| insert(store, null_mut(), t, b"0001", b"one").0);
    assert_eq!(insert(store, null_mut(), t, b"0001", b"uno").0, st(shale_status::SHALE_KEY_EXISTS));
    assert_eq!(insert(store, null_mut(), t, b"01", b"x").0, st(shale_status::SHALE_WRONG_SIZE));
    assert_eq!(
        insert(store, null_mut(), t + 7, b"0002", b"x").0,
        st(shale_status::SHALE_NO_SUCH_TABLE)
    );
    // SAFETY: a live store; slices valid for their lengths.
    unsafe {
        let (rc, msg) = call(|e| {
            shale_table_update(
                store,
                null_mut(),
                t,
                b"0001".as_ptr(),
                4,
                c"w".as_ptr(),
                b"x".as_ptr(),
                1,
                e,
            )
        });
        assert_eq!(rc, st(shale_status::SHALE_NO_SUCH_COLUMN), "{msg}");
        let (rc, _) = call(|e| shale_table_erase(store, null_mut(), t, b"0009".as_ptr(), 4, e));
        assert_eq!(rc, st(shale_status::SHALE_KEY_NOT_FOUND));
        let mut id = 0;
        let (rc, _) = call(|e| shale_table_id(store, c"nope".as_ptr(), &mut id, e));
        assert_eq!(rc, st(shale_status::SHALE_NO_SUCH_TABLE));
        // Another transaction holds the row: the lock wait times out, the transaction goes on.
        let holder = shale_table_begin(store, 0);
        ok(|e| shale_table_erase(store, holder, t, b"0001".as_ptr(), 4, e));
        let waiter = shale_table_begin(store, 1);
        let (rc, _) = call(|e| {
            shale_table_update(
                store,
                waiter,
                t,
                b"0001".as_ptr(),
                4,
                c"v".as_ptr(),
                b"x".as_ptr(),
                1,
                e,
            )
        });
        assert_eq!(rc, st(shale_status::SHALE_LOCK_TIMEOUT));
        ok(|e| shale_table_abort(holder, e));
        ok(|e| shale_table_commit(waiter, e));
        // A transaction larger than the undo log (1 MiB, no spill area): LOG_FULL, and it
        // stays open.
        let v = vec![7u8; 60 << 10];
        for i in 0..24u32 {
            ok(|_| insert(store, null_mut(), t, format!("{:04}", 100 + i).as_bytes(), &v).0);
        }
        let big = shale_table_begin(store, 0);
        let w = vec![8u8; 60 << 10];
        let mut full = None;
        for i in 0..24u32 {
            let k = format!("{:04}", 100 + i);
            let (rc, _) = call(|e| {
                shale_table_update(
                    store,
                    big,
                    t,
                    k.as_ptr(),
                    4,
                    c"v".as_ptr(),
                    w.as_ptr(),
                    w.len(),
                    e,
                )
            });
            if rc != 0 {
                full = Some(rc);
                break;
            }
        }
        assert_eq!(full, Some(st(shale_status::SHALE_LOG_FULL)));
        ok(|e| shale_table_abort(big, e));
        assert_eq!(cell(store, t, b"0100"), Some(v.clone()));
        assert_eq!(cell(store, t, b"0001"), Some(b"one".to_vec()));
        // A second open of the store is refused while it is open.
        assert_eq!(try_open(dir.path()).0, st(shale_status::SHALE_IN_USE));
        shale_table_close(store);
    }
    assert_eq!(
        // SAFETY: a static string.
        unsafe { CStr::from_ptr(shale_status_name(22)) }.to_str().unwrap(),
        "SHALE_LOG_FULL"
    );
}

#[test]
fn selects_and_scans_read_rows_owned_by_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let (store, t) = open_with_table(dir.path());
    for i in 0..250u32 {
        let k = format!("{i:04}");
        ok(|_| insert(store, null_mut(), t, k.as_bytes(), format!("v{i}").as_bytes()).0);
    }
    // SAFETY: a live store; out-parameters valid; rows and scans freed once.
    unsafe {
        let mut rows = null_mut();
        ok(|e| shale_table_select(store, null_mut(), t, b"0042".as_ptr(), 4, &mut rows, e));
        assert_eq!(shale_table_rows_count(rows), 1);
        let mut len = 0;
        let v = shale_table_rows_cell(rows, 0, 1, &mut len);
        assert_eq!(std::slice::from_raw_parts(v, len), b"v42");
        assert!(shale_table_rows_cell(rows, 0, 2, &mut len).is_null());
        assert!(shale_table_rows_cell(rows, 1, 0, &mut len).is_null());
        shale_table_rows_free(rows);
        ok(|e| shale_table_select(store, null_mut(), t, b"0999".as_ptr(), 4, &mut rows, e));
        assert!(rows.is_null());
        // [0010, 0240): 230 rows in batches of 100, 100, 30.
        let mut scan = null_mut();
        ok(|e| {
            shale_table_scan_create(
                store,
                t,
                b"0010".as_ptr(),
                4,
                b"0240".as_ptr(),
                4,
                &mut scan,
                e,
            )
        });
        let mut batches = Vec::new();
        loop {
            let mut rows = null_mut();
            ok(|e| shale_table_scan_next(scan, &mut rows, e));
            if rows.is_null() {
                break;
            }
            batches.push(shale_table_rows_count(rows));
            shale_table_rows_free(rows);
        }
        assert_eq!(batches, vec![100, 100, 30]);
        shale_table_scan_destroy(scan);
        // By the value column: "v10".."v12" as bytes holds v10, v100..v119 and v11, v110..
        // (byte order), in key order.
        ok(|e| {
            shale_table_scan_column_create(
                store,
                t,
                c"v".as_ptr(),
                b"v10".as_ptr(),
                3,
                b"v12".as_ptr(),
                3,
                &mut scan,
                e,
            )
        });
        let mut keys = Vec::new();
        loop {
            let mut rows = null_mut();
            ok(|e| shale_table_scan_next(scan, &mut rows, e));
            if rows.is_null() {
                break;
            }
            for r in 0..shale_table_rows_count(rows) {
                let mut len = 0;
                let k = shale_table_rows_cell(rows, r, 0, &mut len);
                keys.push(String::from_utf8(std::slice::from_raw_parts(k, len).to_vec()).unwrap());
            }
            shale_table_rows_free(rows);
        }
        let want: Vec<String> = (0..250u32)
            .filter(|i| {
                let v = format!("v{i}");
                ("v10".."v12").contains(&v.as_str())
            })
            .map(|i| format!("{i:04}"))
            .collect();
        assert_eq!(want.len(), 22);
        assert_eq!(keys, want);
        shale_table_scan_destroy(scan);
        let mut none = null_mut();
        let (rc, _) = call(|e| {
            shale_table_scan_column_create(
                store,
                t,
                c"w".as_ptr(),
                null(),
                0,
                null(),
                0,
                &mut none,
                e,
            )
        });
        assert_eq!(rc, status(shale_status::SHALE_NO_SUCH_COLUMN));
        assert!(none.is_null());
        shale_table_close(store);
    }
}

#[test]
fn a_transaction_locks_its_declared_rows_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (store, t) = open_with_table(dir.path());
    ok(|_| insert(store, null_mut(), t, b"0001", b"one").0);
    let row = |key: &'static [u8], write| shale_table_declared_row {
        table: t,
        key: key.as_ptr(),
        key_len: key.len(),
        write,
    };
    let rows = [row(b"0001", false), row(b"0002", true)];
    // SAFETY: a live store, `rows` readable for its length, valid out-parameters.
    unsafe {
        let mut txn = null_mut();
        ok(|e| shale_table_begin_declared(store, 1, rows.as_ptr(), 2, &mut txn, e));
        assert!(!txn.is_null());
        // Both rows are locked before the transaction touches either: a writer of the row
        // read and an insert of the absent key wait out the lock timeout.
        let (rc, _) = call(|e| {
            shale_table_update(
                store,
                null_mut(),
                t,
                b"0001".as_ptr(),
                4,
                c"v".as_ptr(),
                b"x".as_ptr(),
                1,
                e,
            )
        });
        assert_eq!(rc, status(shale_status::SHALE_LOCK_TIMEOUT));
        let (rc, _) = insert(store, null_mut(), t, b"0002", b"other");
        assert_eq!(rc, status(shale_status::SHALE_LOCK_TIMEOUT));
        ok(|_| insert(store, txn, t, b"0002", b"mine").0);
        ok(|e| shale_table_commit(txn, e));
        assert_eq!(cell(store, t, b"0002"), Some(b"mine".to_vec()));

        // Bad input is refused with its status, and no transaction is made.
        let mut txn = null_mut();
        let (rc, _) = call(|e| shale_table_begin_declared(store, 7, rows.as_ptr(), 2, &mut txn, e));
        assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT));
        let (rc, _) = call(|e| shale_table_begin_declared(store, 0, null(), 2, &mut txn, e));
        assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT));
        let missing = [shale_table_declared_row { table: 99, ..rows[0] }];
        let (rc, _) =
            call(|e| shale_table_begin_declared(store, 0, missing.as_ptr(), 1, &mut txn, e));
        assert_eq!(rc, status(shale_status::SHALE_NO_SUCH_TABLE));
        assert!(txn.is_null());
        // No rows at all: a plain transaction.
        ok(|e| shale_table_begin_declared(store, 2, null(), 0, &mut txn, e));
        ok(|e| shale_table_abort(txn, e));
        shale_table_close(store);
    }
}

/// The undo log's place (issue #41): on the volume by default where there is no DAX (no file
/// is made), in `undo.pmem` when asked for, and an unknown code refused by name.
#[test]
fn the_undo_log_goes_where_the_options_say() {
    let open = |dir: &Path, undo_log: u32| {
        let path = CString::new(dir.to_str().unwrap()).unwrap();
        let o = shale_table_options { undo_log, ..options() };
        let mut store = null_mut();
        // SAFETY: valid path, options and out-parameter.
        let (rc, msg) = call(|e| unsafe { shale_table_open(path.as_ptr(), &o, &mut store, e) });
        (rc, msg, store)
    };
    let default = tempfile::tempdir().unwrap();
    let (rc, msg, store) = open(default.path(), shale_table_options_default().undo_log);
    assert_eq!(rc, 0, "{msg}");
    // SAFETY: a live handle, closed once.
    unsafe { shale_table_close(store) };
    let dax = shale_table::dax_at(default.path());
    assert_eq!(default.path().join("undo.pmem").exists(), dax, "a file without DAX");
    let pmem = tempfile::tempdir().unwrap();
    let (rc, msg, store) = open(pmem.path(), 2);
    assert_eq!(rc, 0, "{msg}");
    // SAFETY: as above.
    unsafe { shale_table_close(store) };
    assert!(pmem.path().join("undo.pmem").exists(), "asked for, no file made");
    let bad = tempfile::tempdir().unwrap();
    let (rc, msg, _) = open(bad.path(), 7);
    assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT), "{msg}");
    assert!(msg.contains("undo_log 7"), "{msg}");
}
