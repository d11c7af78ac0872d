//! `shale serve`'s flags: bad values refused by name before the store is touched, a `--db`
//! holding something else refused untouched, an address in use named.

mod common;

use common::shale;

#[test]
fn bad_flags_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db = db.to_str().unwrap();
    let (ok, _, err) = shale(&["serve", "--db", db, "--appendfsync", "sometimes"]);
    assert!(!ok);
    assert!(err.contains("appendfsync \"sometimes\" is not always, everysec or no"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--port", "0", "--maxclients", "0"]);
    assert!(!ok);
    assert!(err.contains("max_clients 0 is not in 1..="), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--port", "0", "--threads", "1000"]);
    assert!(!ok);
    assert!(err.contains("threads 1000"), "{err}");
    assert!(!std::path::Path::new(db).exists(), "nothing made for refused flags");

    // A directory of other files is no store: refused, untouched.
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let (ok, _, err) = shale(&["serve", "--db", dir.path().to_str().unwrap(), "--port", "0"]);
    assert!(!ok);
    assert!(err.contains("no shale store"), "{err}");
    assert_eq!(std::fs::read(dir.path().join("notes.txt")).unwrap(), b"mine");

    // A file that is not a store is refused untouched, even an empty one.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let (ok, _, err) = shale(&["serve", "--db", empty.to_str().unwrap(), "--port", "0"]);
    assert!(!ok, "{err}");
    assert_eq!(std::fs::read(&empty).unwrap(), b"");

    // An address in use is named.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (ok, _, err) = shale(&["serve", "--db", db, "--port", &port]);
    assert!(!ok);
    assert!(err.contains(&format!("binding 127.0.0.1:{port}")), "{err}");
}
