//! One writer or many readers per store, whatever name each open uses: a second open of a
//! store open for writing is refused ([`Error::InUse`]) through its directory, its volume
//! file and symlinks to either, in this process and in another, and allowed once the first is
//! closed (or dropped, or killed). Read-only opens share the store with each other, never with
//! a writer. Issue #9: `shale check D/volume.shale` used to get past a writer holding `D`,
//! recover the store under it and delete its WAL tail; after a kill -9 of the writer about
//! 10,000 acknowledged writes were gone.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;

use shale_lsm::{Db, Error, Options, WalTail, WriteOptions};

#[test]
fn a_second_open_is_refused_until_the_first_closes() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    match Db::open(dir.path(), Options::small_for_tests()) {
        Err(Error::InUse(why)) => assert!(why.contains("open by another handle"), "{why}"),
        Err(e) => panic!("expected InUse, got {e}"),
        Ok(_) => panic!("a second handle opened a store that is open"),
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(db);
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// A store's names: its directory, its volume file, a symlink to each, and the directory
/// spelled with a `.` component.
fn names(dir: &Path, links: &Path) -> Vec<PathBuf> {
    let volume = dir.join(shale_space::VOLUME_FILE_NAME);
    let to_dir = links.join("to-dir");
    let to_volume = links.join("to-volume");
    if !to_dir.exists() {
        std::os::unix::fs::symlink(dir, &to_dir).unwrap();
        std::os::unix::fs::symlink(&volume, &to_volume).unwrap();
    }
    vec![dir.to_path_buf(), volume, to_dir, to_volume, dir.join(".")]
}

fn expect_in_use(result: Result<Db, Error>, what: &str) {
    match result {
        Err(Error::InUse(_)) => {}
        Err(e) => panic!("{what}: expected InUse, got {e}"),
        Ok(_) => panic!("{what}: opened a store that is open for writing"),
    }
}

fn options_with_tail(tail_dir: &Path) -> Options {
    let mut o = Options::small_for_tests();
    o.wal_tail = WalTail::Dir(tail_dir.to_path_buf());
    o
}

/// Issue #9's bypass, in one process: the writer holds the store through one name, every
/// other name (and the same one) meets its lock, read-write and read-only; its unsynced
/// writes (in the WAL tail) stay intact and readable.
#[test]
fn check_through_the_volume_file_bypassed_the_lock_of_the_directory() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // Created through the directory, then held through each name in turn.
    drop(Db::open(&store, options_with_tail(tails.path())).unwrap());
    let all = names(&store, links.path());
    for (i, held) in all.iter().enumerate() {
        let db = Db::open(held, options_with_tail(tails.path())).unwrap();
        for k in 0..100u32 {
            db.write(&batch(i, k), &WriteOptions { sync: false }).unwrap();
        }
        let tail_before = tail_files(tails.path());
        assert_eq!(tail_before.len(), 1, "the writer keeps a WAL tail");
        for other in &all {
            let what = format!("held via {}, opened via {}", held.display(), other.display());
            expect_in_use(Db::open(other, options_with_tail(tails.path())), &what);
            expect_in_use(Db::open_read_only(other, options_with_tail(tails.path())), &what);
        }
        assert_eq!(tail_files(tails.path()), tail_before, "a refused open touched the WAL tail");
        for k in 0..100u32 {
            assert_eq!(db.get(&key(i, k)).unwrap(), Some(value(k)), "held via {}", held.display());
        }
        drop(db);
    }
    let db = Db::open_read_only(&store, options_with_tail(tails.path())).unwrap();
    for i in 0..all.len() {
        for k in 0..100u32 {
            assert_eq!(db.get(&key(i, k)).unwrap(), Some(value(k)));
        }
    }
}

