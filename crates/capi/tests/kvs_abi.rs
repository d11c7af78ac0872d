//! The kvs functions called as C calls them, from Rust: NULL arguments, every status code
//! they return, the buffer-too-small path, Busy at a queue depth of 1, and completions of
//! every kind reaped after poll(2) on the completion fd.

use std::ffi::{CStr, CString, c_int};
use std::path::Path;
use std::ptr::{null, null_mut};

use shale::*;

fn status(s: shale_status) -> c_int {
    s as c_int
}

fn c_path(p: &Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

fn options(queue_depth: usize) -> shale_kvs_options {
    let d = shale_kvs_options_default();
    assert_eq!(d.index_mode, shale_kvs_index_mode::SHALE_KVS_INDEX_IN_MEMORY as c_int);
    assert_eq!((d.index_cache_bytes, d.value_cache_bytes), (16 << 20, 32 << 20));
    shale_kvs_options { queue_depth, segment_bytes: 4 << 20, ..shale_kvs_options_default() }
}

/// Opens a store; returns the handle (close it with `shale_kvs_close`).
fn open(dir: &Path, queue_depth: usize) -> *mut shale_kvs_store {
    let mut store = null_mut();
    let mut err = null_mut();
    let path = c_path(dir);
    // SAFETY: valid path, options and out-parameters.
    let rc = unsafe { shale_kvs_open(path.as_ptr(), &options(queue_depth), &mut store, &mut err) };
    assert_eq!(rc, 0, "{}", message(err));
    store
}

/// The message of `err` (freed), or "" for NULL.
fn message(err: *mut shale_error) -> String {
    // SAFETY: `err` is NULL or an error the library returned, freed here once.
    unsafe {
        let m = CStr::from_ptr(shale_error_message(err)).to_string_lossy().into_owned();
        shale_error_free(err);
        m
    }
}

/// Runs a call with an error out-parameter; returns its status and message.
fn call(f: impl FnOnce(*mut *mut shale_error) -> c_int) -> (c_int, String) {
    let mut err = null_mut();
    let rc = f(&mut err);
    assert_eq!(rc == 0, err.is_null(), "an error object exactly when a call fails");
    if !err.is_null() {
        // SAFETY: a live error.
        assert_eq!(unsafe { shale_error_status(err) }, rc);
    }
    (rc, message(err))
}

fn store_tuple(s: *mut shale_kvs_store, key: &[u8], value: &[u8], mode: c_int) -> c_int {
    // SAFETY: a live store; slices are valid for their lengths.
    let (rc, _) = call(|err| unsafe {
        shale_kvs_store_tuple(s, key.as_ptr(), key.len(), value.as_ptr(), value.len(), mode, err)
    });
    rc
}

/// Retrieves into a buffer of `buf_len`; returns the status, the length out and the bytes.
fn retrieve(
    s: *mut shale_kvs_store,
    key: &[u8],
    offset: usize,
    buf_len: usize,
) -> (c_int, usize, Vec<u8>) {
    let mut buf = vec![0u8; buf_len];
    let mut len = usize::MAX;
    // SAFETY: a live store; the buffer and key are valid for their lengths.
    let (rc, _) = call(|err| unsafe {
        shale_kvs_retrieve_tuple(
            s,
            key.as_ptr(),
            key.len(),
            offset,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
            err,
        )
    });
    let copied = if rc == 0 { buf[..len].to_vec() } else { Vec::new() };
    (rc, len, copied)
}

#[test]
fn null_arguments_are_invalid_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let invalid = status(shale_status::SHALE_INVALID_ARGUMENT);
    let path = c_path(dir.path());
    let mut store = null_mut();
    // SAFETY: every pointer is NULL or valid; NULL is what is tested.
    unsafe {
        assert_eq!(call(|e| shale_kvs_open(null(), null(), &mut store, e)).0, invalid);
        assert_eq!(call(|e| shale_kvs_open(path.as_ptr(), null(), null_mut(), e)).0, invalid);
        assert_eq!(call(|e| shale_kvs_open(c"".as_ptr(), null(), &mut store, e)).0, invalid);
        assert!(store.is_null());
        // No err out-parameter: the status alone.
        assert_eq!(
            shale_kvs_store_tuple(null(), b"key1".as_ptr(), 4, null(), 0, 0, null_mut()),
            invalid
        );
    }
    let s = open(dir.path(), 8);
    // SAFETY: a live store; the NULL pointers are what is tested.
    unsafe {
        let (rc, msg) = call(|e| shale_kvs_store_tuple(s, null(), 4, b"v".as_ptr(), 1, 0, e));
        assert_eq!((rc, msg.as_str()), (invalid, "invalid argument: key is NULL"));
        assert_eq!(
            call(|e| shale_kvs_store_tuple(s, b"key1".as_ptr(), 4, null(), 1, 0, e)).0,
            invalid
        );
        // A NULL value of length 0 is an empty value.
        assert_eq!(call(|e| shale_kvs_store_tuple(s, b"key1".as_ptr(), 4, null(), 0, 0, e)).0, 0);
        let mut len = 0;
        let rc = call(|e| {
            shale_kvs_retrieve_tuple(s, b"key1".as_ptr(), 4, 0, null_mut(), 0, &mut len, e)
        })
        .0;
        assert_eq!((rc, len), (0, 0));
        assert_eq!(
            call(|e| shale_kvs_retrieve_tuple(
                s,
                b"key1".as_ptr(),
                4,
                0,
                null_mut(),
                9,
                &mut len,
                e
            ))
            .0,
            invalid
        );
        assert_eq!(
            call(|e| shale_kvs_delete_tuple(null(), b"key1".as_ptr(), 4, null_mut(), e)).0,
            invalid
        );
        let mut bits = [0u8; 1];
        let lens = [4usize];
        assert_eq!(
            call(|e| shale_kvs_exist_tuples(s, null(), lens.as_ptr(), 1, bits.as_mut_ptr(), 1, e))
                .0,
            invalid
        );
        let keys = [b"key1".as_ptr()];
        assert_eq!(
            call(|e| shale_kvs_exist_tuples(s, keys.as_ptr(), null(), 1, bits.as_mut_ptr(), 1, e))
                .0,
            invalid
        );
        assert_eq!(
            call(|e| shale_kvs_submit_store(null(), b"key1".as_ptr(), 4, null(), 0, 0, 1, e)).0,
            invalid
        );
        assert_eq!(call(|e| shale_kvs_submit_retrieve(s, null(), 4, 1, e)).0, invalid);
        assert_eq!(call(|e| shale_kvs_submit_delete(null(), b"key1".as_ptr(), 4, 1, e)).0, invalid);
        assert_eq!(call(|e| shale_kvs_submit_exist(s, null(), null(), 2, 1, e)).0, invalid);
        let mut events: [std::mem::MaybeUninit<shale_kvs_event>; 4] =
            [const { std::mem::MaybeUninit::uninit() }; 4];
        assert_eq!(shale_kvs_get_ioevents(null(), events.as_mut_ptr().cast(), 4), 0);
        assert_eq!(shale_kvs_get_ioevents(s, null_mut(), 4), 0);
        assert_eq!(shale_kvs_completion_fd(null()), -1);
        assert!(shale_kvs_completion_fd(s) >= 0);
        assert_eq!(CStr::from_ptr(shale_error_message(null())), c"");
        assert_eq!(shale_error_status(null()), 0);
        shale_error_free(null_mut());
        shale_free(null_mut());
        shale_kvs_free_value(null_mut());
        shale_kvs_close(null_mut());
        shale_kvs_close(s);
    }
}

