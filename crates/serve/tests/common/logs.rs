//! The server's log lines, captured in memory by a logger of the test binary's own, for the
//! tests that assert on what the server logged (the library logs through the `log` crate;
//! the binary's logger is `shale`'s, which a test of the library does not have).
#![allow(dead_code)] // each test binary uses its own part of it

use std::sync::{Mutex, Once};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {}", record.level(), record.args());
            LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }

    fn flush(&self) {}
}

/// Installs the capturing logger (once per test binary; tests running at once share it, so
/// each looks for lines naming its own servers).
pub fn capture() {
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// The lines logged so far that contain `needle`.
pub fn lines_with(needle: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}
