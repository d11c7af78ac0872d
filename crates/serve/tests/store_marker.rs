//! How serve knows its own stores (marker.rs): a new or empty store is marked at start; a
//! store of other data (keys outside serve's namespaces, values not in its format, a marker
//! of a later version) is refused at start, untouched, naming what was found; an unmarked
//! store whose keys and values are all serve's (an older serve's) is adopted and marked.

mod common;

use common::test_config;
use shale_lsm::{Db, Options};
use shale_serve::marker::{self, MARKER_KEY};
use shale_serve::value::Value;
use shale_serve::{Error, Server};

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path(), Options::small_for_tests()).unwrap()
}

/// Starts a server on the store in `dir` and shuts it down; the start's error if refused.
fn serve_once(dir: &tempfile::TempDir) -> Result<(), Error> {
    let server = Server::start(open(dir), test_config())?;
    server.shutdown().unwrap();
    Ok(())
}

/// Every live entry of the store, for comparing before and after.
fn contents(dir: &tempfile::TempDir) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = open(dir);
    let mut it = db.iter(&Default::default());
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    drop(it);
    db.close().unwrap();
    out
}

fn db0(key: &[u8]) -> Vec<u8> {
    shale_serve::keyspace::engine_key(key)
}

#[test]
fn new_and_empty_stores_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    serve_once(&dir).unwrap();
    assert_eq!(contents(&dir), [(MARKER_KEY.to_vec(), marker::encode())]);
    // Marked: served again.
    serve_once(&dir).unwrap();

    // An existing store that is empty (made by another program, nothing in it) is adopted.
    let empty = tempfile::tempdir().unwrap();
    open(&empty).close().unwrap();
    serve_once(&empty).unwrap();
    assert_eq!(contents(&empty), [(MARKER_KEY.to_vec(), marker::encode())]);
}

#[test]
fn stores_of_other_data_are_refused_untouched() {
    // Keys outside serve's namespaces (a ycsb store's "user..." keys, say).
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(b"user1000", b"fields").unwrap();
    db.close().unwrap();
    let before = contents(&dir);
    let e = serve_once(&dir).unwrap_err();
    assert!(matches!(e, Error::NotServeStore(_)), "{e}");
    let text = e.to_string();
    assert!(text.contains("\"user1000\" is outside the namespaces serve writes"), "{text}");
    assert!(text.contains("left untouched"), "{text}");
    assert_eq!(contents(&dir), before, "nothing written, not even the marker");

    // Keys in database 0's namespace whose values are not serve's: `shale bench`'s keys
    // start with zero bytes.
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    for i in 0..3000u64 {
        let mut key = vec![0u8; 8];
        key.extend_from_slice(format!("{i:08}").as_bytes());
        // The first value decodes by chance; a later one does not.
        let value = if i == 0 { vec![0x01, b'x'] } else { vec![0x98; 100] };
        db.put(&key, &value).unwrap();
    }
    db.close().unwrap();
    let before = contents(&dir);
    let e = serve_once(&dir).unwrap_err();
    assert!(e.to_string().contains("is not serve's: corruption: stored value"), "{e}");
    assert_eq!(contents(&dir), before);

    // A server key serve never writes.
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(b"\xffsomething", b"x").unwrap();
    db.close().unwrap();
    let e = serve_once(&dir).unwrap_err();
    assert!(e.to_string().contains("server key \"\\xffsomething\""), "{e}");
}

#[test]
fn a_marker_of_a_later_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(MARKER_KEY, b"SHSV\x02\x01").unwrap();
    db.put(&db0(b"k"), &Value::new(b"v".to_vec()).encode()).unwrap();
    db.close().unwrap();
    let before = contents(&dir);
    let e = serve_once(&dir).unwrap_err();
    assert!(e.to_string().contains("a newer shale serve made it"), "{e}");
    assert_eq!(contents(&dir), before);
}

#[test]
fn an_older_serve_s_unmarked_store_is_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    for i in 0..5000u32 {
        let v = if i % 2 == 0 {
            Value::new(i.to_string().into_bytes())
        } else {
            Value { expires_at_ms: Some(u64::MAX), data: b"later".to_vec() }
        };
        db.put(&db0(format!("key:{i}").as_bytes()), &v.encode()).unwrap();
    }
    db.close().unwrap();
    serve_once(&dir).unwrap();
    let after = contents(&dir);
    assert_eq!(after.len(), 5001, "every key kept, the marker added");
    assert!(after.contains(&(MARKER_KEY.to_vec(), marker::encode())));
}
