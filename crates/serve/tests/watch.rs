//! WATCH and EXEC (transaction.rs, watch.rs): EXEC runs nothing and answers a null array
//! when a watched key was written (by another client, by the watcher itself, by FLUSHDB) or
//! expired since WATCH; UNWATCH, DISCARD and EXEC forget the keys; and a transaction's
//! commands run with no other client's command on their keys between them (concurrent
//! transactions on two keys, in both orders, while others read both in transactions: every
//! read sees the two equal).

mod common;

use common::{TestServer, test_config, until};
use redis::{Commands, Connection, Value, cmd};

/// `MULTI`, the commands (each answered QUEUED), `EXEC`: its replies, or `None` for the null
/// array of a transaction aborted by WATCH.
fn transaction(c: &mut Connection, commands: &[&[&str]]) -> Option<Vec<Value>> {
    let _: () = cmd("MULTI").query(c).unwrap();
    for args in commands {
        let mut q = cmd(args[0]);
        for a in &args[1..] {
            q.arg(*a);
        }
        let queued: String = q.query(c).unwrap();
        assert_eq!(queued, "QUEUED");
    }
    cmd("EXEC").query(c).unwrap()
}

fn watch(c: &mut Connection, keys: &[&str]) {
    let _: () = cmd("WATCH").arg(keys).query(c).unwrap();
}

fn exec_aborts_when_a_watched_key_is_written_by_another_client(server: &TestServer) {
    let (mut a, mut b) = (server.client(), server.client());
    let _: () = a.set("k", "1").unwrap();
    watch(&mut a, &["k", "other"]);
    let _: () = b.set("k", "2").unwrap();
    assert_eq!(transaction(&mut a, &[&["SET", "k", "from-a"], &["SET", "j", "x"]]), None);
    let got: (String, Option<String>) = (a.get("k").unwrap(), a.get("j").unwrap());
    assert_eq!(got, ("2".into(), None), "nothing of the aborted transaction ran");
    // The keys are forgotten after EXEC: the next transaction runs.
    let _: () = b.set("k", "3").unwrap();
    let ran = transaction(&mut a, &[&["INCR", "k"]]).expect("runs: nothing watched now");
    assert_eq!(ran, [Value::Int(4)]);
}

#[test]
fn a_write_by_another_client_aborts_exec() {
    exec_aborts_when_a_watched_key_is_written_by_another_client(&TestServer::start());
}

#[test]
fn a_write_by_another_client_aborts_exec_under_the_group_commit() {
    let server = TestServer::start_with(shale_serve::Config {
        appendfsync: shale_serve::AppendFsync::Always,
        ..test_config()
    });
    exec_aborts_when_a_watched_key_is_written_by_another_client(&server);
}

#[test]
fn exec_runs_when_nothing_watched_changed() {
    let server = TestServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let _: () = a.set("k", "1").unwrap();
    watch(&mut a, &["k"]);
    // Other keys, reads, and keys watched by nobody else change nothing.
    let _: () = b.set("unrelated", "1").unwrap();
    let _: Option<String> = b.get("k").unwrap();
    let ran = transaction(&mut a, &[&["INCR", "k"], &["GET", "k"]]).expect("runs");
    assert_eq!(ran, [Value::Int(2), Value::BulkString(b"2".to_vec())]);
    // A key that does not exist may be watched too; creating it is a change.
    watch(&mut a, &["missing"]);
    let _: () = b.set("missing", "now").unwrap();
    assert_eq!(transaction(&mut a, &[&["GET", "missing"]]), None);
}

