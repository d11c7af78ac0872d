//! The commands Redis Sentinel sends an instance, beyond INFO and PING (`clients.rs`,
//! `commands/pubsub.rs`, `commands/transaction.rs`): SUBSCRIBE, UNSUBSCRIBE and PUBLISH on
//! its hello channel, its promotion's MULTI block (REPLICAOF NO ONE, CONFIG REWRITE, CLIENT
//! KILL TYPE normal and pubsub) and the INFO fields it reads. Byte for byte, as a Redis 7.0
//! answers them.

mod common;

use common::{TestServer, closed, exchange, expect, read_line, resp};

const HELLO: &[u8] = b"__sentinel__:hello";

#[test]
fn published_messages_reach_subscribers_and_only_them() {
    let server = TestServer::start();
    let mut sub = server.raw();
    exchange(
        &mut sub,
        &resp(&[b"SUBSCRIBE", HELLO, b"other"]),
        b"*3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:1\r\n\
          *3\r\n$9\r\nsubscribe\r\n$5\r\nother\r\n:2\r\n",
    );
    let mut publisher = server.raw();
    exchange(&mut publisher, &resp(&[b"PUBLISH", HELLO, b"127.0.0.1,26379,x,0"]), b":1\r\n");
    expect(
        &mut sub,
        b"*3\r\n$7\r\nmessage\r\n$18\r\n__sentinel__:hello\r\n$19\r\n127.0.0.1,26379,x,0\r\n",
    );
    exchange(&mut publisher, &resp(&[b"PUBLISH", b"nobody", b"m"]), b":0\r\n");
    // A subscriber in RESP2 may only (un)subscribe, ping and quit.
    exchange(&mut sub, &resp(&[b"PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    sub.write_all_checked(&resp(&[b"GET", b"k"]));
    assert!(read_line(&mut sub).starts_with("-ERR Can't execute 'get'"));
    exchange(
        &mut sub,
        &resp(&[b"UNSUBSCRIBE", b"other"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$5\r\nother\r\n:1\r\n",
    );
    exchange(&mut publisher, &resp(&[b"PUBLISH", b"other", b"m"]), b":0\r\n");
    exchange(
        &mut sub,
        &resp(&[b"UNSUBSCRIBE"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$18\r\n__sentinel__:hello\r\n:0\r\n",
    );
    exchange(&mut publisher, &resp(&[b"PUBLISH", HELLO, b"m"]), b":0\r\n");
    // A normal client again.
    exchange(&mut sub, &resp(&[b"GET", b"k"]), b"$-1\r\n");
    // A subscriber that leaves is forgotten.
    let mut gone = server.raw();
    exchange(
        &mut gone,
        &resp(&[b"SUBSCRIBE", b"c"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n",
    );
    drop(gone);
    let mut left = false;
    for _ in 0..400 {
        publisher.write_all_checked(&resp(&[b"PUBLISH", b"c", b"m"]));
        if read_line(&mut publisher) == ":0\r\n" {
            left = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(left, "a closed subscriber still counted");
}

#[test]
fn resp3_subscribers_get_pushes_and_may_run_any_command() {
    let server = TestServer::start();
    let mut sub = server.raw();
    sub.write_all_checked(&resp(&[b"HELLO", b"3"]));
    // Skip HELLO's map: its first line says how many pairs follow, each a line or two.
    let head = read_line(&mut sub);
    assert!(head.starts_with('%'), "{head}");
    for _ in 0..head[1..].trim().parse::<usize>().unwrap() * 2 {
        let line = read_line(&mut sub);
        if line.starts_with('$') {
            read_line(&mut sub);
        } else if line.starts_with('*') {
            assert_eq!(line, "*0\r\n");
        }
    }
    exchange(&mut sub, &resp(&[b"SUBSCRIBE", b"c"]), b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n");
    exchange(&mut sub, &resp(&[b"GET", b"k"]), b"_\r\n");
    let mut publisher = server.raw();
    exchange(&mut publisher, &resp(&[b"PUBLISH", b"c", b"hi"]), b":1\r\n");
    expect(&mut sub, b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\nhi\r\n");
}

#[test]
fn sentinels_promotion_block_runs_whole() {
    let master = TestServer::start();
    let mut config = common::test_config();
    let port = master.addr.port().to_string();
    config.replicaof = Some(("127.0.0.1".into(), master.addr.port()));
    let replica = TestServer::start_with(config);
    let mut normal = replica.raw();
    exchange(&mut normal, &resp(&[b"PING"]), b"+PONG\r\n");
    let mut subscriber = replica.raw();
    exchange(
        &mut subscriber,
        &resp(&[b"SUBSCRIBE", HELLO]),
        b"*3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:1\r\n",
    );
    let mut sentinel = replica.raw();
    exchange(&mut sentinel, &resp(&[b"INFO", b"replication"]), b"$");
    let info = {
        let len: usize = read_line(&mut sentinel).trim().parse().unwrap();
        let mut body = vec![0u8; len + 2];
        std::io::Read::read_exact(&mut sentinel, &mut body).unwrap();
        String::from_utf8(body).unwrap()
    };
    assert!(info.contains("role:slave\r\n"), "{info}");
    assert!(info.contains(&format!("master_port:{port}\r\n")), "{info}");
    assert!(info.contains("slave_priority:100\r\n"), "{info}");
    // What Sentinel's sentinelSendSlaveOf sends, pipelined.
    let mut block = Vec::new();
    for args in [
        &[&b"MULTI"[..]][..],
        &[b"SLAVEOF", b"NO", b"ONE"],
        &[b"CONFIG", b"REWRITE"],
        &[b"CLIENT", b"KILL", b"TYPE", b"normal"],
        &[b"CLIENT", b"KILL", b"TYPE", b"pubsub"],
        &[b"EXEC"],
    ] {
        block.extend_from_slice(&resp(args));
    }
    exchange(
        &mut sentinel,
        &block,
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n+OK\r\n+OK\r\n:1\r\n:1\r\n",
    );
    assert!(closed(&mut normal), "CLIENT KILL TYPE normal left a client open");
    assert!(closed(&mut subscriber), "CLIENT KILL TYPE pubsub left a subscriber open");
    exchange(&mut sentinel, &resp(&[b"ROLE"]), b"*3\r\n$6\r\nmaster\r\n");
    assert!(read_line(&mut sentinel).starts_with(':'));
    assert_eq!(read_line(&mut sentinel), "*0\r\n");
    exchange(&mut sentinel, &resp(&[b"SET", b"k", b"v"]), b"+OK\r\n");
}

#[test]
fn transactions_queue_run_in_order_and_abort_on_errors() {
    let server = TestServer::start();
    let mut c = server.raw();
    exchange(&mut c, &resp(&[b"EXEC"]), b"-ERR EXEC without MULTI\r\n");
    exchange(&mut c, &resp(&[b"DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
    exchange(&mut c, &resp(&[b"MULTI"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"MULTI"]), b"-ERR MULTI calls can not be nested\r\n");
    exchange(&mut c, &resp(&[b"SET", b"a", b"1"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"INCR", b"a"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"GET", b"a"]), b"+QUEUED\r\n");
    c.write_all_checked(&resp(&[b"INCR", b"nope", b"x"]));
    let refused = read_line(&mut c);
    assert_eq!(refused, "-ERR wrong number of arguments for 'incr' command\r\n");
    exchange(
        &mut c,
        &resp(&[b"EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    exchange(&mut c, &resp(&[b"GET", b"a"]), b"$-1\r\n");
    exchange(&mut c, &resp(&[b"MULTI"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"SET", b"a", b"1"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"INCR", b"a"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"APPEND", b"a", b"x"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"INCR", b"a"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"GET", b"a"]), b"+QUEUED\r\n");
    exchange(
        &mut c,
        &resp(&[b"EXEC"]),
        b"*5\r\n+OK\r\n:2\r\n:2\r\n-ERR value is not an integer or out of range\r\n$2\r\n2x\r\n",
    );
    exchange(&mut c, &resp(&[b"MULTI"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"SET", b"b", b"1"]), b"+QUEUED\r\n");
    exchange(&mut c, &resp(&[b"DISCARD"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"GET", b"b"]), b"$-1\r\n");
    exchange(&mut c, &resp(&[b"MULTI"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"EXEC"]), b"*0\r\n");
}

#[test]
fn client_kill_closes_the_clients_named() {
    let server = TestServer::start();
    let mut a = server.raw();
    exchange(&mut a, &resp(&[b"CLIENT", b"ID"]), b":");
    let id = read_line(&mut a);
    let id = id.trim();
    let mut killer = server.raw();
    exchange(&mut killer, &resp(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]), b":1\r\n");
    assert!(closed(&mut a));
    exchange(
        &mut killer,
        &resp(&[b"CLIENT", b"KILL", b"ID", b"999999"]),
        b"-ERR No such client\r\n",
    );
    killer.write_all_checked(&resp(&[b"CLIENT", b"KILL", b"TYPE", b"master"]));
    assert!(read_line(&mut killer).starts_with("-ERR Unknown client type 'master'"));
    // SKIPME yes by default: the caller stays; with no, it is closed after its reply.
    exchange(&mut killer, &resp(&[b"CLIENT", b"KILL", b"TYPE", b"normal"]), b":0\r\n");
    exchange(
        &mut killer,
        &resp(&[b"CLIENT", b"KILL", b"TYPE", b"normal", b"SKIPME", b"no"]),
        b":1\r\n",
    );
    assert!(closed(&mut killer));
    let mut c = server.raw();
    exchange(&mut c, &resp(&[b"CONFIG", b"REWRITE"]), b"+OK\r\n");
    exchange(&mut c, &resp(&[b"INFO", b"server"]), b"$");
    let len: usize = read_line(&mut c).trim().parse().unwrap();
    let mut body = vec![0u8; len + 2];
    std::io::Read::read_exact(&mut c, &mut body).unwrap();
    let info = String::from_utf8(body).unwrap();
    let run_id = info.lines().find_map(|l| l.strip_prefix("run_id:")).unwrap();
    assert!(run_id.len() == 40 && run_id.bytes().all(|b| b.is_ascii_hexdigit()), "{run_id}");
}

trait WriteAll {
    fn write_all_checked(&mut self, bytes: &[u8]);
}

impl WriteAll for std::net::TcpStream {
    fn write_all_checked(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(self, bytes).unwrap();
    }
}
