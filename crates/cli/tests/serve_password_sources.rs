//! The password of `shale serve` from a file (`--requirepass_file`) or the environment
//! (`SHALE_REQUIREPASS`): clients must AUTH with it, and it is not in the process's command
//! line (what `ps` shows).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn request(s: &mut UnixStream, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Starts `shale serve` on a Unix socket in `dir` with `extra` flags and `env`; returns once
/// it serves, with its stderr so far.
fn start(dir: &std::path::Path, extra: &[&str], env: Option<&str>) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale"));
    cmd.args(["serve", "--db"]).arg(dir.join("db")).args(["--port", "0", "--unixsocket"]);
    cmd.arg(dir.join("s.sock")).args(extra).env_remove("SHALE_REQUIREPASS");
    if let Some(pw) = env {
        cmd.env("SHALE_REQUIREPASS", pw);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("maxclients") {
        assert!(out.read_line(&mut seen).unwrap() > 0, "ended early: {seen}");
    }
    // Keep reading, so the server's lines at shutdown find a reader.
    std::thread::spawn(move || for _ in out.lines() {});
    (child, seen)
}

fn stop(mut child: Child) {
    // SAFETY: kill sends SIGTERM to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        assert!(Instant::now() < deadline, "no exit within 60 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_auth(dir: &std::path::Path, child: &Child, password: &str) {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(
        !cmdline.windows(password.len()).any(|w| w == password.as_bytes()),
        "the password is in the command line"
    );
    let mut s = UnixStream::connect(dir.join("s.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut s, &["GET", "k"]), "-NOAUTH Authentication required.\r\n");
    assert!(request(&mut s, &["AUTH", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(request(&mut s, &["AUTH", password]), "+OK\r\n");
    assert_eq!(request(&mut s, &["SET", "k", "v"]), "+OK\r\n");
}

#[test]
fn from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    // The first line; its newline is not part of it.
    std::fs::write(&file, "correct-horse-battery\nignored second line\n").unwrap();
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&file, private).unwrap();
    let (child, _) = start(dir.path(), &["--requirepass_file", file.to_str().unwrap()], None);
    check_auth(dir.path(), &child, "correct-horse-battery");
    stop(child);
}

#[test]
fn from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = start(dir.path(), &[], Some("staple-of-the-env"));
    check_auth(dir.path(), &child, "staple-of-the-env");
    stop(child);
}
