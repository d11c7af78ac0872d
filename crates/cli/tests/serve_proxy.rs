//! Scale-out behind an existing proxy (issue #13 part 2): three `shale serve` instances behind
//! twemproxy (Debian's `nutcracker`) with ketama consistent hashing. Keys written through the
//! proxy spread over all three; with one instance SIGKILLed, its keys answer an error through
//! the proxy and the others' keys are served; restarted on its store, every key is back.
//! Runs where `nutcracker` is installed (`apt-get install nutcracker`; `bench/serve.sh` and
//! `test.sh` install it as root), and says it skipped otherwise, or fails where
//! `SHALE_REQUIRE_PREREQS=1` (`shale_testkit::prerequisite`). Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: usize = 300;

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(db: &Path, port: u16) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db"])
        .arg(db)
        .args(["--port", &port.to_string(), "--appendfsync", "always"])
        .args(["--write_buffer_size", "1048576"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc(child);
    wait_for(port);
    p
}

/// Waits until something accepts connections on `port` (at most 30 s).
fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One reply: `Ok(Some(bytes))` for a bulk or simple string, `Ok(None)` for a null,
/// `Err(message)` for an error reply.
fn reply(r: &mut BufReader<TcpStream>) -> Result<Option<Vec<u8>>, String> {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let body = line.trim_end();
    match body.as_bytes().first() {
        Some(b'+') => Ok(Some(body.as_bytes()[1..].to_vec())),
        Some(b'-') => Err(body[1..].to_string()),
        Some(b'$') => {
            let len: i64 = body[1..].parse().unwrap();
            if len < 0 {
                return Ok(None);
            }
            let mut v = vec![0u8; len as usize + 2];
            r.read_exact(&mut v).unwrap();
            v.truncate(len as usize);
            Ok(Some(v))
        }
        _ => panic!("unexpected reply {line:?}"),
    }
}

/// Sends `commands` pipelined and returns their replies.
fn pipeline(port: u16, commands: &[Vec<u8>]) -> Vec<Result<Option<Vec<u8>>, String>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    s.write_all(&commands.concat()).unwrap();
    commands.iter().map(|_| reply(&mut r)).collect()
}

fn gets() -> Vec<Vec<u8>> {
    (0..KEYS).map(|i| resp(&[b"GET", format!("proxied:{i}").as_bytes()])).collect()
}

#[test]
fn three_instances_behind_twemproxy_survive_one_being_killed() {
    if !shale_testkit::prerequisite::program("nutcracker", "apt-get install nutcracker") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let [p0, p1, p2, proxy_port] = shale_testkit::ports::free_ports();
    let ports = [p0, p1, p2];
    let mut servers: Vec<Proc> = ports
        .iter()
        .enumerate()
        .map(|(i, &p)| serve(&dir.path().join(format!("s{i}")), p))
        .collect();
    let config = dir.path().join("nutcracker.yml");
    let mut yml = format!(
        "shale:\n  listen: 127.0.0.1:{proxy_port}\n  hash: murmur\n  distribution: ketama\n  \
         redis: true\n  auto_eject_hosts: false\n  timeout: 5000\n  servers:\n"
    );
    for p in ports {
        yml.push_str(&format!("   - 127.0.0.1:{p}:1\n"));
    }
    std::fs::write(&config, yml).unwrap();
    let _proxy = Proc(
        Command::new("nutcracker")
            .arg("-c")
            .arg(&config)
            .arg("-o")
            .arg(dir.path().join("nutcracker.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(proxy_port);

    let sets: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| {
            resp(&[b"SET", format!("proxied:{i}").as_bytes(), format!("value-{i}").as_bytes()])
        })
        .collect();
    assert!(pipeline(proxy_port, &sets).iter().all(|r| r == &Ok(Some(b"OK".to_vec()))));
    // Every instance got a share, read directly.
    let per: Vec<usize> = ports
        .iter()
        .map(|&p| pipeline(p, &gets()).iter().filter(|r| matches!(r, Ok(Some(_)))).count())
        .collect();
    assert_eq!(per.iter().sum::<usize>(), KEYS, "{per:?}");
    assert!(per.iter().all(|&n| n > KEYS / 10), "uneven spread {per:?}");

    // One instance killed: its keys fail through the proxy, the others' are served.
    let victim = 1;
    servers.remove(victim); // dropped: SIGKILL
    let during = pipeline(proxy_port, &gets());
    let ok = during.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
    let failed = during.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, per[victim], "the dead instance's keys answer errors");
    assert_eq!(ok, KEYS - per[victim], "the live instances' keys are served");

    // Restarted on its store (appendfsync always: every acknowledged SET is there).
    servers.insert(victim, serve(&dir.path().join(format!("s{victim}")), ports[victim]));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let after = pipeline(proxy_port, &gets());
        let ok = after
            .iter()
            .enumerate()
            .filter(|(i, r)| r == &&Ok(Some(format!("value-{i}").into_bytes())))
            .count();
        if ok == KEYS {
            break;
        }
        // twemproxy reconnects on its own schedule.
        assert!(Instant::now() < deadline, "{ok} of {KEYS} keys back after the restart");
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("{per:?} keys per instance; {} failed while instance {victim} was down", per[victim]);
}
