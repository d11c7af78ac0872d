//! Pipelined writes run as one run (run.rs): read-modify-writes of one pipeline execute
//! against the run's overlay, are written as one engine batch and answered after it. Checked
//! here: INCRs of one key in one pipeline answer 1..N in order, in far fewer engine writes
//! than commands; a type error in the middle is that command's reply and the rest apply;
//! random mixed pipelines (SET, INCR, APPEND, GET, MSET, MSETNX, DEL, GETSET, SETNX, ...)
//! answer byte for byte what a simple model of Redis's semantics answers, and after a restart
//! the store holds what was replied.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{TestServer, expect, resp, test_config};
use shale_serve::keyspace::{WriteEvent, WriteHook};
use shale_serve::{AppendFsync, Config};
use std::io::Write;

/// A config whose hook counts the engine writes of clients' commands.
fn counting(appendfsync: AppendFsync) -> (Config, Arc<AtomicU64>) {
    let writes = Arc::new(AtomicU64::new(0));
    let w = writes.clone();
    let hook = WriteHook(Arc::new(move |e| {
        if let WriteEvent::Before(_) = e {
            w.fetch_add(1, Ordering::Relaxed);
        }
    }));
    (Config { appendfsync, write_hook: Some(hook), ..test_config() }, writes)
}

#[test]
fn pipelined_incrs_of_one_key_answer_one_to_n_in_few_writes() {
    const N: usize = 1000;
    let (config, writes) = counting(AppendFsync::Always);
    let server = TestServer::start_with(config);
    let mut s = server.raw();
    let mut input = Vec::new();
    let mut expected = String::new();
    for i in 1..=N {
        input.extend(resp(&[b"INCR", b"counter"]));
        expected.push_str(&format!(":{i}\r\n"));
    }
    s.write_all(&input).unwrap();
    expect(&mut s, expected.as_bytes());
    // One at a time this was N synced writes; a run writes up to 256 commands at once (the
    // pipeline arrives in a few reads, each ending a run).
    let n = writes.load(Ordering::Relaxed);
    assert!(n <= (N / 16) as u64, "{n} engine writes for {N} pipelined INCRs");
    let mut c = server.client();
    let v: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(v, N as i64);
}

#[test]
fn a_type_error_in_the_middle_leaves_the_rest_applied() {
    let (config, writes) = counting(AppendFsync::Always);
    let server = TestServer::start_with(config);
    let mut s = server.raw();
    let mut input = Vec::new();
    for req in [
        &[&b"SET"[..], b"n", b"1"][..],
        &[b"SET", b"s", b"abc"],
        &[b"INCR", b"n"],
        &[b"INCR", b"s"],
        &[b"INCRBY", b"n", b"x"],
        &[b"INCR", b"n"],
        &[b"APPEND", b"s", b"d"],
        &[b"GET", b"n"],
        &[b"GET", b"s"],
    ] {
        input.extend(resp(req));
    }
    s.write_all(&input).unwrap();
    expect(
        &mut s,
        b"+OK\r\n+OK\r\n:2\r\n-ERR value is not an integer or out of range\r\n\
          -ERR value is not an integer or out of range\r\n:3\r\n:4\r\n$1\r\n3\r\n$4\r\nabcd\r\n",
    );
    assert_eq!(writes.load(Ordering::Relaxed), 1, "one run, one write");
    let server_dir = server.stop();
    let server = TestServer::start_in(server_dir, test_config());
    let mut c = server.client();
    let n: i64 = redis::cmd("GET").arg("n").query(&mut c).unwrap();
    let s: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    assert_eq!((n, s.as_str()), (3, "abcd"));
}

/// A small deterministic generator (xorshift64*), so that a failure replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Redis's string semantics over a map, answering in RESP2.
#[derive(Default)]
struct Model {
    keys: HashMap<Vec<u8>, Vec<u8>>,
}

fn bulk(v: Option<&Vec<u8>>) -> Vec<u8> {
    match v {
        None => b"$-1\r\n".to_vec(),
        Some(v) => {
            let mut out = format!("${}\r\n", v.len()).into_bytes();
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
            out
        }
    }
}

