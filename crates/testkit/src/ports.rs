//! TCP ports for the servers a test starts (`shale serve`, redis-server, Sentinel,
//! twemproxy), which take a port number in their arguments or configuration.
//!
//! A port is picked by binding it and letting it go, so another process can still take it
//! before the server binds it. Two ways that happened here are closed:
//! - a port-0 bind hands out ports of the kernel's ephemeral range, where every outgoing
//!   connection (a client's, a replica's link) also takes its local port: ports here come
//!   from below that range, which no connection takes on its own;
//! - two picks in a row could return the same port (the first was let go before the
//!   second): a test takes all its ports in one call, held together while they are picked,
//!   and no port is handed out twice in one test process (tests of one binary run in
//!   parallel).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port handed out: above the well-known and most registered services' ports.
const LOWEST: u16 = 10_000;

/// Ports handed out in this process.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`; 32768
/// when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// `N` distinct ports that no one listened on when picked, below the ephemeral range and
/// never handed out before in this process.
///
/// # Panics
/// When the ephemeral range starts too low to leave room below it, or no `N` free ports are
/// found there.
pub fn free_ports<const N: usize>() -> [u16; N] {
    // Where to start looking: differs between processes, so that test binaries run at the
    // same time (by hand) rarely look at the same ports.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    pick(seed)
}

/// [`free_ports`], looking first at the port `seed` names.
fn pick<const N: usize>(seed: u32) -> [u16; N] {
    let high = ephemeral_low();
    assert!(
        high > LOWEST + 1_000,
        "net.ipv4.ip_local_port_range starts at {high}: no room for test ports below it"
    );
    let span = u32::from(high - LOWEST);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut held: Vec<TcpListener> = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    let mut found = 0;
    for step in 0..span {
        if found == N {
            break;
        }
        let port = nth_candidate(seed, step, span);
        if handed_out.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
            handed_out.insert(port);
            ports[found] = port;
            found += 1;
        }
    }
    assert_eq!(found, N, "only {found} of {N} free ports in {LOWEST}..{high}");
    ports
}

/// The port looked at in step `step` from `seed`: strides of a prime the span is no multiple
/// of, so `span` steps look at every port of the span once, and neighbouring ports (which a
/// test's servers may take) come late.
fn nth_candidate(seed: u32, step: u32, span: u32) -> u16 {
    let stride = if span % 7_919 == 0 { 7_907 } else { 7_919 };
    LOWEST + ((seed % span + step * stride % span) % span) as u16
}

/// One port, as [`free_ports`] picks them.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_below_the_ephemeral_range_and_bindable() {
        let a = free_ports::<8>();
        let b = free_ports::<8>();
        let all: BTreeSet<u16> = a.iter().chain(&b).copied().collect();
        assert_eq!(all.len(), 16, "{a:?} {b:?}");
        for &p in &all {
            assert!((LOWEST..ephemeral_low()).contains(&p), "{p}");
            TcpListener::bind(("127.0.0.1", p)).expect("a picked port is free");
        }
    }

    #[test]
    fn a_port_someone_listens_on_is_not_picked() {
        // Two ports someone listens on: the first two this search would look at.
        let span = u32::from(ephemeral_low() - LOWEST);
        let seed = (0..span)
            .find(|&s| {
                (0..2).all(|i| {
                    let p = nth_candidate(s, i, span);
                    !HANDED_OUT.lock().unwrap().contains(&p)
                        && TcpListener::bind(("127.0.0.1", p)).is_ok()
                })
            })
            .expect("two free ports somewhere");
        let held: Vec<TcpListener> = (0..2)
            .map(|i| TcpListener::bind(("127.0.0.1", nth_candidate(seed, i, span))).unwrap())
            .collect();
        let picked = pick::<3>(seed);
        for l in &held {
            let taken = l.local_addr().unwrap().port();
            assert!(!picked.contains(&taken), "{taken} picked while in use: {picked:?}");
        }
    }

    #[test]
    fn the_search_looks_at_every_port_of_the_span_once() {
        let span = u32::from(ephemeral_low() - LOWEST);
        let seen: BTreeSet<u16> = (0..span).map(|step| nth_candidate(12_345, step, span)).collect();
        assert_eq!(seen.len() as u32, span);
    }
}
