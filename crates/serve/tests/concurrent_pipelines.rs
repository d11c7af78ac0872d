//! Concurrent pipelines of read-modify-writes: several connections each send pipelines of
//! INCRs on a shared key, on keys some of them share and on a key of their own, with MSETs and
//! DELs of several keys between them (so runs that hold stripes need others out of index
//! order, and try-lock, flush and wait: run.rs's lock rule). No update is lost, no
//! connection deadlocks, and each connection's own counter answers 1..N in order.

mod common;

use std::io::Write;

use common::{TestServer, read_line, resp};
use shale_serve::{AppendFsync, Config};

const CLIENTS: usize = 6;
const PIPELINES: usize = 25;
const DEPTH: usize = 40;

#[test]
fn concurrent_pipelined_incrs_give_exact_totals() {
    for appendfsync in [AppendFsync::No, AppendFsync::Always] {
        let server = TestServer::start_with(Config { appendfsync, ..common::test_config() });
        std::thread::scope(|scope| {
            for t in 0..CLIENTS {
                let server = &server;
                scope.spawn(move || client(server, t));
            }
        });
        let mut c = server.client();
        let get = |c: &mut redis::Connection, k: &str| -> i64 {
            redis::cmd("GET").arg(k).query(c).unwrap()
        };
        assert_eq!(get(&mut c, "shared"), (CLIENTS * PIPELINES * DEPTH) as i64, "{appendfsync:?}");
        for k in 0..3 {
            // Clients t with t % 3 == k add 2 per command.
            let adders = (0..CLIENTS).filter(|t| t % 3 == k).count();
            assert_eq!(get(&mut c, &format!("group{k}")), (adders * PIPELINES * DEPTH * 2) as i64);
        }
        for t in 0..CLIENTS {
            assert_eq!(get(&mut c, &format!("own{t}")), (PIPELINES * DEPTH) as i64);
        }
    }
}

fn client(server: &TestServer, t: usize) {
    let mut s = server.raw();
    let own = format!("own{t}");
    let group = format!("group{}", t % 3);
    let mut own_count = 0;
    for p in 0..PIPELINES {
        let mut input = Vec::new();
        let mut kinds = Vec::new();
        for i in 0..DEPTH {
            // Keys taken in varying orders within a run: ascending and descending stripes.
            input.extend(resp(&[b"INCR", own.as_bytes()]));
            input.extend(resp(&[b"INCR", b"shared"]));
            input.extend(resp(&[b"INCRBY", group.as_bytes(), b"2"]));
            kinds.extend([Kind::Own, Kind::Any, Kind::Any]);
            if i % 8 == t % 8 {
                let a = format!("m{}", (p + i) % 7);
                let b = format!("m{}", (p + 3 * i + t) % 7);
                input.extend(resp(&[b"MSET", a.as_bytes(), b"x", b.as_bytes(), b"y"]));
                input.extend(resp(&[b"DEL", b.as_bytes(), a.as_bytes(), b"nothing"]));
                kinds.extend([Kind::Ok, Kind::Any]);
            }
        }
        s.write_all(&input).unwrap();
        for kind in kinds {
            let line = read_line(&mut s);
            match kind {
                Kind::Own => {
                    own_count += 1;
                    assert_eq!(line, format!(":{own_count}\r\n"), "client {t}'s own counter");
                }
                Kind::Ok => assert_eq!(line, "+OK\r\n"),
                Kind::Any => assert!(line.starts_with(':'), "client {t}: {line:?}"),
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Own,
    Ok,
    Any,
}
