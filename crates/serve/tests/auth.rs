//! AUTH: with a password set, every command but AUTH, HELLO ... AUTH and QUIT is refused
//! until it is given; a wrong one is refused; the redis crate authenticates from its URL.

mod common;

use std::io::Write;

use common::{TestServer, exchange, read_line, resp, test_config};
use redis::{Value, cmd};
use shale_serve::Config;

#[test]
fn commands_wait_for_auth() {
    let config = Config { password: Some("s3cret".into()), ..test_config() };
    let server = TestServer::start_with(config);
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"-NOAUTH Authentication required.\r\n");
    exchange(&mut s, &resp(&[b"PING"]), b"-NOAUTH Authentication required.\r\n");
    exchange(
        &mut s,
        &resp(&[b"FROB"]),
        b"-ERR unknown command 'FROB', with args beginning with: \r\n",
    );
    exchange(
        &mut s,
        &resp(&[b"AUTH", b"wrong"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(
        &mut s,
        &resp(&[b"AUTH", b"someone", b"s3cret"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(&mut s, &resp(&[b"SET", b"k", b"v"]), b"-NOAUTH Authentication required.\r\n");
    s.write_all(&resp(&[b"HELLO", b"3"])).unwrap();
    assert!(read_line(&mut s).starts_with("-NOAUTH HELLO must be called"));
    exchange(&mut s, &resp(&[b"AUTH", b"s3cret"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"SET", b"k", b"v"]), b"+OK\r\n");

    // AUTH default <password>, and HELLO with AUTH.
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"AUTH", b"default", b"s3cret"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    let mut s = server.raw();
    let hello = resp(&[b"HELLO", b"2", b"AUTH", b"default", b"s3cret", b"SETNAME", b"me"]);
    s.write_all(&hello).unwrap();
    assert_eq!(read_line(&mut s), "*14\r\n");
    for _ in 0..14 {
        let line = read_line(&mut s);
        if line.starts_with('$') {
            read_line(&mut s);
        }
    }
    exchange(&mut s, &resp(&[b"CLIENT", b"GETNAME"]), b"$2\r\nme\r\n");

    // The redis crate: refused without the password, served with it.
    let mut c = server.client();
    let e = cmd("GET").arg("k").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("Authentication required"), "{e}");
    let mut c = redis::Client::open(format!("redis://:s3cret@{}/", server.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: String = cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
}

#[test]
fn auth_without_a_password_set_is_an_error() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(
        &mut s,
        &resp(&[b"AUTH", b"x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    exchange(&mut s, &resp(&[b"PING"]), b"+PONG\r\n");
}
