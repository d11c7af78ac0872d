//! One handle per store: a second open of the same path is refused while the first is open,
//! and allowed once it is closed (or dropped). A killed process's lock goes with it (the kill
//! test reopens after every SIGKILL).

use shale_lsm::{Db, Error, Options};

#[test]
fn a_second_open_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    match Db::open(dir.path(), Options::small_for_tests()) {
        Err(Error::InUse(why)) => assert!(why.contains("open by another handle"), "{why}"),
        Err(e) => panic!("expected InUse, got {e}"),
        Ok(_) => panic!("a second handle opened a store that is open"),
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(db);
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}
