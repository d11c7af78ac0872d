//! Scenario: a device over a real file on ext4 is opened with O_DIRECT, so reads bypass the
//! page cache (the engine keeps its own cache), and with `direct: false` it is not.

mod common;

use std::path::Path;

use shale_io::{Backend, FileOptions, QueueExt, QueueOptions, open_device};

/// The open flags of this process's descriptor for `path`, from /proc/self/fdinfo.
fn open_flags_of(path: &Path) -> Vec<u32> {
    let mut flags = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(path) {
            continue;
        }
        let fd = entry.file_name().into_string().unwrap();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let line = info.lines().find(|l| l.starts_with("flags:")).unwrap();
        flags.push(u32::from_str_radix(line["flags:".len()..].trim(), 8).unwrap());
    }
    flags
}

#[test]
fn regular_file_on_ext4_is_opened_with_o_direct() {
    let dir = common::scratch_dir();
    for backend in [Backend::Auto, Backend::Uring, Backend::Pread] {
        let path = dir.path().join(format!("{backend:?}"));
        let opts =
            FileOptions { backend, direct: true, create_size: Some(1 << 20), create_sparse: None };
        let dev = open_device(&path, &opts).unwrap();
        let want = if backend == Backend::Pread { "pread" } else { "uring" };
        assert_eq!(dev.info().backend, want);
        let flags = open_flags_of(&path);
        assert_eq!(flags.len(), 1, "one descriptor per device");
        assert_ne!(flags[0] & libc::O_DIRECT as u32, 0, "{backend:?}: flags {:o}", flags[0]);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(0, common::pattern(4096, 3), false).unwrap();
        assert_eq!(&q.read_at(0, 4096).unwrap()[..], &common::pattern(4096, 3)[..]);
    }
    let path = dir.path().join("buffered");
    let opts = FileOptions { direct: false, create_size: Some(1 << 20), ..FileOptions::default() };
    let _dev = open_device(&path, &opts).unwrap();
    assert_eq!(open_flags_of(&path)[0] & libc::O_DIRECT as u32, 0);
}
