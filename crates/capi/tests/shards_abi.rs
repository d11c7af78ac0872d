//! The set calls (`shale_kvs_shards_*`) as C calls them: a set reopened in its order keeps
//! every pair, a set reopened in another order or with no paths is refused, NULL handles.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::null_mut;

use shale::*;

fn open(paths: &[CString]) -> (c_int, *mut shale_kvs_shards, String) {
    let ptrs: Vec<*const c_char> = paths.iter().map(|p| p.as_ptr()).collect();
    let opts = shale_kvs_options { segment_bytes: 4 << 20, ..shale_kvs_options_default() };
    let (mut set, mut err) = (null_mut(), null_mut());
    // SAFETY: valid paths, options and out-parameters.
    let rc = unsafe { shale_kvs_shards_open(ptrs.as_ptr(), ptrs.len(), &opts, &mut set, &mut err) };
    // SAFETY: `err` is NULL or a live error, freed once.
    let message = unsafe {
        let m = CStr::from_ptr(shale_error_message(err)).to_string_lossy().into_owned();
        shale_error_free(err);
        m
    };
    (rc, set, message)
}

#[test]
fn a_set_keeps_its_pairs_in_its_order_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<CString> = ["a", "b", "c"]
        .iter()
        .map(|n| CString::new(dir.path().join(n).to_str().unwrap()).unwrap())
        .collect();
    let (rc, set, m) = open(&paths);
    assert_eq!(rc, 0, "{m}");
    // SAFETY: a live set handle.
    assert_eq!(unsafe { shale_kvs_shards_count(set) }, 3);
    for i in 0..300u32 {
        let (k, v) = (format!("key-{i:04}"), format!("value-{i}"));
        // SAFETY: a live set; slices valid for their lengths.
        let rc = unsafe {
            shale_kvs_shards_store_tuple(
                set,
                k.as_ptr(),
                k.len(),
                v.as_ptr(),
                v.len(),
                0,
                null_mut(),
            )
        };
        assert_eq!(rc, 0);
    }
    // SAFETY: the handle, closed once.
    unsafe { shale_kvs_shards_close(set) };

    let swapped = vec![paths[1].clone(), paths[0].clone(), paths[2].clone()];
    let (rc, set, m) = open(&swapped);
    assert_ne!(rc, 0, "a set in another order must be refused");
    assert!(set.is_null());
    assert!(!m.is_empty());

    let (rc, set, m) = open(&paths);
    assert_eq!(rc, 0, "{m}");
    let mut buf = [0u8; 32];
    for i in 0..300u32 {
        let k = format!("key-{i:04}");
        let mut len = 0usize;
        // SAFETY: a live set; the buffer is writable for its length.
        let rc = unsafe {
            shale_kvs_shards_retrieve_tuple(
                set,
                k.as_ptr(),
                k.len(),
                0,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                null_mut(),
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(&buf[..len], format!("value-{i}").as_bytes());
    }
    // SAFETY: the handle, closed once.
    unsafe { shale_kvs_shards_close(set) };

    let (rc, _, _) = open(&[]);
    assert_eq!(rc, shale_status::SHALE_INVALID_ARGUMENT as c_int);
    // SAFETY: NULL is accepted.
    unsafe { shale_kvs_shards_close(null_mut()) };
}
