//! `shale serve`'s replication flags on the real binary: `--replicaof HOST PORT` makes a
//! replica of another `shale serve` (writes on the master arrive, its own are refused,
//! both stop cleanly on SIGTERM; `--replica-priority` is what its INFO tells Sentinel), and
//! bad values of the replication flags are refused by name; a replica of a master with a
//! password gives it from `--masterauth_file`, and the master's password given two ways is
//! refused.

mod common;
#[path = "common/served.rs"]
mod served;

use std::net::TcpStream;
use std::time::Duration;

use common::shale;
use served::{Served, free_ports, request};

#[test]
fn replicaof_follows_a_master_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let [pm, pr] = free_ports();
    let master = Served::on_port(&dir.path().join("m"), pm, &[]);
    let mut m = TcpStream::connect(("127.0.0.1", pm)).unwrap();
    m.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut m, &["SET", "before", "1"]), "+OK\r\n");
    let pm_text = pm.to_string();
    let replica = Served::on_port(
        &dir.path().join("r"),
        pr,
        &["--replicaof", "127.0.0.1", &pm_text, "--replica-priority", "0"],
    );
    let mut r = TcpStream::connect(("127.0.0.1", pr)).unwrap();
    r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut up = false;
    for _ in 0..400 {
        if request(&mut r, &["INFO", "replication"]).contains("master_link_status:up") {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "the replica's link never came up");
    assert_eq!(request(&mut r, &["GET", "before"]), "$1\r\n1\r\n");
    assert_eq!(request(&mut m, &["SET", "after", "2"]), "+OK\r\n");
    assert_eq!(request(&mut m, &["WAIT", "1", "0"]), ":1\r\n");
    assert_eq!(request(&mut r, &["GET", "after"]), "$1\r\n2\r\n");
    assert!(request(&mut r, &["SET", "x", "1"]).starts_with("-READONLY"));
    // What Sentinel reads of it: priority 0, never to be promoted; the master's default.
    assert!(request(&mut r, &["INFO", "replication"]).contains("slave_priority:0\r\n"));
    assert_eq!(
        request(&mut r, &["CONFIG", "GET", "replica-priority"]),
        "*2\r\n$16\r\nreplica-priority\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        request(&mut m, &["CONFIG", "GET", "replica-priority"]),
        "*2\r\n$16\r\nreplica-priority\r\n$3\r\n100\r\n"
    );
    drop((m, r));
    replica.stop();
    master.stop();
}

#[test]
fn the_masters_password_is_given_one_way() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db = db.to_str().unwrap();
    let file = dir.path().join("pass");
    std::fs::write(&file, b"pw\n").unwrap();
    let file = file.to_str().unwrap();
    let (ok, _, err) =
        shale(&["serve", "--db", db, "--masterauth", "a", "--masterauth_file", file]);
    assert!(!ok);
    assert!(err.contains("the master's password is given more than one way"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db", db, "--masterauth_file", file])
        .env("SHALE_MASTERAUTH", "b")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--masterauth_file, SHALE_MASTERAUTH"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--masterauth_file", "/nonexistent/pw"]);
    assert!(!ok);
    assert!(err.contains("--masterauth_file /nonexistent/pw"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--masteruser", "u"]);
    assert!(!ok);
    assert!(err.contains("--masteruser without --masterauth"), "{err}");
    assert!(!std::path::Path::new(db).exists());
}

#[test]
fn bad_replication_flags_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db = db.to_str().unwrap();
    let (ok, _, err) = shale(&["serve", "--db", db, "--replicaof", "127.0.0.1", "0"]);
    assert!(!ok);
    assert!(err.contains("--replicaof 127.0.0.1 0: the port is not in 1..=65535"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--repl-backlog-size", "100"]);
    assert!(!ok);
    assert!(err.contains("--repl-backlog-size 100 is not in 16384..="), "{err}");
    assert!(!std::path::Path::new(db).exists(), "nothing made for refused flags");
}

#[test]
fn masterauth_file_lets_a_replica_follow_a_master_with_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass");
    std::fs::write(&pass, b"s3cret\n").unwrap();
    std::fs::set_permissions(&pass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let pass = pass.to_str().unwrap();
    let [pm, pr] = free_ports();
    let master = Served::on_port(&dir.path().join("m"), pm, &["--requirepass_file", pass]);
    let mut m = TcpStream::connect(("127.0.0.1", pm)).unwrap();
    m.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut m, &["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(request(&mut m, &["SET", "k", "v"]), "+OK\r\n");
    let pm_text = pm.to_string();
    let replica = Served::on_port(
        &dir.path().join("r"),
        pr,
        &["--replicaof", "127.0.0.1", &pm_text, "--masterauth_file", pass],
    );
    let mut r = TcpStream::connect(("127.0.0.1", pr)).unwrap();
    r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut up = false;
    for _ in 0..400 {
        if request(&mut r, &["INFO", "replication"]).contains("master_link_status:up") {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "the replica's link never came up: {}", request(&mut r, &["INFO", "replication"]));
    assert_eq!(request(&mut r, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(
        request(&mut r, &["CONFIG", "GET", "masterauth"]),
        "*2\r\n$10\r\nmasterauth\r\n$6\r\ns3cret\r\n"
    );
    drop((m, r));
    replica.stop();
    master.stop();
}
