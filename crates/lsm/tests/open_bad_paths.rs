//! `Db::open` and `Db::open_read_only` against every kind of path (P6): missing, empty file,
//! foreign file, text file, a directory of other files, symlinks to each, a store in use
//! through each of its names, a store of a newer format, a read-only mount, a full file
//! system, a FIFO, a character device, a path too long. Each call runs in a thread with a
//! timeout (a hang fails the test), must give a typed error or the right result (never a
//! panic), and must leave every file that was there byte for byte as it was, unless creating a
//! store was the call's job.
//!
//! Then one test per misleading message of issue #9, item 8: each error names the path and
//! the operation, and keeps the operating system's error as its source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

mod common;

use shale_lsm::{Db, Error, Options};

/// Longest a single open may take before it counts as a hang.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    ReadWrite,
    ReadOnly,
}

/// What an open must give.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// An open store (a new one for a read-write open of a missing path or a directory).
    Opens,
    InUse,
    /// `Error::InvalidArgument` whose message contains this.
    Invalid(&'static str),
    Foreign,
    NewerFormat,
    /// `Error::Io` for a path that does not exist.
    NotFound,
    /// `Error::Io` holding the OS error with this errno.
    Os(i32),
    ReadOnly,
    NoSpace,
}

fn options() -> Options {
    Options::small_for_tests()
}

/// Opens `path` in a thread; the result, or a panic message, or a timeout.
fn open_with_timeout(path: &Path, mode: Mode) -> Result<Result<Db, Error>, String> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let r = match mode {
            Mode::ReadWrite => Db::open(&p, options()),
            Mode::ReadOnly => Db::open_read_only(&p, options()),
        };
        let _ = tx.send(r);
    });
    match rx.recv_timeout(OPEN_TIMEOUT) {
        Ok(r) => Ok(r),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("hung for {OPEN_TIMEOUT:?}")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".to_string()),
    }
}

fn errno_of(e: &Error) -> Option<i32> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        source = s.source();
    }
    None
}

fn check(what: &str, got: Result<Db, Error>, want: Expect) {
    let ok = match (&got, want) {
        (Ok(_), Expect::Opens) => true,
        (Err(Error::InUse(_)), Expect::InUse) => true,
        (Err(Error::InvalidArgument(m)), Expect::Invalid(s)) => m.contains(s),
        (Err(Error::Space(shale_space::Error::Foreign { .. })), Expect::Foreign) => true,
        (Err(Error::Space(shale_space::Error::NewerFormat { .. })), Expect::NewerFormat) => true,
        (Err(e @ Error::Io(_)), Expect::NotFound) => {
            errno_of(e) == Some(libc::ENOENT) && e.to_string().contains("does not exist")
        }
        (Err(e @ Error::Io(_)), Expect::Os(errno)) => errno_of(e) == Some(errno),
        (Err(Error::ReadOnly(_)), Expect::ReadOnly) => true,
        (Err(Error::NoSpace(_)), Expect::NoSpace) => true,
        _ => false,
    };
    match got {
        Ok(db) => {
            assert!(ok, "{what}: opened, expected {want:?}");
            drop(db);
        }
        Err(e) => assert!(ok, "{what}: got {e:?} ({e}), expected {want:?}"),
    }
}

/// Every regular file under `dir` (symlinks not followed) with its length and a hash of its
/// bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, (usize, u64)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
        if ft.is_dir() {
            out.extend(contents(&p));
        } else if ft.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&bytes, &mut h);
            out.insert(p.clone(), (bytes.len(), std::hash::Hasher::finish(&h)));
        }
    }
    out
}

/// Runs one case both ways; the files under `root` must not change (a read-write open
/// that is expected to create a store is checked by the caller instead).
fn case(root: &Path, name: &str, path: &Path, rw: Expect, ro: Expect) {
    for (mode, want) in [(Mode::ReadOnly, ro), (Mode::ReadWrite, rw)] {
        let before = contents(root);
        let what = format!("{name} ({mode:?}, {})", path.display());
        match open_with_timeout(path, mode) {
            Ok(got) => check(&what, got, want),
            Err(why) => panic!("{what}: {why}"),
        }
        if !matches!((mode, want), (Mode::ReadWrite, Expect::Opens)) {
            assert_eq!(contents(root), before, "{what}: files changed");
        }
    }
}

/// A store (closed) at `dir` with a key in it.
fn make_store(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
}

fn link(root: &Path, name: &str, to: &Path) -> PathBuf {
    let l = root.join(name);
    std::os::unix::fs::symlink(to, &l).unwrap();
    l
}

