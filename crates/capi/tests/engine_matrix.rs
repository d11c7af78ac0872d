//! Issue #41's matrix for the C ABI: every call that opens a store (`shale_db_open`,
//! `shale_kvs_open`, `shale_kvs_shards_open`, `shale_table_open`) given a store of each
//! other engine, or a foreign file, is refused untouched (`SHALE_NOT_A_STORE`, or
//! `SHALE_INVALID_ARGUMENT` where the engine's store is a directory and a file was given),
//! and every store opens afterwards, through its own engine, with what it held.

use std::ffi::{CStr, CString, c_int};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use shale::*;

fn call(f: impl FnOnce(*mut *mut shale_error) -> c_int) -> (c_int, String) {
    let mut err = null_mut();
    let rc = f(&mut err);
    let msg = if err.is_null() {
        String::new()
    } else {
        // SAFETY: an error the library returned, freed here once.
        unsafe {
            let m = CStr::from_ptr(shale_error_message(err)).to_string_lossy().into_owned();
            shale_error_free(err);
            m
        }
    };
    (rc, msg)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Lsm,
    Hash,
    Table,
}

/// Makes a store of `kind` at `dir` through the Rust API, holding one row or key.
fn make(kind: Kind, dir: &Path) {
    match kind {
        Kind::Lsm => {
            let db = shale_lsm::Db::open(dir, shale_lsm::Options::small_for_tests()).unwrap();
            db.put(b"kept", b"lsm").unwrap();
            db.close().unwrap();
        }
        Kind::Hash => {
            let s = shale_hash::HashStore::open(dir, shale_hash::HashOptions::default()).unwrap();
            s.store(b"kept", b"hash", shale_hash::StoreMode::Overwrite).unwrap();
            s.close();
        }
        Kind::Table => {
            let s =
                shale_table::TableStore::open(dir, shale_table::TableOptions::default()).unwrap();
            let schema = shale_table::Schema::new(vec![
                shale_table::Column::var("k", 16),
                shale_table::Column::var("v", 16),
            ])
            .unwrap();
            let t = s.create_table("t", schema).unwrap();
            s.insert(t, &[&b"kept"[..], b"table"]).unwrap();
        }
    }
}

/// Whether the store of `kind` at `dir` still holds what `make` put there.
fn holds(kind: Kind, dir: &Path) {
    match kind {
        Kind::Lsm => {
            let db = shale_lsm::Db::open(dir, shale_lsm::Options::small_for_tests()).unwrap();
            assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"lsm"[..]));
        }
        Kind::Hash => {
            let s = shale_hash::HashStore::open(dir, shale_hash::HashOptions::default()).unwrap();
            assert_eq!(s.retrieve(b"kept").unwrap(), Some(b"hash".to_vec()));
        }
        Kind::Table => {
            let s =
                shale_table::TableStore::open(dir, shale_table::TableOptions::default()).unwrap();
            let t = s.table_id("t").unwrap();
            assert_eq!(s.select_cell(t, b"kept", "v").unwrap(), Some(b"table".to_vec()));
        }
    }
}

/// Every file under `path` (or `path` itself) with its length and a checksum of its bytes.
fn snapshot(path: &Path) -> Vec<(PathBuf, u64, u32)> {
    if path.is_file() {
        use std::io::Read;
        let mut f = std::fs::File::open(path).unwrap();
        let (mut crc, mut len, mut buf) = (0u32, 0u64, vec![0u8; 1 << 20]);
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            len += n as u64;
        }
        return vec![(path.to_path_buf(), len, crc)];
    }
    let mut files: Vec<_> =
        std::fs::read_dir(path).unwrap().flat_map(|e| snapshot(&e.unwrap().path())).collect();
    files.sort();
    files
}

/// The C calls that open a store, each returning its status (closing what it opened).
fn open_through(call_name: &str, path: &Path) -> (c_int, String) {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: valid paths, default options (NULL) and out-parameters; a handle opened is
    // closed once.
    unsafe {
        match call_name {
            "shale_db_open" => {
                let mut db = null_mut();
                let r = call(|e| shale_db_open(c.as_ptr(), null(), &mut db, e));
                if r.0 == 0 {
                    call(|e| shale_db_close(db, e));
                }
                r
            }
            "shale_kvs_open" => {
                let mut s = null_mut();
                let r = call(|e| shale_kvs_open(c.as_ptr(), null(), &mut s, e));
                shale_kvs_close(s);
                r
            }
            "shale_kvs_shards_open" => {
                let mut s = null_mut();
                let paths = [c.as_ptr()];
                let r = call(|e| shale_kvs_shards_open(paths.as_ptr(), 1, null(), &mut s, e));
                shale_kvs_shards_close(s);
                r
            }
            "shale_table_open" => {
                let mut s = null_mut();
                let r = call(|e| shale_table_open(c.as_ptr(), null(), &mut s, e));
                shale_table_close(s);
                r
            }
            other => unreachable!("{other}"),
        }
    }
}

/// The engine each call opens.
const CALLS: [(&str, Kind); 4] = [
    ("shale_db_open", Kind::Lsm),
    ("shale_kvs_open", Kind::Hash),
    ("shale_kvs_shards_open", Kind::Hash),
    ("shale_table_open", Kind::Table),
];

const NOT_A_STORE: c_int = shale_status::SHALE_NOT_A_STORE as c_int;
const INVALID: c_int = shale_status::SHALE_INVALID_ARGUMENT as c_int;

#[test]
fn every_open_call_refuses_another_engines_store_and_a_foreign_file_untouched() {
    let root = tempfile::tempdir().unwrap();
    for kind in [Kind::Lsm, Kind::Hash, Kind::Table] {
        let dir = root.path().join(format!("{kind:?}"));
        make(kind, &dir);
        for (name, engine) in CALLS {
            if engine == kind {
                continue;
            }
            let before = snapshot(&dir);
            let (rc, msg) = open_through(name, &dir);
            assert_eq!(rc, NOT_A_STORE, "{name} on a {kind:?} store: {msg}");
            assert!(snapshot(&dir) == before, "{name} changed the {kind:?} store");
        }
        holds(kind, &dir);
    }
    // Foreign bytes: a file given as the path, and a directory whose volume file is not one.
    let junk: Vec<u8> =
        (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let file = root.path().join("foreign-file");
    std::fs::write(&file, &junk).unwrap();
    let foreign_dir = root.path().join("foreign-dir");
    std::fs::create_dir(&foreign_dir).unwrap();
    std::fs::write(shale_space::volume_file(&foreign_dir), &junk).unwrap();
    for (name, engine) in CALLS {
        for path in [&file, &foreign_dir] {
            let before = snapshot(path);
            let (rc, msg) = open_through(name, path);
            // The table engine's store is a directory: a file is the wrong kind of path.
            let want = if engine == Kind::Table && path == &file { INVALID } else { NOT_A_STORE };
            assert_eq!(rc, want, "{name} on {}: {msg}", path.display());
            assert!(snapshot(path) == before, "{name} changed {}", path.display());
        }
    }
}
