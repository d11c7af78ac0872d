//! The version log's disk space on a volume file: a new volume takes none for the ring beyond
//! what its first base is written into, a store that commits for a long time (trims and
//! wraps) holds about its live chain, and a volume whose mirrors were allocated whole (as
//! shale allocated them before) gives that storage back once reopened.

mod common;

use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use common::*;
use shale_io::FileOptions;
use shale_space::{LayoutOptions, Volume, VolumeOptions, volume_file};

/// Mirrors of 2 MiB: chunks of 64 KiB (`STORAGE_CHUNK_BYTES`), 32 of them per mirror.
const MIRROR_BYTES: u64 = 2 << 20;
const CHUNK: u64 = 64 << 10;

fn options() -> VolumeOptions {
    VolumeOptions {
        layout: LayoutOptions {
            slot_bytes: 4096,
            version_log_bytes: MIRROR_BYTES,
            wal_bytes: 8192,
        },
        initial_slots: 16,
        grow_slots_min: 16,
        engine: Some(shale_space::EngineKind::Lsm),
        ..VolumeOptions::default()
    }
}

fn scratch(name: &str) -> PathBuf {
    // Under the target directory, on the repository's file system: /tmp may be tmpfs.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("version_log_storage").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Bytes in `range` of the file that hold written data, by SEEK_DATA / SEEK_HOLE: a chunk
/// written and not given back shows up; a hole (or an allocated, never written range) does
/// not.
fn written_bytes(path: &Path, range: std::ops::Range<u64>) -> u64 {
    let file = std::fs::File::open(path).unwrap();
    let fd = file.as_raw_fd();
    let (mut pos, mut total) = (range.start, 0);
    while pos < range.end {
        // SAFETY: lseek only reads its integer arguments; the fd is open for the call.
        let data = unsafe { libc::lseek(fd, pos as i64, libc::SEEK_DATA) };
        if data < 0 || data as u64 >= range.end {
            break;
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) } as u64;
        total += hole.min(range.end) - data as u64;
        pos = hole;
    }
    total
}

fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn open_dir(dir: &Path) -> shale_space::Opened {
    Volume::open_path(dir, &options(), &FileOptions::default()).unwrap()
}

#[test]
fn the_version_log_holds_storage_for_its_live_chain_only() {
    let dir = scratch("live_chain");
    let opened = open_dir(&dir);
    let path = volume_file(&dir);
    let layout = opened.volume.layout();
    let mirrors = layout.version_log_offset..layout.wal_offset;
    let slots = u64::from(options().initial_slots) * layout.slot_bytes;
    // A new volume: the header, its slots, and in each mirror an anchor, the chunk of the
    // first base and the chunk ahead of it (and a block of slack for the file system);
    // mirrors allocated whole would be 4 MiB.
    let at_creation = allocated_bytes(&path);
    let bound = 8192 + slots + 2 * (4096 + 2 * CHUNK) + 4096;
    assert!(at_creation <= bound, "a new volume holds {at_creation} bytes (at most {bound})");
    assert_eq!(opened.volume.version_log_held_bytes(), 2 * CHUNK);

    // Commits enough to trim and wrap the ring several times.
    let record =
        run_workload(&opened.volume, 7, 3000, Committed { live: Default::default() }, 1, &|| 0);
    let state = opened.volume.log_state();
    // Objects take at least a 4 KiB sector each here: the ring was written over twice.
    assert!(
        state.trims_since_open >= 3 && state.next_lsn * 4096 > 2 * state.ring_bytes,
        "{state:?}"
    );
    let held = opened.volume.version_log_held_bytes();
    assert!(
        held <= state.used_bytes + 3 * CHUNK,
        "{held} held for a chain of {}",
        state.used_bytes
    );
    let written = written_bytes(&path, mirrors.clone());
    assert!(
        written <= 2 * (4096 + held),
        "{written} bytes of the mirrors hold data; {held} held in each"
    );
    assert!(written < MIRROR_BYTES, "the mirrors were written whole and never given back");
    drop(opened);

    let reopened = open_dir(&dir);
    check_recovered(&reopened, &record, u64::MAX, 1);
    reopened.volume.release_free_storage().unwrap();
    let state = reopened.volume.log_state();
    assert!(reopened.volume.version_log_held_bytes() <= state.used_bytes + 3 * CHUNK);
}

#[test]
fn a_reopened_volume_gives_back_mirrors_allocated_whole() {
    let dir = scratch("allocated_whole");
    let opened = open_dir(&dir);
    let path = volume_file(&dir);
    let layout = opened.volume.layout();
    let record =
        run_workload(&opened.volume, 3, 40, Committed { live: Default::default() }, 1, &|| 0);
    drop(opened);
    // What an older shale left: both mirrors allocated from end to end.
    let before = allocated_bytes(&path);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = (layout.wal_offset - layout.version_log_offset) as i64;
    // SAFETY: fallocate only reads its integer arguments; the fd is open for the call.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, layout.version_log_offset as i64, len) };
    assert_eq!(r, 0, "fallocate: {}", std::io::Error::last_os_error());
    drop(file);
    let whole = allocated_bytes(&path);
    assert!(whole >= before + MIRROR_BYTES, "{before} -> {whole}");

    let reopened = open_dir(&dir);
    check_recovered(&reopened, &record, u64::MAX, 1);
    assert_eq!(reopened.volume.version_log_held_bytes(), MIRROR_BYTES - 4096, "not known yet");
    reopened.volume.release_free_storage().unwrap();
    let held = reopened.volume.version_log_held_bytes();
    let used = reopened.volume.log_state().used_bytes;
    assert!(held <= used + 3 * CHUNK, "{held} held for a chain of {used}");
    let after = allocated_bytes(&path);
    assert!(
        after <= before + 2 * held,
        "{after} bytes after giving back ({before} before, {held} held)"
    );
    drop(reopened);
    check_recovered(&open_dir(&dir), &record, u64::MAX, 1);
}