#[test]
fn every_kind_of_bad_path_gets_a_typed_error_and_changes_nothing() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let missing = root.join("missing");
    case(
        root,
        "missing, under a missing parent",
        &missing.join("x"),
        Expect::Opens,
        Expect::NotFound,
    );
    let empty = root.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let foreign = root.join("foreign");
    std::fs::write(&foreign, vec![0x5a; 64 << 10]).unwrap();
    let text = root.join("text");
    std::fs::write(&text, b"not a store, just 32 bytes text\n").unwrap();
    let others = root.join("others");
    std::fs::create_dir(&others).unwrap();
    std::fs::write(others.join("notes.txt"), b"keep me").unwrap();
    let fifo = root.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let long = root.join("n".repeat(300));
    let very_long = PathBuf::from(format!("{}/{}", root.display(), "d/".repeat(3000)));
    let files: Vec<(&str, PathBuf, Expect, Expect)> = vec![
        ("empty file", empty, Expect::Invalid("is 0 bytes"), Expect::Invalid("is 0 bytes")),
        ("foreign file", foreign, Expect::Foreign, Expect::Foreign),
        ("text file", text, Expect::Invalid("is 32 bytes"), Expect::Invalid("is 32 bytes")),
        ("FIFO", fifo, Expect::Invalid("a FIFO"), Expect::Invalid("a FIFO")),
        (
            "character device",
            "/dev/null".into(),
            Expect::Invalid("a character device"),
            Expect::Invalid("a character device"),
        ),
        ("name too long", long, Expect::Os(libc::ENAMETOOLONG), Expect::Os(libc::ENAMETOOLONG)),
        (
            "path too long",
            very_long,
            Expect::Os(libc::ENAMETOOLONG),
            Expect::Os(libc::ENAMETOOLONG),
        ),
    ];
    for (i, (name, path, rw, ro)) in files.iter().enumerate() {
        case(root, name, path, *rw, *ro);
        if !name.contains("long") {
            let l = link(root, &format!("link{i}"), path);
            case(root, &format!("symlink to {name}"), &l, *rw, *ro);
        }
    }
    // A directory of other files: read-only finds no store; read-write makes one beside them.
    let others2 = root.join("others2");
    std::fs::create_dir(&others2).unwrap();
    std::fs::write(others2.join("notes.txt"), b"keep me").unwrap();
    let to_others2 = link(root, "link-others", &others2);
    for p in [&others, &to_others2] {
        case(root, "directory of other files", p, Expect::Opens, Expect::Invalid("holds no store"));
    }
    for d in [&others, &others2] {
        assert_eq!(std::fs::read(d.join("notes.txt")).unwrap(), b"keep me");
    }
    // A dangling symlink: nothing there to open or to make a store in.
    let dangling = link(root, "dangling", &root.join("nowhere/at/all"));
    case(root, "dangling symlink", &dangling, Expect::NotFound, Expect::NotFound);
}

#[test]
fn a_store_in_use_is_refused_through_each_name_and_a_newer_one_is_refused() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = root.join("store");
    make_store(&store);
    let volume = store.join(shale_space::VOLUME_FILE_NAME);
    let names = [
        store.clone(),
        volume.clone(),
        link(root, "to-store", &store),
        link(root, "to-volume", &volume),
    ];
    // Each name opens the store when it is free, read-write and read-only.
    for n in &names {
        case(root, "free store", n, Expect::Opens, Expect::Opens);
    }
    let db = Db::open(&store, options()).unwrap();
    for n in &names {
        case(root, "store open for writing", n, Expect::InUse, Expect::InUse);
    }
    drop(db);
    let reader = Db::open_read_only(&volume, options()).unwrap();
    for n in &names {
        case(root, "store open for reading", n, Expect::InUse, Expect::Opens);
    }
    drop(reader);
    // A newer format: the header's format version (byte 12 of each copy) bumped in a copy.
    let newer = root.join("newer");
    std::fs::create_dir(&newer).unwrap();
    let mut image = std::fs::read(&volume).unwrap();
    for copy in [0usize, 4096] {
        image[copy + 12..copy + 16]
            .copy_from_slice(&(shale_space::header::FORMAT_VERSION + 1).to_le_bytes());
    }
    std::fs::write(newer.join(shale_space::VOLUME_FILE_NAME), &image).unwrap();
    case(root, "newer format", &newer, Expect::NewerFormat, Expect::NewerFormat);
    case(
        root,
        "newer format, volume file",
        &newer.join(shale_space::VOLUME_FILE_NAME),
        Expect::NewerFormat,
        Expect::NewerFormat,
    );
}

/// A mount for a test, lazily unmounted when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `mount <args> <at>`, or `None` where it failed (not root): a missing prerequisite
/// (`shale_testkit::prerequisite`).
fn mount(args: &[&str], at: &Path) -> Option<Mount> {
    let status = Command::new("mount").args(args).arg(at).status();
    let found = match status {
        Ok(s) if s.success() => Ok(Mount(at.to_path_buf())),
        other => Err(format!("mount {args:?} {}: {other:?} (not root?)", at.display())),
    };
    shale_testkit::prerequisite::require("mount", found)
}

