//! Concurrent read-modify-writes: several clients INCR and APPEND the same keys at once,
//! and no update is lost (the per-key locks of keyspace.rs).

mod common;

use common::TestServer;
use redis::Commands;

const CLIENTS: usize = 6;
const INCRS_PER_CLIENT: usize = 300;

#[test]
fn concurrent_incrs_lose_no_update() {
    let server = TestServer::start();
    std::thread::scope(|scope| {
        for t in 0..CLIENTS {
            let server = &server;
            scope.spawn(move || {
                let mut c = server.client();
                for i in 0..INCRS_PER_CLIENT {
                    let _: i64 = c.incr("shared", 1).unwrap();
                    let _: i64 = c.incr(format!("k{}", i % 5), 2).unwrap();
                    let _: i64 = c.append("log", format!("{t}")).unwrap();
                    if i % 50 == 0 {
                        let _: i64 = c.decr("shared", 1).unwrap();
                        let _: i64 = c.incr("shared", 1).unwrap();
                    }
                }
            });
        }
    });
    let mut c = server.client();
    let total: i64 = c.get("shared").unwrap();
    assert_eq!(total, (CLIENTS * INCRS_PER_CLIENT) as i64);
    for k in 0..5 {
        let v: i64 = c.get(format!("k{k}")).unwrap();
        assert_eq!(v, (CLIENTS * INCRS_PER_CLIENT / 5 * 2) as i64, "k{k}");
    }
    let log: String = c.get("log").unwrap();
    assert_eq!(log.len(), CLIENTS * INCRS_PER_CLIENT);
    for t in 0..CLIENTS {
        let n = log.bytes().filter(|&b| b == b'0' + t as u8).count();
        assert_eq!(n, INCRS_PER_CLIENT, "client {t}'s appends");
    }
}
