//! redis-cli's tools against the server: `--bigkeys` (DBSIZE, SCAN, TYPE and STRLEN of every
//! key) finds the biggest string, and `--stat` (INFO once a second) shows the keys, the memory
//! used and the clients. Needs redis-cli (Debian's redis-tools, which `test.sh` installs):
//! without it the test fails, saying so.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::TestServer;

fn redis_cli() -> Command {
    let installed =
        Command::new("redis-cli").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(installed, "this test needs redis-cli: apt-get install redis-tools");
    Command::new("redis-cli")
}

#[test]
fn bigkeys_finds_the_biggest_string() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..50 {
        let _: () =
            redis::cmd("SET").arg(format!("k{i}")).arg("x".repeat(i)).query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET").arg("the-big-one").arg("y".repeat(5000)).query(&mut c).unwrap();
    let out = redis_cli()
        .args(["-h", "127.0.0.1", "-p", &server.addr.port().to_string(), "--bigkeys"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Biggest string found '\"the-big-one\"' has 5000 bytes"), "{text}");
    assert!(text.contains("51 strings with"), "{text}");
}

#[test]
fn stat_shows_keys_memory_and_clients() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..7 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg("v").query(&mut c).unwrap();
    }
    // Line-buffered through a pipe (stdbuf), read line by line, killed after its first row.
    let mut child = Command::new("stdbuf")
        .args(["-oL", "redis-cli", "-h", "127.0.0.1", "-p", &server.addr.port().to_string()])
        .arg("--stat")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    redis_cli(); // fails the test with the reason if redis-cli is missing
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = lines.nth(1).unwrap().unwrap();
    assert!(header.starts_with("keys       mem      clients blocked"), "{header}");
    let row = lines.next().unwrap().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[0], "7", "{row}");
    // Memory in redis-cli's human form, megabytes for a process with a store open.
    assert!(cols[1].ends_with('M') && !cols[1].starts_with('-'), "{row}");
    assert_eq!(cols[2], "2", "the test's client and redis-cli: {row}");
    assert_eq!(cols[3], "0", "{row}");
}