#[test]
fn readers_share_a_store_and_exclude_a_writer() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let all = names(dir.path(), links.path());
    let readers: Vec<Db> =
        all.iter().map(|p| Db::open_read_only(p, Options::small_for_tests()).unwrap()).collect();
    for r in &readers {
        assert_eq!(r.get(b"k").unwrap(), Some(b"v".to_vec()));
    }
    for p in &all {
        expect_in_use(Db::open(p, Options::small_for_tests()), "a writer beside readers");
    }
    drop(readers);
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k2", b"v2").unwrap();
    db.close().unwrap();
}

/// A store closed while another thread of the process spawns a program reopens at once: the
/// forked child holds a duplicate of every descriptor (the store's lock and its WAL tail's
/// among them) until its exec, and an OFD lock lives as long as any descriptor of it, so the
/// handle lets go of its locks explicitly. CI saw the failure this guards against: a server
/// restarted over its own store while a test beside it spawned `redis-cli` was refused with
/// `InUse`.
#[test]
fn a_store_closed_while_a_child_is_being_spawned_reopens_at_once() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    for close in [true, false] {
        let db = Db::open(dir.path(), options_with_tail(tails.path())).unwrap();
        db.put(b"k", b"v").unwrap();
        assert_eq!(tail_files(tails.path()).len(), 1, "the writer keeps a WAL tail");
        let child = ForkedChild::spawn();
        if close {
            db.close().unwrap();
        } else {
            drop(db);
        }
        let reopened = Db::open(dir.path(), options_with_tail(tails.path()))
            .unwrap_or_else(|e| panic!("reopen after close={close}, a child forked: {e}"));
        assert_eq!(reopened.get(b"k").unwrap(), Some(b"v".to_vec()));
        drop(reopened);
        // Read-only handles let go the same way: a writer opens after them.
        let reader = Db::open_read_only(dir.path(), options_with_tail(tails.path())).unwrap();
        drop(reader);
        drop(Db::open(dir.path(), options_with_tail(tails.path())).unwrap());
        child.exec();
    }
}

/// A child forked by another thread and held between its fork and its exec, where it holds
/// a duplicate of every descriptor of this process, until [`ForkedChild::exec`] (or the
/// drop, when a test fails).
struct ForkedChild {
    go: std::os::fd::OwnedFd,
    spawner: Option<std::thread::JoinHandle<bool>>,
}

impl ForkedChild {
    /// Returns once the child is forked (it said so through a pipe).
    fn spawn() -> ForkedChild {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;
        let pipe = || {
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors pipe2 writes.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            // SAFETY: both are new descriptors that nothing else owns.
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
        };
        let (ready_r, ready_w) = pipe();
        let (go_r, go_w) = pipe();
        let spawner = std::thread::spawn(move || {
            let (ready, go) = (ready_w.as_raw_fd(), go_r.as_raw_fd());
            let mut cmd = Command::new("true");
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // write and read, which are async-signal-safe, on descriptors open in it.
            unsafe {
                cmd.pre_exec(move || {
                    let byte = 1u8;
                    libc::write(ready, (&raw const byte).cast(), 1);
                    let mut got = 0u8;
                    libc::read(go, (&raw mut got).cast(), 1);
                    Ok(())
                });
            }
            let ran = cmd.status().is_ok_and(|s| s.success());
            drop((ready_w, go_r));
            ran
        });
        let mut got = 0u8;
        // SAFETY: reads one byte into `got` from a descriptor this function owns.
        let n = unsafe { libc::read(ready_r.as_raw_fd(), (&raw mut got).cast(), 1) };
        assert_eq!(n, 1, "the child never said it was forked");
        ForkedChild { go: go_w, spawner: Some(spawner) }
    }

    /// Lets the child exec and waits for it.
    fn exec(mut self) {
        assert!(self.release(), "the child did not run");
    }

    /// Lets the child go on (its own copy of `go` keeps the pipe open, so only a byte ends
    /// its wait) and waits for it: whether it ran.
    fn release(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(spawner) = self.spawner.take() else { return true };
        let byte = 1u8;
        // SAFETY: writes one byte from `byte` to a descriptor this value owns.
        unsafe { libc::write(self.go.as_raw_fd(), (&raw const byte).cast(), 1) };
        spawner.join().unwrap_or(false)
    }
}

