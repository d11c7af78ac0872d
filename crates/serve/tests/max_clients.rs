//! max_clients: one client more than allowed is answered Redis's error and closed; once a
//! client leaves, a new one is served.

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, closed, exchange, expect, resp, test_config};
use shale_serve::Config;

#[test]
fn one_client_too_many_is_refused_with_an_error() {
    let server = TestServer::start_with(Config { max_clients: 2, ..test_config() });
    let mut a = server.raw();
    let mut b = server.raw();
    exchange(&mut a, &resp(&[b"PING"]), b"+PONG\r\n");
    exchange(&mut b, &resp(&[b"PING"]), b"+PONG\r\n");
    let mut c = server.raw();
    expect(&mut c, b"-ERR max number of clients reached\r\n");
    assert!(closed(&mut c));
    drop(a);
    // The server sees the close when it reads: wait (bounded) until a new client is served.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = server.raw();
        let mut first = [0u8; 1];
        std::io::Write::write_all(&mut d, &resp(&[b"PING"])).unwrap();
        std::io::Read::read_exact(&mut d, &mut first).unwrap();
        if first[0] == b'+' {
            break;
        }
        assert!(Instant::now() < deadline, "a freed place was never reused");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut b_again = b;
    exchange(&mut b_again, &resp(&[b"INFO", b"stats"]), b"$");
}