#[test]
fn every_status_of_the_sync_calls() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 8);
    let ok = 0;
    use shale_status::*;
    assert_eq!(store_tuple(s, b"user:1", b"ada lovelace", 0), ok);
    assert_eq!(store_tuple(s, b"usr", b"v", 0), status(SHALE_KEY_LENGTH));
    assert_eq!(store_tuple(s, &[b'k'; 256], b"v", 0), status(SHALE_KEY_LENGTH));
    assert_eq!(
        store_tuple(s, b"big:", &vec![0u8; (2 << 20) + 1], 0),
        status(SHALE_VALUE_TOO_LARGE)
    );
    assert_eq!(store_tuple(s, b"user:1", b"bob", 1), status(SHALE_KEY_EXISTS));
    assert_eq!(store_tuple(s, b"user:2", b"bob", 2), status(SHALE_KEY_NOT_FOUND));
    assert_eq!(store_tuple(s, b"user:1", b"ada", 2), ok);
    assert_eq!(store_tuple(s, b"user:1", b"ada lovelace", 0), ok);
    assert_eq!(store_tuple(s, b"user:1", b"x", 3), status(SHALE_INVALID_ARGUMENT));

    assert_eq!(retrieve(s, b"user:1", 0, 64), (ok, 12, b"ada lovelace".to_vec()));
    assert_eq!(retrieve(s, b"user:1", 4, 8), (ok, 8, b"lovelace".to_vec()));
    assert_eq!(retrieve(s, b"user:1", 12, 0), (ok, 0, Vec::new()));
    // Too small: the size needed comes back, nothing is copied.
    assert_eq!(retrieve(s, b"user:1", 0, 11), (status(SHALE_BUFFER_TOO_SMALL), 12, Vec::new()));
    assert_eq!(retrieve(s, b"user:1", 4, 0).1, 8);
    assert_eq!(retrieve(s, b"user:1", 13, 64).0, status(SHALE_INVALID_ARGUMENT));
    assert_eq!(retrieve(s, b"user:9", 0, 64).0, status(SHALE_KEY_NOT_FOUND));
    assert_eq!(retrieve(s, b"u", 0, 64).0, status(SHALE_KEY_LENGTH));

    let keys: Vec<&[u8]> =
        (0..10).map(|i| if i % 3 == 0 { &b"user:1"[..] } else { &b"nope"[..] }).collect();
    let ptrs: Vec<*const u8> = keys.iter().map(|k| k.as_ptr()).collect();
    let lens: Vec<usize> = keys.iter().map(|k| k.len()).collect();
    let mut bits = [0u8; 2];
    // SAFETY: arrays of 10 keys, a bitmap of the length given.
    unsafe {
        let (rc, msg) = call(|e| {
            shale_kvs_exist_tuples(s, ptrs.as_ptr(), lens.as_ptr(), 10, bits.as_mut_ptr(), 1, e)
        });
        assert_eq!(rc, status(SHALE_BUFFER_TOO_SMALL), "{msg}");
        assert_eq!(
            call(|e| shale_kvs_exist_tuples(
                s,
                ptrs.as_ptr(),
                lens.as_ptr(),
                10,
                bits.as_mut_ptr(),
                2,
                e
            ))
            .0,
            ok
        );
        assert_eq!(bits, [0b0100_1001, 0b10]);
        assert_eq!(call(|e| shale_kvs_exist_tuples(s, null(), null(), 0, null_mut(), 0, e)).0, ok);
        let mut existed = false;
        assert_eq!(
            call(|e| shale_kvs_delete_tuple(s, b"user:1".as_ptr(), 6, &mut existed, e)).0,
            ok
        );
        assert!(existed);
        assert_eq!(
            call(|e| shale_kvs_delete_tuple(s, b"user:1".as_ptr(), 6, &mut existed, e)).0,
            ok
        );
        assert!(!existed);
        shale_kvs_close(s);
    }
}