impl Drop for ForkedChild {
    fn drop(&mut self) {
        self.release();
    }
}

/// What a child prints once it holds the store (libtest may put it after a test's name).
const READY: &str = "CHILD-READY";
const CHILD_ENV: &str = "SHALE_STORE_LOCK_CHILD";
const CHILD_TAIL_ENV: &str = "SHALE_STORE_LOCK_CHILD_TAIL";
/// Writes the child acknowledges before it says it is ready.
const CHILD_WRITES: u32 = 3000;

fn key(i: usize, k: u32) -> Vec<u8> {
    format!("w{i}-{k:06}").into_bytes()
}

fn value(k: u32) -> Vec<u8> {
    vec![(k % 251) as u8; 100]
}

fn batch(i: usize, k: u32) -> shale_lsm::WriteBatch {
    let mut b = shale_lsm::WriteBatch::new();
    b.put(&key(i, k), &value(k));
    b
}

fn tail_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// The writer child: opens the store named by `CHILD_ENV`, acknowledges `CHILD_WRITES` writes
/// without sync (so they live in its WAL tail), says "ready", then waits to be killed.
#[test]
#[ignore = "child process entry point, run by \
            a_writer_in_another_process_locks_out_every_name_and_survives_sigkill"]
fn store_lock_child_entry_point() {
    let parent = "a_writer_in_another_process_locks_out_every_name_and_survives_sigkill";
    let path = shale_testkit::child_env(CHILD_ENV, parent);
    let tail = shale_testkit::child_env(CHILD_TAIL_ENV, parent);
    let db = Db::open(&path, options_with_tail(Path::new(&tail))).expect("child: open");
    for k in 0..CHILD_WRITES {
        db.write(&batch(0, k), &WriteOptions { sync: false }).expect("child: write");
    }
    // The flushes of the full memtables free their WAL groups, which trims the tail: let
    // them end first, so the tail changes no more while the parent compares it. The active
    // memtable's records stay only in the tail.
    db.wait_for_compaction().expect("child: wait");
    println!("{READY}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(600));
}

/// Issue #9 across processes: a writer child holds the store through its directory; this
/// process is refused through every name, read-write and read-only; then the child is killed
/// with SIGKILL and every write it acknowledged is there (P2), replayed from its WAL tail.
#[test]
fn a_writer_in_another_process_locks_out_every_name_and_survives_sigkill() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut child = shale_testkit::child_command("store_lock_child_entry_point")
        .env(CHILD_ENV, &store)
        .env(CHILD_TAIL_ENV, tails.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.any(|l| l.is_ok_and(|l| l.contains(READY)));
    if !ready {
        let status = child.wait().unwrap();
        panic!("the writer child never got ready ({status})");
    }
    let tail_before = tail_files(tails.path());
    for other in names(&store, links.path()) {
        let what = format!("writer in another process, opened via {}", other.display());
        expect_in_use(Db::open(&other, options_with_tail(tails.path())), &what);
        expect_in_use(Db::open_read_only(&other, options_with_tail(tails.path())), &what);
    }
    assert_eq!(tail_files(tails.path()), tail_before, "a refused open touched the WAL tail");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // A read-only open sees every acknowledged write and leaves the tail for the writer after.
    let db = Db::open_read_only(&store, options_with_tail(tails.path())).unwrap();
    for k in 0..CHILD_WRITES {
        assert_eq!(db.get(&key(0, k)).unwrap(), Some(value(k)), "acknowledged write {k} lost");
    }
    // Let go while a child forked meanwhile holds a copy of the reader's descriptors (its
    // shared lock on the store among them): the writer still opens at once.
    let forked = ForkedChild::spawn();
    drop(db);
    assert_eq!(tail_files(tails.path()), tail_before, "a read-only open touched the WAL tail");
    let db = Db::open(&store, options_with_tail(tails.path())).unwrap();
    forked.exec();
    db.check().unwrap();
    for k in 0..CHILD_WRITES {
        assert_eq!(db.get(&key(0, k)).unwrap(), Some(value(k)), "acknowledged write {k} lost");
    }
    db.close().unwrap();
}

/// A reader in another process keeps a writer out, and other readers in.
#[test]
fn a_reader_in_another_process_shares_with_readers_and_excludes_a_writer() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let volume = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let mut child = shale_testkit::child_command("store_lock_reader_child_entry_point")
        .env(READER_ENV, &volume)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.is_ok_and(|l| l.contains(READY))), "the reader child never got ready");
    expect_in_use(Db::open(dir.path(), Options::small_for_tests()), "a writer beside a reader");
    let r = Db::open_read_only(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(r.get(b"k").unwrap(), Some(b"v".to_vec()));
    drop(r);
    child.kill().unwrap();
    child.wait().unwrap();
    Db::open(dir.path(), Options::small_for_tests()).unwrap().close().unwrap();
}

