//! The scripted commit scenario on real devices: a file through io_uring with O_DIRECT, a file
//! through pread/pwrite, and a loop device (`losetup --direct-io=on`, as root). Without
//! io_uring or root they print that they skipped, and fail where `SHALE_REQUIRE_PREREQS=1`
//! (`test.sh`) says the machine has them (`shale_testkit::prerequisite`).
//! Each runs rounds of commits (with wraps and trims of a tiny version log), reopens the
//! volume after every round and checks the committed state and every live extent's data.
//! Power cuts cannot be injected into real hardware; crash images come from the simulated
//! device (`crash_enumeration.rs`).

mod common;

use std::path::{Path, PathBuf};

use common::*;
use shale_io::{Backend, DeviceRef, FileOptions, open_device};

const ROUNDS: u64 = 6;
const COMMITS_PER_ROUND: u64 = 40;

fn scratch(name: &str) -> PathBuf {
    // Under the target directory, on the repository's file system: /tmp may be tmpfs, which
    // has no O_DIRECT.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real_devices");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs the rounds; `reopen` opens the device afresh each time.
fn rounds(reopen: &dyn Fn() -> DeviceRef) -> u64 {
    let layout = tiny_layout();
    let mut start = Committed { live: Default::default() };
    let mut next = 1;
    for round in 0..ROUNDS {
        let opened = open(reopen(), &layout);
        assert_eq!(opened.created, round == 0);
        if round > 0 {
            assert_eq!(recovered_commit(&opened), next - 1);
        }
        let record = run_workload(&opened.volume, round, COMMITS_PER_ROUND, start, next, &|| 0);
        drop(opened);
        let reopened = open(reopen(), &layout);
        check_recovered(&reopened, &record, u64::MAX, next);
        start = record.states.last().unwrap().clone();
        next += COMMITS_PER_ROUND;
    }
    next - 1
}

fn file_device(path: &Path, backend: Backend) -> DeviceRef {
    let opts = FileOptions { backend, create_size: Some(4 << 20), ..FileOptions::default() };
    open_device(path, &opts).expect("open file device")
}

#[test]
fn scenario_on_a_file_through_io_uring_with_o_direct() {
    let path = scratch("uring.vol");
    let probe = file_device(&path, Backend::Auto);
    if probe.info().backend != "uring" {
        let why = format!("the Auto backend chose {}", probe.info().backend);
        shale_testkit::prerequisite::missing("io_uring with O_DIRECT", why);
        return;
    }
    drop(probe);
    let n = rounds(&|| file_device(&path, Backend::Uring));
    println!("io_uring + O_DIRECT file: {n} commits, reopened {ROUNDS} times, all checked");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn scenario_on_a_file_through_pread() {
    let path = scratch("pread.vol");
    let n = rounds(&|| file_device(&path, Backend::Pread));
    println!("pread file: {n} commits, reopened {ROUNDS} times, all checked");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn scenario_on_a_loop_device_with_direct_io() {
    let backing = scratch("loop.img");
    std::fs::File::create(&backing).unwrap().set_len(8 << 20).unwrap();
    let attached = shale_testkit::LoopDevice::attach(&backing);
    let Some(lo) = shale_testkit::prerequisite::require("a loop device", attached) else { return };
    let path = lo.path().to_path_buf();
    let dev = open_device(&path, &FileOptions::default()).expect("open loop device");
    let info = dev.info();
    assert!(!info.growable, "a block device cannot grow");
    assert_eq!(info.capacity, 8 << 20);
    drop(dev);
    let n = rounds(&|| open_device(&path, &FileOptions::default()).expect("open loop device"));
    println!(
        "loop device {} ({}): {n} commits, reopened {ROUNDS} times, all checked",
        path.display(),
        info.backend
    );
    drop(lo);
    std::fs::remove_file(&backing).unwrap();
}

/// The room a tier has for new extents (`Volume::tier_room`, what ADOC's tuner bounds its
/// batch by): the file system's free space for a volume file, which grows; the free slots of
/// a loop device, which cannot; no bound for a growable memory device.
#[test]
fn room_for_new_extents_on_a_file_a_loop_device_and_memory() {
    use shale_space::tier::Tier;
    let layout = tiny_layout();
    let path = scratch("room.vol");
    let opened = open(file_device(&path, Backend::Pread), &layout);
    let room = opened.volume.tier_room(Tier::Fast).expect("a file's file system tells its room");
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs only writes into `st`; `c` is a valid C string.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(rc, 0);
    let fs_free = st.f_bavail * st.f_frsize;
    // Other processes share the file system: within 64 MiB of each other.
    assert!(room.abs_diff(fs_free) < 64 << 20, "room {room}, file system free {fs_free}");
    drop(opened);
    std::fs::remove_file(&path).unwrap();

    let opened = open(arc(shale_io::MemoryDevice::new(4 << 20, 4096).unwrap()), &layout);
    assert_eq!(opened.volume.tier_room(Tier::Fast), None, "memory grows without a known bound");
    assert_eq!(opened.volume.tier_room(Tier::Capacity), None, "no capacity tier");
    drop(opened);

    let backing = scratch("room-loop.img");
    std::fs::File::create(&backing).unwrap().set_len(8 << 20).unwrap();
    let attached = shale_testkit::LoopDevice::attach(&backing);
    let Some(lo) = shale_testkit::prerequisite::require("a loop device", attached) else { return };
    let dev = open_device(lo.path(), &FileOptions::default()).expect("open loop device");
    let opened = open(dev, &layout);
    let v = &opened.volume;
    let slot = v.layout().slot_bytes;
    let free = u64::from(v.tier_slot_usage(Tier::Fast).free);
    assert_eq!(v.tier_room(Tier::Fast), Some(free * slot));
    let e = v.allocate(3).unwrap();
    assert_eq!(v.tier_room(Tier::Fast), Some((free - 3) * slot));
    v.release(e);
    assert_eq!(v.tier_room(Tier::Fast), Some(free * slot));
    drop(opened);
    drop(lo);
    std::fs::remove_file(&backing).unwrap();
}