fn int(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

const NOT_AN_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";

impl Model {
    fn apply(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        match name.as_str() {
            "SET" => {
                self.keys.insert(args[1].clone(), args[2].clone());
                b"+OK\r\n".to_vec()
            }
            "GET" => bulk(self.keys.get(&args[1])),
            "GETSET" => {
                let old = self.keys.insert(args[1].clone(), args[2].clone());
                bulk(old.as_ref())
            }
            "GETDEL" => bulk(self.keys.remove(&args[1]).as_ref()),
            "SETNX" => {
                if self.keys.contains_key(&args[1]) {
                    int(0)
                } else {
                    self.keys.insert(args[1].clone(), args[2].clone());
                    int(1)
                }
            }
            "INCR" | "INCRBY" => {
                let by: i64 = if name == "INCR" {
                    1
                } else {
                    std::str::from_utf8(&args[2]).unwrap().parse().unwrap()
                };
                let current = match self.keys.get(&args[1]) {
                    None => 0,
                    Some(v) => {
                        match std::str::from_utf8(v).ok().and_then(|s| s.parse::<i64>().ok()) {
                            Some(n) => n,
                            None => return NOT_AN_INTEGER.to_vec(),
                        }
                    }
                };
                let new = current + by;
                self.keys.insert(args[1].clone(), new.to_string().into_bytes());
                int(new)
            }
            "APPEND" => {
                let v = self.keys.entry(args[1].clone()).or_default();
                v.extend_from_slice(&args[2]);
                int(v.len() as i64)
            }
            "STRLEN" => int(self.keys.get(&args[1]).map_or(0, |v| v.len() as i64)),
            "EXISTS" => int(args[1..].iter().filter(|k| self.keys.contains_key(*k)).count() as i64),
            "MSET" => {
                for pair in args[1..].chunks(2) {
                    self.keys.insert(pair[0].clone(), pair[1].clone());
                }
                b"+OK\r\n".to_vec()
            }
            "MSETNX" => {
                if args[1..].chunks(2).any(|p| self.keys.contains_key(&p[0])) {
                    return int(0);
                }
                for pair in args[1..].chunks(2) {
                    self.keys.insert(pair[0].clone(), pair[1].clone());
                }
                int(1)
            }
            "DEL" => {
                let mut seen: Vec<&Vec<u8>> = args[1..].iter().collect();
                seen.sort();
                seen.dedup();
                int(seen.into_iter().filter(|k| self.keys.remove(*k).is_some()).count() as i64)
            }
            "MGET" => {
                let mut out = format!("*{}\r\n", args.len() - 1).into_bytes();
                for k in &args[1..] {
                    out.extend(bulk(self.keys.get(k)));
                }
                out
            }
            other => panic!("the model has no {other}"),
        }
    }
}

/// A random request over a few keys; some values are not integers, so INCRs fail on them.
fn random_request(rng: &mut Rng, keys: &[&str]) -> Vec<Vec<u8>> {
    let key = |rng: &mut Rng| keys[rng.below(keys.len() as u64) as usize].as_bytes().to_vec();
    let value = |rng: &mut Rng| match rng.below(4) {
        0 => b"text".to_vec(),
        _ => rng.below(100).to_string().into_bytes(),
    };
    let name: &[u8] = match rng.below(14) {
        0 | 1 => b"SET",
        2..=4 => b"INCR",
        5 => b"INCRBY",
        6 => b"APPEND",
        7 | 8 => b"GET",
        9 => b"MSET",
        10 => b"DEL",
        11 => b"GETSET",
        12 => b"SETNX",
        _ => match rng.below(5) {
            0 => b"MSETNX",
            1 => b"GETDEL",
            2 => b"STRLEN",
            3 => b"EXISTS",
            _ => b"MGET",
        },
    };
    let mut args = vec![name.to_vec()];
    match name {
        b"SET" | b"GETSET" | b"SETNX" => args.extend([key(rng), value(rng)]),
        b"INCRBY" => args.extend([key(rng), (rng.below(21) as i64 - 10).to_string().into_bytes()]),
        b"APPEND" => args.extend([key(rng), b"+".to_vec()]),
        b"MSET" | b"MSETNX" => {
            for _ in 0..1 + rng.below(3) {
                args.extend([key(rng), value(rng)]);
            }
        }
        b"DEL" | b"EXISTS" | b"MGET" => {
            for _ in 0..1 + rng.below(3) {
                args.push(key(rng));
            }
        }
        _ => args.push(key(rng)),
    }
    args
}

#[test]
fn mixed_pipelines_answer_as_a_model_of_redis_and_survive_a_restart() {
    let keys = ["a", "b", "c", "d", "e", "f"];
    let server =
        TestServer::start_with(Config { appendfsync: AppendFsync::Always, ..test_config() });
    let mut model = Model::default();
    let mut rng = Rng(0x5eed_1234_abcd);
    let mut s = server.raw();
    for round in 0..60 {
        let len = 1 + rng.below(300) as usize;
        let mut input = Vec::new();
        let mut expected = Vec::new();
        let mut trace = Vec::new();
        for _ in 0..len {
            let req = random_request(&mut rng, &keys);
            let args: Vec<&[u8]> = req.iter().map(Vec::as_slice).collect();
            input.extend(resp(&args));
            expected.extend(model.apply(&req));
            trace
                .push(req.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>().join(" "));
        }
        s.write_all(&input).unwrap();
        let got = read_exactly(&mut s, expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "round {round}, pipeline {trace:?}"
        );
    }
    drop(s);
    let dir = server.stop();
    let server = TestServer::start_in(dir, test_config());
    let mut c = server.client();
    for k in keys {
        let got: Option<Vec<u8>> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(got.as_ref(), model.keys.get(k.as_bytes()), "key {k} after the restart");
    }
}

fn read_exactly(s: &mut std::net::TcpStream, n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut got = vec![0u8; n];
    s.read_exact(&mut got).unwrap();
    got
}