const READER_ENV: &str = "SHALE_STORE_LOCK_READER";

#[test]
#[ignore = "child process entry point, run by \
            a_reader_in_another_process_shares_with_readers_and_excludes_a_writer"]
fn store_lock_reader_child_entry_point() {
    let parent = "a_reader_in_another_process_shares_with_readers_and_excludes_a_writer";
    let path = shale_testkit::child_env(READER_ENV, parent);
    let db = Db::open_read_only(&path, Options::small_for_tests()).expect("child: open");
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    println!("{READY}");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(600));
}

/// A loop device for a test, detached when dropped.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A block device: held by a writer through its node, nothing else opens it (O_EXCL and the
/// OFD lock), through a symlink either (as `/dev/disk/by-id` names are); readers share it.
#[test]
fn a_block_device_is_locked_through_every_name() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk");
    std::fs::File::create(&backing).unwrap().set_len(64 << 20).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(&backing).output();
    let dev = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_string(),
        other => {
            return shale_testkit::prerequisite::missing("a loop device", format!("{other:?}"));
        }
    };
    let _loop = Loop(dev.clone());
    let alias = dir.path().join("by-id-alias");
    std::os::unix::fs::symlink(&dev, &alias).unwrap();
    let db = Db::open(&dev, Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    for name in [Path::new(&dev), alias.as_path()] {
        expect_in_use(Db::open(name, Options::small_for_tests()), "writer on a block device");
        expect_in_use(Db::open_read_only(name, Options::small_for_tests()), "writer on a device");
    }
    db.close().unwrap();
    let a = Db::open_read_only(&dev, Options::small_for_tests()).unwrap();
    let b = Db::open_read_only(&alias, Options::small_for_tests()).unwrap();
    assert_eq!(b.get(b"k").unwrap(), Some(b"v".to_vec()));
    expect_in_use(Db::open(&alias, Options::small_for_tests()), "readers on a block device");
    drop((a, b));
    let db = Db::open(&alias, Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}

/// A bind mount is one more name for the same inode: a writer through the original directory
/// locks out the store through the mount, and the other way round.
#[test]
fn a_bind_mount_of_the_store_meets_the_same_lock() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let at = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::small_for_tests()).unwrap().close().unwrap();
    let bound = Command::new("mount").arg("--bind").arg(dir.path()).arg(at.path()).status();
    if !bound.as_ref().is_ok_and(|s| s.success()) {
        let why = format!("mount --bind: {bound:?} (not root?)");
        return shale_testkit::prerequisite::missing("a bind mount", why);
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0).status();
        }
    }
    let _unmount = Unmount(at.path());
    for (held, other) in [(dir.path(), at.path()), (at.path(), dir.path())] {
        let db = Db::open(held, Options::small_for_tests()).unwrap();
        expect_in_use(Db::open(other, Options::small_for_tests()), "through a bind mount");
        expect_in_use(Db::open_read_only(other, Options::small_for_tests()), "bind mount, reader");
        drop(db);
    }
}