#[test]
fn open_refuses_bad_options_and_what_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = c_path(&dir.path().join("missing"));
    let mut store = null_mut();
    use shale_status::*;
    // SAFETY: valid pointers throughout.
    unsafe {
        let o = shale_kvs_options { create_if_missing: false, ..options(8) };
        assert_eq!(
            call(|e| shale_kvs_open(path.as_ptr(), &o, &mut store, e)).0,
            status(SHALE_NOT_A_STORE)
        );
        let o = options(0);
        assert_eq!(
            call(|e| shale_kvs_open(path.as_ptr(), &o, &mut store, e)).0,
            status(SHALE_INVALID_ARGUMENT)
        );
        let o = shale_kvs_options { segment_bytes: 4097, ..options(8) };
        assert_eq!(
            call(|e| shale_kvs_open(path.as_ptr(), &o, &mut store, e)).0,
            status(SHALE_INVALID_ARGUMENT)
        );
        // An index mode that is none of the two, and a bounded cache under four pages.
        let o = shale_kvs_options { index_mode: 2, ..options(8) };
        let (rc, msg) = call(|e| shale_kvs_open(path.as_ptr(), &o, &mut store, e));
        assert_eq!(rc, status(SHALE_INVALID_ARGUMENT));
        assert!(msg.contains("index_mode 2"), "{msg}");
        let o = shale_kvs_options {
            index_mode: shale_kvs_index_mode::SHALE_KVS_INDEX_BOUNDED as c_int,
            index_cache_bytes: 4096,
            ..options(8)
        };
        let (rc, msg) = call(|e| shale_kvs_open(path.as_ptr(), &o, &mut store, e));
        assert_eq!(rc, status(SHALE_INVALID_ARGUMENT));
        assert!(msg.contains("cache_bytes 4096"), "{msg}");
        assert!(store.is_null());

        // An lsm store is not a kvs store, and the other way round; both are left as they were.
        let lsm = c_path(&dir.path().join("lsm"));
        let o = shale_db_options { write_buffer_size: 256 << 10, ..shale_db_options_default() };
        let mut db = null_mut();
        assert_eq!(call(|e| shale_db_open(lsm.as_ptr(), &o, &mut db, e)).0, 0);
        assert_eq!(call(|e| shale_db_close(db, e)).0, 0);
        let (rc, msg) = call(|e| shale_kvs_open(lsm.as_ptr(), &options(8), &mut store, e));
        assert_eq!(rc, status(SHALE_NOT_A_STORE), "{msg}");
        let kvs_dir = dir.path().join("kvs");
        let s = open(&kvs_dir, 8);
        assert_eq!(store_tuple(s, b"kept", b"safe", 0), 0);
        shale_kvs_close(s);
        let kvs = c_path(&kvs_dir);
        let (rc, msg) = call(|e| shale_db_open(kvs.as_ptr(), &o, &mut db, e));
        // The lsm engine refuses the hash engine's volume as not its own, untouched: its
        // header says which engine's store it is.
        assert_eq!(rc, status(SHALE_NOT_A_STORE), "{msg}");
        assert!(msg.contains("this is a hash store"), "{msg}");
        let s = open(&kvs_dir, 8);
        assert_eq!(retrieve(s, b"kept", 0, 8), (0, 4, b"safe".to_vec()));
        shale_kvs_close(s);
    }
}

