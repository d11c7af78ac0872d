//! INFO's memory, persistence and clients fields, what `redis-cli --stat` and monitoring
//! read: `used_memory` (the resident set, measured), its human form, `maxmemory:0`,
//! `blocked_clients:0`, no child at work; the default INFO includes them.

mod common;

use common::{TestServer, test_config};
use redis::cmd;
use shale_serve::Config;

fn field<'a>(info: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}:");
    let line = info.lines().find(|l| l.starts_with(&prefix));
    &line.unwrap_or_else(|| panic!("no {name} in:\n{info}"))[prefix.len()..]
}

#[test]
fn memory_fields_are_measured() {
    let server = TestServer::start();
    let mut c = server.client();
    let info: String = cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(info.starts_with("# Memory\r\nused_memory:"), "{info}");
    let used: u64 = field(&info, "used_memory").parse().unwrap();
    let rss: u64 = field(&info, "used_memory_rss").parse().unwrap();
    let peak: u64 = field(&info, "used_memory_peak").parse().unwrap();
    // A process with a store open holds megabytes; no machine has a petabyte.
    assert!((1 << 20..1 << 50).contains(&used), "{info}");
    assert!(rss > 0 && peak >= rss.min(used), "{info}");
    let human = field(&info, "used_memory_human");
    assert!(human.ends_with('M') || human.ends_with('G'), "{human}");
    assert_eq!(field(&info, "maxmemory"), "0");
    assert_eq!(field(&info, "maxmemory_human"), "0B");
    assert_eq!(field(&info, "maxmemory_policy"), "noeviction");
    let total: u64 = field(&info, "total_system_memory").parse().unwrap();
    assert!(total > used, "{info}");
}

#[test]
fn clients_and_persistence_fields_are_there() {
    let server = TestServer::start_with(Config { max_clients: 77, ..test_config() });
    let mut c = server.client();
    let info: String = cmd("INFO").query(&mut c).unwrap();
    for section in ["# Server", "# Clients", "# Memory", "# Persistence", "# Stats"] {
        assert!(info.contains(section), "{section} missing:\n{info}");
    }
    assert_eq!(field(&info, "connected_clients"), "1");
    assert_eq!(field(&info, "maxclients"), "77");
    assert_eq!(field(&info, "blocked_clients"), "0");
    assert_eq!(field(&info, "loading"), "0");
    assert_eq!(field(&info, "rdb_bgsave_in_progress"), "0");
    assert_eq!(field(&info, "aof_rewrite_in_progress"), "0");
    // redis-cli finds a field by the first place its name appears: used_memory must come
    // before used_memory_rss and the rest.
    let first = info.find("used_memory").unwrap();
    assert_eq!(&info[first..first + "used_memory:".len()], "used_memory:");
}
