//! What a test needs from the machine beyond the build: root, loop devices, io_uring with
//! O_DIRECT, mounts, a program such as `redis-cli` or `nutcracker`.
//!
//! A skip must never count as a pass where the prerequisite was meant to be there. So a test
//! that finds its prerequisite missing calls [`missing`] (or [`require`]), which:
//! - with `SHALE_REQUIRE_PREREQS=1` in the environment (`test.sh` sets it, and installs or
//!   checks what the tests need first), panics: the test fails and says what is missing;
//! - otherwise prints `skipped: <what> (<why>)` and lets the test return, so that
//!   `cargo test` on a laptop without root still runs everything else.
//!
//! The variable is read once per call: a test binary run by hand with it unset behaves as
//! before, one run by CI fails on the first missing prerequisite.

use std::fmt::Display;
use std::process::Command;

/// The environment variable that makes a missing prerequisite fail its test.
pub const REQUIRE_ENV: &str = "SHALE_REQUIRE_PREREQS";

/// Whether this run requires every prerequisite (`SHALE_REQUIRE_PREREQS=1`).
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// Reports that the test cannot run here because `what` is missing, for the reason `why`.
/// The caller returns afterwards (its test then passes as a printed skip).
///
/// # Panics
/// When the run requires every prerequisite ([`required`]): the test fails instead.
pub fn missing(what: &str, why: impl Display) {
    if required() {
        panic!(
            "prerequisite missing: {what} ({why}); {REQUIRE_ENV}=1 says it must be here \
             (test.sh sets it; unset it to let the test skip)"
        );
    }
    println!("skipped: {what} ({why}); with {REQUIRE_ENV}=1 this fails");
}

/// `Some(value)` when `found` holds one; otherwise reports `what` as [`missing`] and returns
/// `None`, for the test to return on.
///
/// # Panics
/// As [`missing`].
pub fn require<T, E: Display>(what: &str, found: Result<T, E>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(why) => {
            missing(what, why);
            None
        }
    }
}

/// Whether `program` runs here (`program --version` exits 0); otherwise reports it as
/// [`missing`], naming `install` as the way to get it.
///
/// # Panics
/// As [`missing`].
pub fn program(program: &str, install: &str) -> bool {
    let found = match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("`{program} --version` exited with {}", out.status)),
        Err(e) => Err(format!("cannot run {program}: {e}; install it with {install}")),
    };
    require(program, found).is_some()
}