/// Waits for the completion fd, then reaps every completion waiting.
fn reap(s: *mut shale_kvs_store, events: &mut Vec<shale_kvs_event>) {
    // SAFETY: a live store; `events` has room for 64 more.
    unsafe {
        let mut pfd =
            libc::pollfd { fd: shale_kvs_completion_fd(s), events: libc::POLLIN, revents: 0 };
        assert_eq!(libc::poll(&mut pfd, 1, 5000), 1, "a completion within 5 s");
        events.reserve(64);
        let n = shale_kvs_get_ioevents(s, events.as_mut_ptr().add(events.len()), 64);
        events.set_len(events.len() + n);
    }
}

#[test]
fn completions_of_every_kind_come_through_the_fd() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 16);
    use shale_kvs_op::*;
    use shale_status::*;
    let keys = [b"item:1".as_ptr(), b"item:2".as_ptr()];
    let lens = [6usize, 6];
    // SAFETY: a live store; keys and values valid for their lengths.
    unsafe {
        assert_eq!(
            call(|e| shale_kvs_submit_store(
                s,
                b"item:1".as_ptr(),
                6,
                b"one".as_ptr(),
                3,
                0,
                10,
                e
            ))
            .0,
            0
        );
        let mut events = Vec::new();
        while events.is_empty() {
            reap(s, &mut events);
        }
        // Tags need not be unique: each completion still knows its operation.
        for (tag, rc) in [
            (
                11,
                shale_kvs_submit_store(
                    s,
                    b"item:1".as_ptr(),
                    6,
                    b"uno".as_ptr(),
                    3,
                    1,
                    7,
                    null_mut(),
                ),
            ),
            (12, shale_kvs_submit_retrieve(s, b"item:1".as_ptr(), 6, 7, null_mut())),
            (13, shale_kvs_submit_retrieve(s, b"item:2".as_ptr(), 6, 7, null_mut())),
            (14, shale_kvs_submit_exist(s, keys.as_ptr(), lens.as_ptr(), 2, 7, null_mut())),
        ] {
            assert_eq!(rc, 0, "submission {tag}");
        }
        while events.len() < 5 {
            reap(s, &mut events);
        }
        assert_eq!(call(|e| shale_kvs_submit_delete(s, b"item:1".as_ptr(), 6, 8, e)).0, 0);
        while events.len() < 6 {
            reap(s, &mut events);
        }
        assert_eq!(shale_kvs_get_ioevents(s, events.as_mut_ptr(), 0), 0);
        let mut pfd =
            libc::pollfd { fd: shale_kvs_completion_fd(s), events: libc::POLLIN, revents: 0 };
        assert_eq!(libc::poll(&mut pfd, 1, 0), 0, "nothing left to signal");

        assert_eq!((events[0].tag, events[0].status, events[0].op), (10, 0, SHALE_KVS_OP_STORE));
        let by_op = |op| events.iter().find(|e| e.op == op && e.tag == 7).unwrap();
        let refused = by_op(SHALE_KVS_OP_STORE);
        assert_eq!(refused.status, status(SHALE_KEY_EXISTS));
        assert!(!refused.error.is_null() && refused.value.is_null());
        let found: Vec<_> = events.iter().filter(|e| e.op == SHALE_KVS_OP_RETRIEVE).collect();
        assert_eq!(found.len(), 2);
        for ev in found {
            if ev.status == 0 {
                assert_eq!(std::slice::from_raw_parts(ev.value, ev.value_len), b"one");
            } else {
                assert_eq!(ev.status, status(SHALE_KEY_NOT_FOUND));
                assert!(ev.value.is_null() && !ev.error.is_null());
            }
        }
        let exist = by_op(SHALE_KVS_OP_EXIST);
        assert_eq!(std::slice::from_raw_parts(exist.value, exist.value_len), [0b01]);
        assert_eq!(
            (events[5].tag, events[5].op, events[5].existed),
            (8, SHALE_KVS_OP_DELETE, true)
        );
        for ev in &events {
            assert_eq!(ev.status == 0, ev.error.is_null());
            shale_kvs_free_value(ev.value);
            shale_error_free(ev.error);
        }
        shale_kvs_close(s);
    }
}

