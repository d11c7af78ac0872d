//! Protected mode, as Redis's: with no password, a TCP client from an address other than
//! loopback is answered `-DENIED ...` and closed; loopback clients are served. A password,
//! or protected mode off, lets the others in. The test needs an address of this machine that
//! is not loopback (any up interface's IPv4 address); without one it fails, saying so.

mod common;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use common::{READ_TIMEOUT, closed, exchange, read_line, resp, test_config};
use shale_lsm::{Db, Options};
use shale_serve::{Config, Server};

/// An IPv4 address of an up interface of this machine that is not loopback.
fn non_loopback_address() -> Ipv4Addr {
    let mut found = None;
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list it allocates, freed below; each entry is
    // read only while the list lives.
    unsafe {
        assert_eq!(libc::getifaddrs(&mut list), 0, "getifaddrs failed");
        let mut at = list;
        while !at.is_null() {
            let ifa = &*at;
            if !ifa.ifa_addr.is_null()
                && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_INET
                && ifa.ifa_flags & libc::IFF_UP as u32 != 0
            {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() {
                    found = Some(ip);
                }
            }
            at = ifa.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found.expect("this test needs an up network interface with an IPv4 address other than loopback")
}

struct Running {
    server: Option<Server>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().unwrap();
        }
    }
}

fn start_on_all_addresses(config: Config) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    let config = Config { bind: Some(SocketAddr::from(([0, 0, 0, 0], 0))), ..config };
    let server = Server::start(db, config).unwrap();
    let port = server.tcp_addr().unwrap().port();
    Running { server: Some(server), port, _dir: dir }
}

fn connect(ip: Ipv4Addr, port: u16) -> TcpStream {
    let s = TcpStream::connect((ip, port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn clients_from_other_addresses_are_denied_without_a_password() {
    let outside = non_loopback_address();
    let server = start_on_all_addresses(test_config());
    let mut local = connect(Ipv4Addr::LOCALHOST, server.port);
    exchange(&mut local, &resp(&[b"PING"]), b"+PONG\r\n");

    let mut s = connect(outside, server.port);
    s.write_all(&resp(&[b"PING"])).unwrap();
    let line = read_line(&mut s);
    assert!(line.starts_with("-DENIED shale serve is running in protected mode"), "{line}");
    assert!(line.contains("--requirepass") && line.contains("--protected-mode no"), "{line}");
    assert!(closed(&mut s));
    let mut again = connect(Ipv4Addr::LOCALHOST, server.port);
    let info = resp(&[b"INFO", b"stats"]);
    again.write_all(&info).unwrap();
    read_line(&mut again);
    let mut stats = String::new();
    while !stats.contains("rejected_connections:") {
        stats.push_str(&read_line(&mut again));
    }
    assert!(stats.contains("rejected_connections:1\r\n"), "{stats}");
}

#[test]
fn a_password_or_protected_mode_off_lets_them_in() {
    let outside = non_loopback_address();
    let with_password = Config { password: Some("pw".into()), ..test_config() };
    let server = start_on_all_addresses(with_password);
    let mut s = connect(outside, server.port);
    exchange(&mut s, &resp(&[b"PING"]), b"-NOAUTH Authentication required.\r\n");
    exchange(&mut s, &resp(&[b"AUTH", b"pw"]), b"+OK\r\n");
    drop(server);

    let off = Config { protected_mode: false, ..test_config() };
    let server = start_on_all_addresses(off);
    let mut s = connect(outside, server.port);
    exchange(&mut s, &resp(&[b"PING"]), b"+PONG\r\n");
    exchange(
        &mut s,
        &resp(&[b"CONFIG", b"GET", b"protected-mode"]),
        b"*2\r\n$14\r\nprotected-mode\r\n$2\r\nno\r\n",
    );
}

#[test]
fn loopback_is_every_127_address_and_ipv6_s() {
    use shale_serve::server::is_loopback;
    for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
        assert!(is_loopback(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["10.0.0.1", "192.0.2.2", "::ffff:10.0.0.1", "2001:db8::1", "0.0.0.0"] {
        assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
    }
}
