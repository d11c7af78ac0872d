//! Scenario: a device on tmpfs (/dev/shm) under `Backend::Auto`.
//!
//! Older kernels refuse O_DIRECT on tmpfs with EINVAL; there Auto must fall back to pread
//! without O_DIRECT and log exactly one warning saying why. Since Linux 6.6 tmpfs accepts
//! O_DIRECT, and then Auto must serve the file with io_uring and log nothing. Either way the
//! device must work. (The EINVAL path itself is also unit-tested in file.rs with an injected
//! error, so it is covered on every kernel.)

use std::os::unix::fs::OpenOptionsExt;
use std::sync::Mutex;

use shale_io::{FileOptions, QueueExt, QueueOptions, open_device};

static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        LINES.lock().unwrap().push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

fn tmpfs_accepts_o_direct(dir: &std::path::Path) -> bool {
    let probe = dir.join("probe");
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe);
    let _ = std::fs::remove_file(&probe);
    match result {
        Ok(_) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => false,
        Err(e) => panic!("probing O_DIRECT on tmpfs: {e}"),
    }
}

#[test]
fn tmpfs_device_works_and_falls_back_only_when_o_direct_is_refused() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let accepts = tmpfs_accepts_o_direct(dir.path());
    let opts = FileOptions { create_size: Some(1 << 20), ..FileOptions::default() };
    let dev = open_device(&dir.path().join("dev"), &opts).unwrap();
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    q.write_at(8192, shale_io::AlignedBuf::padded_copy(b"on tmpfs", 4096), true).unwrap();
    assert_eq!(&q.read_at(8192, 4096).unwrap()[..8], b"on tmpfs");

    let warnings: Vec<String> = LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|(level, _)| *level == log::Level::Warn)
        .map(|(_, line)| line.clone())
        .collect();
    if accepts {
        println!("this kernel's tmpfs accepts O_DIRECT: no fallback expected");
        assert_eq!(dev.info().backend, "uring");
        assert!(warnings.is_empty(), "{warnings:?}");
    } else {
        assert_eq!(dev.info().backend, "pread");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("O_DIRECT"), "{}", warnings[0]);
    }
}