#[test]
fn a_full_queue_answers_busy_and_queues_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 1);
    let busy = status(shale_status::SHALE_BUSY);
    let mut accepted = 0u64;
    let mut refused = 0u64;
    let mut events = Vec::new();
    // Each store waits for a durable write: a second submission while it is outstanding
    // finds the queue of one full.
    for tag in 0..10_000u64 {
        let key = format!("key:{tag}");
        // SAFETY: a live store; the key is valid for its length.
        let (rc, msg) = call(|e| unsafe {
            shale_kvs_submit_store(s, key.as_ptr(), key.len(), b"v".as_ptr(), 1, 0, tag, e)
        });
        match rc {
            0 => accepted += 1,
            r if r == busy => {
                assert_eq!(msg, "busy: the submission queue is full");
                refused += 1;
                if refused >= 3 {
                    break;
                }
            }
            r => panic!("status {r}: {msg}"),
        }
    }
    assert!(refused >= 3, "no Busy in 10,000 submissions at queue depth 1");
    while (events.len() as u64) < accepted {
        reap(s, &mut events);
    }
    // Exactly one completion per accepted submission, none for a refused one.
    std::thread::sleep(std::time::Duration::from_millis(50));
    // SAFETY: a live store; room for 64 more events.
    let more = unsafe {
        events.reserve(64);
        shale_kvs_get_ioevents(s, events.as_mut_ptr().add(events.len()), 64)
    };
    assert_eq!(more, 0);
    assert!(events.iter().all(|e| e.status == 0));
    // SAFETY: a live store, closed once.
    unsafe { shale_kvs_close(s) };
}

