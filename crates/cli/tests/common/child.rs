//! Running the `shale` binary as a child with a time limit, for the tests that feed it bad
//! input: a hang fails the test (after killing the child) instead of stalling the suite.
#![allow(dead_code)] // each test binary uses its own part of it

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a child may run before it counts as hung.
pub const HANG_LIMIT: Duration = Duration::from_secs(30);

/// How a child ended.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code, `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// Fails the test if the child panicked (Rust's panic message or exit status 101) or was
    /// killed by a signal other than SIGPIPE.
    pub fn assert_no_panic(&self, what: &str) {
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "{what}: panic text on stderr:\n{}",
            self.stderr
        );
        assert_ne!(self.code, Some(101), "{what}: exit 101 (a panic)\n{}", self.stderr);
        assert!(
            self.signal.is_none() || self.signal == Some(libc::SIGPIPE),
            "{what}: killed by signal {:?}\n{}",
            self.signal,
            self.stderr
        );
    }

    /// Fails the test unless the child exited with status 1 and named `needle` on stderr.
    pub fn assert_refused(&self, what: &str, needle: &str) {
        self.assert_no_panic(what);
        assert_eq!(self.code, Some(1), "{what}: exit status\nstderr:\n{}", self.stderr);
        assert!(
            self.stderr.contains(needle),
            "{what}: stderr should name {needle:?}:\n{}",
            self.stderr
        );
    }

    /// Fails the test unless the child exited with status 0.
    pub fn assert_ok(&self, what: &str) {
        self.assert_no_panic(what);
        assert_eq!(self.code, Some(0), "{what}: exit status\nstderr:\n{}", self.stderr);
    }
}

/// Runs `shale ARGS...` with stdin closed; fails the test if it runs past `HANG_LIMIT`.
pub fn run(args: &[&str]) -> Outcome {
    run_in(args, None)
}

/// As [`run`], in the working directory `dir` when given.
pub fn run_in(args: &[&str], dir: Option<&Path>) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let child = cmd.spawn().unwrap();
    wait(child, &args.join(" "))
}

/// Waits for `child` up to `HANG_LIMIT`, collecting its output.
pub fn wait(mut child: Child, what: &str) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut s);
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`shale {what}` hung: killed after {HANG_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A file's bytes, to compare before and after (`None` when it cannot be read).
pub fn bytes(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path for the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// Pseudo-random bytes (xorshift; no store header could be among them), for foreign files.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
