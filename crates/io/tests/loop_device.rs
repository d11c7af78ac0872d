//! Scenario: a raw block device, through a loop device with direct I/O. Needs root (losetup);
//! skipped with a printed reason otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use shale_io::{Backend, Error, FileOptions, QueueExt, QueueOptions, open_device};

/// Detaches the loop device even when an assertion fails.
struct LoopDevice(PathBuf);

impl LoopDevice {
    fn attach(file: &Path) -> Result<LoopDevice, String> {
        let out = Command::new("losetup")
            .args(["--direct-io=on", "--find", "--show"])
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!("losetup failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(LoopDevice(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let status = Command::new("losetup").arg("--detach").arg(&self.0).status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("could not detach {}: {status:?}", self.0.display());
        }
    }
}

#[test]
fn block_device_round_trip_and_geometry() {
    // SAFETY: geteuid has no preconditions and only reads process state.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: attaching a loop device needs root");
        return;
    }
    let dir = common::scratch_dir();
    let backing = dir.path().join("backing");
    std::fs::File::create(&backing).unwrap().set_len(16 << 20).unwrap();
    let lo = match LoopDevice::attach(&backing) {
        Ok(lo) => lo,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    for backend in [Backend::Uring, Backend::Pread] {
        let dev = open_device(&lo.0, &FileOptions { backend, ..FileOptions::default() }).unwrap();
        let info = dev.info();
        assert_eq!(info.capacity, 16 << 20);
        assert!(matches!(info.block_size, 512 | 4096), "{info:?}");
        assert!(!info.growable);
        assert!(matches!(dev.grow(32 << 20), Err(Error::Unsupported(_))));
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let seed = backend as u64;
        q.write_at((16 << 20) - 65536, common::pattern(65536, seed), true).unwrap();
        q.flush().unwrap();
        assert_eq!(
            &q.read_at((16 << 20) - 65536, 65536).unwrap()[..],
            &common::pattern(65536, seed)[..]
        );
        assert!(matches!(q.read_at(16 << 20, 4096), Err(Error::InvalidArgument(_))));
    }
    drop(lo);
    // With direct I/O on the loop device the bytes are in the backing file already.
    let bytes = std::fs::read(&backing).unwrap();
    let seed = Backend::Pread as u64;
    assert_eq!(&bytes[(16 << 20) - 65536..], &common::pattern(65536, seed)[..]);
}