#[test]
fn status_names_cover_every_code() {
    let names: Vec<String> = (0..=22)
        .map(|s| {
            // SAFETY: a static string.
            unsafe { CStr::from_ptr(shale_status_name(s)) }.to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(names[0], "SHALE_OK");
    assert_eq!(names[5], "SHALE_BUSY");
    assert_eq!(names[15], "SHALE_INTERNAL");
    assert!(names.iter().all(|n| n.starts_with("SHALE_") && n != "SHALE_?"));
    // SAFETY: a static string.
    assert_eq!(names[16], "SHALE_TOO_MANY_ITERATORS");
    assert_eq!(names[22], "SHALE_LOG_FULL");
    // SAFETY: a static string.
    assert_eq!(unsafe { CStr::from_ptr(shale_status_name(23)) }, c"SHALE_?");
    assert_eq!(status(shale_status::SHALE_INTERNAL), 15);
}

#[test]
fn iterators_return_each_matching_key_and_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 8);
    for i in 0..10u8 {
        assert_eq!(store_tuple(s, format!("user{i}").as_bytes(), &[i; 3], 0), 0);
        assert_eq!(store_tuple(s, format!("item{i}").as_bytes(), b"x", 0), 0);
    }
    let mut its = Vec::new();
    for n in 0..17 {
        let mut it = null_mut();
        // SAFETY: a live store, 4-byte prefix and mask, a valid out-parameter.
        let (rc, msg) = call(|e| unsafe {
            shale_kvs_open_iterator(s, b"user".as_ptr(), [0xFF; 4].as_ptr(), true, &mut it, e)
        });
        if n < 16 {
            assert_eq!(rc, 0, "{msg}");
            its.push(it);
        } else {
            assert_eq!(rc, status(shale_status::SHALE_TOO_MANY_ITERATORS), "{msg}");
        }
    }
    let it = its.pop().unwrap();
    for other in its {
        // SAFETY: live iterators, closed once.
        unsafe { shale_kvs_iterator_close(other) };
    }
    let mut seen = Vec::new();
    let mut entries: Vec<shale_kvs_entry> = Vec::with_capacity(3);
    loop {
        let mut n = 0;
        // SAFETY: a live iterator; room for 3 entries; a valid count.
        let (rc, msg) =
            call(|e| unsafe { shale_kvs_iterator_next(it, entries.as_mut_ptr(), 3, &mut n, e) });
        assert_eq!(rc, 0, "{msg}");
        if n == 0 {
            break;
        }
        // SAFETY: the call filled `n` entries.
        unsafe { entries.set_len(n) };
        for e in &entries {
            // SAFETY: the library's memory for the lengths it gave.
            let (k, v) = unsafe {
                (
                    std::slice::from_raw_parts(e.key, e.key_len),
                    std::slice::from_raw_parts(e.value, e.value_len),
                )
            };
            assert_eq!(v, &[k[4] - b'0'; 3]);
            seen.push(k.to_vec());
        }
        // SAFETY: `n` filled entries, freed once.
        unsafe {
            shale_kvs_free_entries(entries.as_mut_ptr(), n);
            entries.set_len(0);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..10).map(|i| format!("user{i}").into_bytes()).collect::<Vec<_>>());
    // SAFETY: NULL arguments are refused, and a NULL iterator is ignored by close.
    unsafe {
        let mut n = 0;
        let (rc, _) = call(|e| shale_kvs_iterator_next(null_mut(), null_mut(), 0, &mut n, e));
        assert_eq!(rc, status(shale_status::SHALE_INVALID_ARGUMENT));
        shale_kvs_iterator_close(null_mut());
        shale_kvs_iterator_close(it);
        shale_kvs_close(s);
    }
}
