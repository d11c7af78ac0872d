//! Connection and server commands: PING, ECHO, SELECT, CLIENT SETNAME/GETNAME/ID, QUIT,
//! HELLO 2 and 3 (RESP3: a map for HELLO, `_` for nulls), COMMAND, CONFIG GET, INFO, and the
//! error naming an unknown command.

mod common;

use common::{TestServer, closed, exchange, read_line, resp};
use redis::{Value, cmd};
use std::io::Write;

#[test]
fn ping_echo_select_client_quit() {
    let server = TestServer::start();
    let mut c = server.client();
    let pong: String = cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let msg: String = cmd("PING").arg("hi").query(&mut c).unwrap();
    assert_eq!(msg, "hi");
    let echo: Vec<u8> = cmd("ECHO").arg(b"a\r\nb").query(&mut c).unwrap();
    assert_eq!(echo, b"a\r\nb");
    let ok: String = cmd("SELECT").arg(0).query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    let e = cmd("SELECT").arg(1).query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("DB index is out of range"), "{e}");
    let name: Option<String> = cmd("CLIENT").arg("GETNAME").query(&mut c).unwrap();
    assert_eq!(name, None);
    let _: () = cmd("CLIENT").arg("SETNAME").arg("worker-1").query(&mut c).unwrap();
    let name: Option<String> = cmd("CLIENT").arg("GETNAME").query(&mut c).unwrap();
    assert_eq!(name.as_deref(), Some("worker-1"));
    let e = cmd("CLIENT").arg("SETNAME").arg("has space").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("cannot contain spaces"), "{e}");
    let id: i64 = cmd("CLIENT").arg("ID").query(&mut c).unwrap();
    assert!(id > 0);

    let mut raw = server.raw();
    exchange(&mut raw, &resp(&[b"QUIT"]), b"+OK\r\n");
    assert!(closed(&mut raw), "QUIT closes the connection");
}

#[test]
fn unknown_commands_are_named_and_the_connection_goes_on() {
    let server = TestServer::start();
    let mut raw = server.raw();
    exchange(
        &mut raw,
        &resp(&[b"FROB", b"a", b"b"]),
        b"-ERR unknown command 'FROB', with args beginning with: 'a' 'b' \r\n",
    );
    exchange(
        &mut raw,
        &resp(&[b"HSET", b"h", b"f", b"v"]),
        b"-ERR unknown command 'HSET', with args beginning with: 'h' 'f' 'v' \r\n",
    );
    exchange(&mut raw, &resp(&[b"ping"]), b"+PONG\r\n");
}

#[test]
fn hello_3_switches_to_resp3() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(&resp(&[b"HELLO", b"3"])).unwrap();
    assert_eq!(read_line(&mut raw), "%7\r\n", "HELLO 3 answers a map");
    let mut fields = Vec::new();
    for _ in 0..7 {
        let key_len = read_line(&mut raw);
        assert!(key_len.starts_with('$'));
        let key = read_line(&mut raw);
        let value = read_line(&mut raw);
        let value = if value.starts_with('$') { read_line(&mut raw) } else { value };
        fields.push((key.trim_end().to_string(), value.trim_end().to_string()));
    }
    assert!(fields.contains(&("proto".into(), ":3".into())), "{fields:?}");
    assert!(fields.contains(&("server".into(), "shale".into())), "{fields:?}");
    // Nulls are `_` in RESP3.
    exchange(&mut raw, &resp(&[b"GET", b"missing"]), b"_\r\n");
    exchange(&mut raw, &resp(&[b"CLIENT", b"GETNAME"]), b"_\r\n");
    exchange(&mut raw, &resp(&[b"MGET", b"x"]), b"*1\r\n_\r\n");
    // CONFIG GET answers a map.
    exchange(
        &mut raw,
        &resp(&[b"CONFIG", b"GET", b"databases"]),
        b"%1\r\n$9\r\ndatabases\r\n$1\r\n1\r\n",
    );
    exchange(&mut raw, &resp(&[b"HELLO", b"4"]), b"-NOPROTO unsupported protocol version\r\n");
    // Back to RESP2.
    raw.write_all(&resp(&[b"HELLO", b"2"])).unwrap();
    assert_eq!(read_line(&mut raw), "*14\r\n");
    for _ in 0..14 {
        let line = read_line(&mut raw);
        if line.starts_with('$') {
            read_line(&mut raw);
        } else if line.starts_with('*') {
            assert_eq!(line, "*0\r\n");
        }
    }
    exchange(&mut raw, &resp(&[b"GET", b"missing"]), b"$-1\r\n");

    // The redis crate speaking RESP3.
    let mut c = server.client_url("?protocol=resp3").get_connection().unwrap();
    let _: () = cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: Option<String> = cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let v: Value = cmd("GET").arg("nothing").query(&mut c).unwrap();
    assert_eq!(v, Value::Nil);
}

#[test]
fn command_config_and_info() {
    let server = TestServer::start();
    let mut c = server.client();
    let n: i64 = cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    let all: Vec<Value> = cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, n);
    let info: Vec<Value> = cmd("COMMAND").arg("INFO").arg("get").arg("nope").query(&mut c).unwrap();
    match &info[0] {
        Value::Array(fields) => {
            assert_eq!(fields[0], Value::BulkString(b"get".to_vec()));
            assert_eq!(fields[1], Value::Int(2));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(info[1], Value::Nil);
    let docs: Value = cmd("COMMAND").arg("DOCS").query(&mut c).unwrap();
    assert_eq!(docs, Value::Array(Vec::new()));

    let cfg: Vec<String> = cmd("CONFIG").arg("GET").arg("append*").query(&mut c).unwrap();
    assert_eq!(cfg, ["appendfsync", "no", "appendonly", "yes"]);
    let cfg: Vec<String> = cmd("CONFIG").arg("GET").arg("port").query(&mut c).unwrap();
    assert_eq!(cfg, ["port".to_string(), server.addr.port().to_string()]);
    let e = cmd("CONFIG").arg("SET").arg("maxclients").arg("1").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("not supported"), "{e}");

    let _: () = cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let info: String = cmd("INFO").query(&mut c).unwrap();
    for needle in [
        "# Server\r\n",
        "redis_version:",
        &format!("tcp_port:{}\r\n", server.addr.port()),
        "uptime_in_seconds:",
        "# Clients\r\nconnected_clients:1\r\n",
        "# Stats\r\n",
        "total_commands_processed:",
        "total_connections_received:1\r\n",
        "# Keyspace\r\ndb0:keys=1,keys_estimated=0\r\n",
        "# Shale\r\nshale_levels:",
        "shale_stall_l0_stop:count=0,duration_us=0\r\n",
        "shale_block_cache_hit_ratio:",
    ] {
        assert!(info.contains(needle), "INFO lacks {needle:?}:\n{info}");
    }
    let only: String = cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert_eq!(only, "# Keyspace\r\ndb0:keys=1,keys_estimated=0\r\n");
}
