//! redis-cli against the server, when it is installed (`apt-get install redis-tools`, which
//! `test.sh` does as root); otherwise the test prints that it skipped, or fails where
//! `SHALE_REQUIRE_PREREQS=1` (`shale_testkit::prerequisite`).

mod common;

use std::process::Command;

use common::TestServer;

fn redis_cli(server: &TestServer, args: &[&str]) -> String {
    let port = server.addr.port().to_string();
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port])
        .args(args)
        .output()
        .expect("running redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_talks_to_the_server() {
    if !shale_testkit::prerequisite::program("redis-cli", "apt-get install redis-tools") {
        return;
    }
    let server = TestServer::start();
    assert_eq!(redis_cli(&server, &["ping"]), "PONG\n");
    assert_eq!(redis_cli(&server, &["set", "a", "b"]), "OK\n");
    assert_eq!(redis_cli(&server, &["get", "a"]), "b\n");
    assert_eq!(redis_cli(&server, &["incrby", "n", "5"]), "5\n");
    assert_eq!(redis_cli(&server, &["mget", "a", "missing"]), "b\n\n");
    assert_eq!(redis_cli(&server, &["set", "t", "v", "ex", "100"]), "OK\n");
    assert_eq!(redis_cli(&server, &["ttl", "t"]), "100\n");
    for i in 0..30 {
        redis_cli(&server, &["set", &format!("user:{i:02}"), "x"]);
    }
    // --scan follows the cursors (which it parses as integers) to the end, 10 keys a call.
    let scanned = redis_cli(&server, &["--scan", "--pattern", "user:*"]);
    let mut keys: Vec<&str> = scanned.lines().collect();
    keys.sort_unstable();
    let want: Vec<String> = (0..30).map(|i| format!("user:{i:02}")).collect();
    assert_eq!(keys, want);
    assert_eq!(redis_cli(&server, &["dbsize"]), "33\n");
    let unknown = redis_cli(&server, &["frob", "x"]);
    assert!(unknown.contains("unknown command 'frob'"), "{unknown}");
    assert!(redis_cli(&server, &["info", "server"]).contains("tcp_port:"));
    // Several commands through one connection, as typed into the interactive prompt.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'set x 1\\nincr x\\nget x\\nquit\\n' | redis-cli -h 127.0.0.1 -p {}",
            server.addr.port()
        ))
        .output()
        .unwrap();
    // redis-cli ends at quit by itself, printing nothing for it.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n2\n2\n");
}
