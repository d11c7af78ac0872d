//! Running the `shale` binary from the CLI's tests.

use std::process::Command;

/// Runs `shale ARGS...`; returns whether it succeeded, its stdout and its stderr.
pub fn shale(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shale")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