#[test]
fn a_read_only_mount_and_a_full_file_system() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = root.join("store");
    make_store(&store);
    let ro = root.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let Some(_ro_mount) = mount(&["--bind", store.to_str().unwrap()], &ro) else { return };
    if mount(&["-o", "remount,bind,ro"], &ro).map(std::mem::forget).is_none() {
        return;
    }
    case(root, "read-only mount", &ro, Expect::ReadOnly, Expect::Opens);
    case(
        root,
        "read-only mount, volume file",
        &ro.join("volume.shale"),
        Expect::ReadOnly,
        Expect::Opens,
    );
    case(
        root,
        "read-only mount, missing store",
        &ro.join("nothing"),
        Expect::Os(libc::EROFS),
        Expect::NotFound,
    );
    // A full file system: a store that is there opens both ways (it needs no new space to
    // recover), and a new one is refused for want of space.
    let full = root.join("full");
    std::fs::create_dir(&full).unwrap();
    let Some(_full_mount) = mount(&["-t", "tmpfs", "-o", "size=16m", "tmpfs"], &full) else {
        return;
    };
    make_store(&full.join("store"));
    std::fs::create_dir(full.join("new")).unwrap();
    let mut filler = std::fs::File::create(full.join("filler")).unwrap();
    let mut fill = || {
        for chunk in [1 << 20, 4 << 10, 512] {
            while std::io::Write::write_all(&mut filler, &vec![1u8; chunk]).is_ok() {}
        }
    };
    fill();
    case(root, "full file system, store", &full.join("store"), Expect::Opens, Expect::Opens);
    // Opening the store gave back the storage of its free slots: fill that too.
    fill();
    case(
        root,
        "full file system, new store",
        &full.join("new"),
        Expect::NoSpace,
        Expect::Invalid("holds no store"),
    );
}

// One test per message of issue #9, item 8.

/// Was "a device of 0 bytes": sizes were rounded down to whole 4 KiB blocks before printing.
#[test]
fn a_32_byte_file_was_called_a_device_of_0_bytes() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("small");
    std::fs::write(&f, [b'x'; 32]).unwrap();
    for r in [Db::open(&f, options()), Db::open_read_only(&f, options())] {
        let e = r.err().expect("a 32-byte file is no store");
        let msg = e.to_string();
        assert!(msg.contains("is 32 bytes"), "{msg}");
        assert!(msg.contains("8192 bytes"), "the minimum: {msg}");
        assert!(msg.contains(&f.display().to_string()), "{msg}");
    }
}

/// Was "device read failed at byte offset 0".
#[test]
fn a_missing_path_was_called_a_failed_device_read() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("nothing-here");
    let mut opts = options();
    opts.volume.create_if_blank = false;
    for r in [Db::open(&p, opts), Db::open_read_only(&p, options())] {
        let e = r.err().expect("nothing to open");
        let msg = e.to_string();
        assert!(msg.contains(&format!("{} does not exist", p.display())), "{msg}");
        assert!(!msg.contains("byte offset"), "{msg}");
        assert_eq!(errno_of(&e), Some(libc::ENOENT), "the OS error is the source: {e:?}");
    }
}

/// Was "device write failed at byte offset 0".
#[test]
fn a_failed_mkdir_was_called_a_failed_device_write() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let p = file.join("store");
    let e = Db::open(&p, options()).err().expect("no directory under a file");
    let msg = e.to_string();
    assert!(msg.contains(&format!("cannot create the directory {}", p.display())), "{msg}");
    assert!(!msg.contains("byte offset"), "{msg}");
    assert_eq!(errno_of(&e), Some(libc::ENOTDIR), "{e:?}");
}

/// Was "device write failed at byte offset 0": the lock's open of the volume file failed.
#[test]
fn a_failed_lock_file_open_was_called_a_failed_device_write() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    std::fs::create_dir(&dir).unwrap();
    // The volume file's name leads nowhere that can be created.
    let target = tmp.path().join("no/such/dir/volume");
    std::os::unix::fs::symlink(&target, dir.join(shale_space::VOLUME_FILE_NAME)).unwrap();
    let e = Db::open(&dir, options()).err().expect("the lock cannot be opened");
    let msg = e.to_string();
    assert!(msg.contains("volume.shale") && msg.contains("open"), "{msg}");
    assert!(!msg.contains("byte offset"), "{msg}");
    assert_eq!(errno_of(&e), Some(libc::ENOENT), "{e:?}");
}

/// Was "device write failed at byte offset 0": the WAL tail's file could not be made or mapped.
/// A tail directory that is a file is now refused by `Options::validate`, before anything is
/// opened, naming the option and the path.
#[test]
fn a_failed_tail_map_was_called_a_failed_device_write() {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("tails");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let mut opts = options();
    opts.wal_tail = shale_lsm::WalTail::Dir(not_a_dir.clone());
    let e = Db::open(tmp.path().join("store"), opts).err().expect("no tail in a file");
    let msg = e.to_string();
    assert!(matches!(e, shale_lsm::Error::InvalidArgument(_)), "{e:?}");
    assert!(msg.contains("wal_tail") && msg.contains(&not_a_dir.display().to_string()), "{msg}");
    assert!(!msg.contains("byte offset"), "{msg}");
    assert!(!tmp.path().join("store").exists(), "nothing is created for refused options");
}