#[test]
fn the_watchers_own_write_flushdb_and_expiry_abort_exec() {
    let server = TestServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let _: () = a.set("k", "1").unwrap();
    watch(&mut a, &["k"]);
    let _: () = a.set("k", "mine").unwrap();
    assert_eq!(transaction(&mut a, &[&["GET", "k"]]), None, "its own write counts, as in Redis");

    watch(&mut a, &["k"]);
    let _: () = cmd("FLUSHDB").query(&mut b).unwrap();
    assert_eq!(transaction(&mut a, &[&["GET", "k"]]), None);

    // A key live at WATCH whose expiry passes before EXEC.
    let _: () = a.pset_ex("short", "v", 1000).unwrap();
    let _: () = a.pset_ex("witness", "v", 1000).unwrap();
    watch(&mut a, &["short"]);
    // The witness has the same expiry (set after): once it is gone, so is "short".
    until("the witness expired", || b.get::<_, Option<String>>("witness").unwrap().is_none());
    assert_eq!(transaction(&mut a, &[&["SET", "x", "1"]]), None);
    let x: Option<String> = a.get("x").unwrap();
    assert_eq!(x, None);
}

#[test]
fn unwatch_discard_and_watch_inside_multi() {
    let server = TestServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    watch(&mut a, &["k"]);
    let _: () = cmd("UNWATCH").query(&mut a).unwrap();
    let _: () = b.set("k", "1").unwrap();
    assert!(transaction(&mut a, &[&["GET", "k"]]).is_some(), "UNWATCH forgot the key");

    watch(&mut a, &["k"]);
    let _: () = cmd("MULTI").query(&mut a).unwrap();
    let _: () = cmd("DISCARD").query(&mut a).unwrap();
    let _: () = b.set("k", "2").unwrap();
    assert!(transaction(&mut a, &[&["GET", "k"]]).is_some(), "DISCARD forgot the key");

    // WATCH inside MULTI is refused, and the transaction goes on (Redis's answer).
    let _: () = cmd("MULTI").query(&mut a).unwrap();
    let e = cmd("WATCH").arg("k").query::<()>(&mut a).unwrap_err();
    assert!(e.to_string().contains("WATCH inside MULTI is not allowed"), "{e}");
    let queued: String = cmd("GET").arg("k").query(&mut a).unwrap();
    assert_eq!(queued, "QUEUED");
    let ran: Vec<Value> = cmd("EXEC").query(&mut a).unwrap();
    assert_eq!(ran, [Value::BulkString(b"2".to_vec())]);

    // A closed connection's keys are forgotten: the server goes on serving the key.
    watch(&mut a, &["k"]);
    drop(a);
    let _: () = b.set("k", "3").unwrap();
    let v: String = b.get("k").unwrap();
    assert_eq!(v, "3");
}

const WRITERS: usize = 4;
const READERS: usize = 2;
const ROUNDS: usize = 300;

#[test]
fn a_transactions_commands_run_with_no_other_command_on_their_keys_between() {
    let server = TestServer::start_with(shale_serve::Config { threads: 4, ..test_config() });
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let server = &server;
            scope.spawn(move || {
                let mut c = server.client();
                // Half the writers take the keys in the other order.
                let (first, second) = if w % 2 == 0 { ("a", "b") } else { ("b", "a") };
                for _ in 0..ROUNDS {
                    let ran = transaction(&mut c, &[&["INCR", first], &["INCR", second]]);
                    let ran = ran.expect("nothing watched: runs");
                    assert_eq!(ran.len(), 2);
                    assert_eq!(ran[0], ran[1], "{first} and {second} moved together");
                }
            });
        }
        for _ in 0..READERS {
            let server = &server;
            scope.spawn(move || {
                let mut c = server.client();
                for _ in 0..ROUNDS {
                    let got = transaction(&mut c, &[&["GET", "a"], &["GET", "b"]]).unwrap();
                    assert_eq!(got[0], got[1], "a reader saw a transaction half done");
                }
            });
        }
    });
    let mut c = server.client();
    let got: (i64, i64) = (c.get("a").unwrap(), c.get("b").unwrap());
    assert_eq!(got, ((WRITERS * ROUNDS) as i64, (WRITERS * ROUNDS) as i64));
}
