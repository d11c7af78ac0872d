//! `shale serve`'s flags: bad values refused by name before the store is touched, a `--db`
//! holding something else refused untouched, an address in use named (and no store made for
//! a server that cannot listen), `--port 0` (TCP off) without a Unix socket refused, the
//! password given two ways refused.

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
    let (ok, _, err) = shale(&["serve", "--db", db, "--maxclients", "0"]);
    assert!(!ok);
    assert!(err.contains("--maxclients 0 is not in 1..="), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--threads", "1000"]);
    assert!(!ok);
    assert!(err.contains("--threads 1000"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--port", "0"]);
    assert!(!ok);
    assert!(err.contains("nothing to listen on: --port 0 turns TCP off"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--protected-mode", "maybe"]);
    assert!(!ok);
    assert!(err.contains("\"maybe\" is not yes or no"), "{err}");
    assert!(!std::path::Path::new(db).exists(), "nothing made for refused flags");

    // A directory of other files is no store: refused, untouched. (Listening on a Unix
    // socket elsewhere: the listeners are bound before --db is looked at.)
    let sockets = tempfile::tempdir().unwrap();
    let sock = sockets.path().join("s.sock");
    let sock = sock.to_str().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let (ok, _, err) = shale(&[
        "serve",
        "--db",
        dir.path().to_str().unwrap(),
        "--port",
        "0",
        "--unixsocket",
        sock,
    ]);
    assert!(!ok);
    assert!(err.contains("no shale store"), "{err}");
    assert_eq!(std::fs::read(dir.path().join("notes.txt")).unwrap(), b"mine");

    // A file that is not a store is refused untouched, even an empty one.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let (ok, _, err) =
        shale(&["serve", "--db", empty.to_str().unwrap(), "--port", "0", "--unixsocket", sock]);
    assert!(!ok, "{err}");
    assert!(!std::path::Path::new(sock).exists(), "the socket file of a refused start is removed");
    assert_eq!(std::fs::read(&empty).unwrap(), b"");

    // An address in use is named, and no store is made for a server that cannot listen.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (ok, _, err) = shale(&["serve", "--db", db, "--port", &port]);
    assert!(!ok);
    assert!(err.contains(&format!("binding 127.0.0.1:{port}")), "{err}");
    assert!(
        !std::path::Path::new(db).exists(),
        "a store was made for a server that never listened"
    );
    // So with a Unix socket path that holds another file.
    let not_socket = dir.path().join("not-a-socket");
    std::fs::write(&not_socket, b"x").unwrap();
    let (ok, _, err) =
        shale(&["serve", "--db", db, "--port", "0", "--unixsocket", not_socket.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("not a socket"), "{err}");
    assert!(!std::path::Path::new(db).exists());
}

#[test]
fn the_password_is_given_one_way() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db = db.to_str().unwrap();
    let file = dir.path().join("pass");
    std::fs::write(&file, b"pw\n").unwrap();
    let file = file.to_str().unwrap();
    let (ok, _, err) =
        shale(&["serve", "--db", db, "--requirepass", "a", "--requirepass_file", file]);
    assert!(!ok);
    assert!(err.contains("the password is given more than one way"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db", db, "--requirepass", "a"])
        .env("SHALE_REQUIREPASS", "b")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("more than one way"));
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"\n").unwrap();
    let (ok, _, err) = shale(&["serve", "--db", db, "--requirepass_file", empty.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("--requirepass_file") && err.contains("first line is empty"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--requirepass_file", "/nonexistent/pw"]);
    assert!(!ok);
    assert!(err.contains("--requirepass_file /nonexistent/pw"), "{err}");
    assert!(!std::path::Path::new(db).exists());
}
