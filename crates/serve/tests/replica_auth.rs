//! A shale replica of a master with a password (`requirepass`): its link authenticates with
//! `masterauth` (and `masteruser`), of a shale master and of a real Redis 7 master (Debian's
//! redis-server, which test.sh installs; that test fails without it). A wrong password, or
//! none, leaves the link down with the reason in INFO and in the log, retried every second
//! until `CONFIG SET masterauth` gives the right one.

#[path = "common/logs.rs"]
mod logs;

use common::redis_server::RedisServer;
use common::{TestServer, info_of, test_config, until};
use redis::Commands;

mod common;

const PASSWORD: &str = "s3cret pass";

fn master_with_password() -> (TestServer, redis::Connection) {
    let master = TestServer::start_with(shale_serve::Config {
        password: Some(PASSWORD.into()),
        ..test_config()
    });
    let mut m = master.client_url("").get_connection().unwrap();
    let _: () = redis::cmd("AUTH").arg(PASSWORD).query(&mut m).unwrap();
    (master, m)
}

fn link_status(r: &mut redis::Connection) -> Option<String> {
    info_of(r, "replication", "master_link_status")
}

#[test]
fn a_replica_authenticates_to_a_shale_master() {
    let (master, mut m) = master_with_password();
    let _: () = m.set("before", "1").unwrap();
    let replica = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), master.addr.port())),
        masterauth: Some(PASSWORD.into()),
        masteruser: Some("default".into()),
        ..test_config()
    });
    let mut r = replica.client();
    until("the link is up", || link_status(&mut r).as_deref() == Some("up"));
    let v: String = r.get("before").unwrap();
    assert_eq!(v, "1");
    let _: () = m.set("after", "2").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let v: String = r.get("after").unwrap();
    assert_eq!(v, "2");
    assert_eq!(info_of(&mut r, "replication", "shale_master_link_error"), None);
    // The flags' credentials, as CONFIG GET tells them.
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("master*").query(&mut r).unwrap();
    assert_eq!(cfg, ["masterauth", PASSWORD, "masteruser", "default"]);
}

/// Takes a Redis master's password off when dropped, so that the helper's `SHUTDOWN`, which
/// gives none, stops it.
struct PasswordOff<'a>(&'a RedisServer);

impl Drop for PasswordOff<'_> {
    fn drop(&mut self) {
        self.0.cli(&["--no-auth-warning", "-a", PASSWORD, "config", "set", "requirepass", ""]);
    }
}

#[test]
fn a_replica_authenticates_to_a_redis_master() {
    let port = common::free_port();
    let master = RedisServer::start(port, &["--repl-diskless-sync-delay", "0"], |_| {});
    // Set once it answers the helper's PING; taken off again before the helper's SHUTDOWN
    // (dropped after this guard), even when the test fails.
    assert_eq!(master.cli(&["config", "set", "requirepass", PASSWORD]), "OK");
    let _unset = PasswordOff(&master);
    let cli = |args: &[&str]| {
        let mut all = vec!["--no-auth-warning", "-a", PASSWORD];
        all.extend_from_slice(args);
        master.cli(&all)
    };
    assert_eq!(cli(&["set", "s", "v"]), "OK");
    let replica = TestServer::start();
    let mut r = replica.client();
    // Given at run time, before REPLICAOF, as an operator (or a script) would.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("masterauth").arg(PASSWORD).query(&mut r).unwrap();
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port).query(&mut r).unwrap();
    until("the link is up", || link_status(&mut r).as_deref() == Some("up"));
    let v: String = r.get("s").unwrap();
    assert_eq!(v, "v");
    assert_eq!(cli(&["incr", "n"]), "1");
    until("the stream arrives", || r.get::<_, Option<String>>("n").unwrap().is_some());
    assert_eq!(cli(&["wait", "1", "5000"]), "1", "{}", master.log());
}

#[test]
fn a_wrong_password_is_reported_and_retried_until_config_set_fixes_it() {
    logs::capture();
    let (master, mut m) = master_with_password();
    let _: () = m.set("k", "v").unwrap();
    let addr = format!("127.0.0.1:{}", master.addr.port());

    // No password at all: the master's -NOAUTH, told as such.
    let replica = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), master.addr.port())),
        ..test_config()
    });
    let mut r = replica.client();
    until("the missing password is reported", || {
        info_of(&mut r, "replication", "shale_master_link_error")
            .is_some_and(|e| e.contains("requires a password") && e.contains("NOAUTH"))
    });
    assert_eq!(link_status(&mut r).as_deref(), Some("down"));

    // A wrong one: the master's WRONGPASS, in INFO and in the log, the link down and retried.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("masterauth").arg("wrong").query(&mut r).unwrap();
    until("the wrong password is reported", || {
        info_of(&mut r, "replication", "shale_master_link_error")
            .is_some_and(|e| e.contains("WRONGPASS"))
    });
    assert_eq!(link_status(&mut r).as_deref(), Some("down"));
    assert_eq!(
        info_of(&mut r, "replication", "master_link_down_since_seconds").as_deref(),
        Some("-1")
    );
    until("the log says why", || {
        logs::lines_with(&format!("replica of {addr}"))
            .iter()
            .any(|l| l.contains("authentication") && l.contains("WRONGPASS"))
    });
    let v: Option<String> = r.get("k").unwrap();
    assert_eq!(v, None, "nothing synced without the password");
    assert_eq!(info_of(&mut m, "replication", "connected_slaves").as_deref(), Some("0"));

    // The right one: the next attempt authenticates.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("masterauth").arg(PASSWORD).query(&mut r).unwrap();
    until("the link is up", || link_status(&mut r).as_deref() == Some("up"));
    let v: String = r.get("k").unwrap();
    assert_eq!(v, "v");
    assert_eq!(info_of(&mut r, "replication", "shale_master_link_error"), None);
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("masterauth").query(&mut r).unwrap();
    assert_eq!(cfg, ["masterauth", PASSWORD]);

    // CONFIG SET of anything else is refused by name, and sets nothing.
    let e = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg("x")
        .arg("maxclients")
        .arg("1")
        .query::<()>(&mut r)
        .unwrap_err();
    assert!(e.to_string().contains("CONFIG SET maxclients is not supported"), "{e}");
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("masterauth").query(&mut r).unwrap();
    assert_eq!(cfg, ["masterauth", PASSWORD]);
}
