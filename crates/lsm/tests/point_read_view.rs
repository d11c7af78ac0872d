//! A point read against a flush that drops the version it should answer with.
//!
//! A point read takes no lock: it loads the published memtables and SSTs (its view) and the
//! last complete sequence number, and answers with the newest version at or below that
//! sequence in that view. A flush leaves out a version that a newer one hides from every
//! reader it knows of. Loaded the other way round (the sequence, then the view), a reader
//! that was descheduled between the two while its key got a newer version and a flush ran
//! found the flushed SST holding only the newer version, above its sequence, and answered
//! with an older version from a deeper SST: a value overwritten before the read started
//! (`db/published.rs`). Here a failpoint holds the point read between its two loads until
//! the write and the flush are done, so they come between them every time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use shale_io::SimDevice;
use shale_lsm::options::FailpointHook;
use shale_lsm::{Db, Options, ReadOptions};

/// Runs `read` on another thread, held between its two loads while the key `k` gets its
/// value `v2` and is flushed, with "old" in an SST below and "v1" the value when the read
/// starts; returns what it read.
fn race(read: fn(&Db) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    // The hook holds the first point read that reaches it (the reader's: the test's writes
    // and flushes make none) until the test lets it go: `entered` says it is between its
    // two loads, `release` lets it on.
    let armed = Arc::new(AtomicBool::new(false));
    let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let hook = {
        let (armed, entered, release) = (armed.clone(), entered.clone(), release.clone());
        FailpointHook(Arc::new(move || {
            if armed.swap(false, Ordering::SeqCst) {
                entered.wait();
                release.wait();
            }
        }))
    };
    let dev = SimDevice::new(16 << 20, 4096, 1).unwrap();
    let mut o = Options::small_for_tests();
    o.point_read_hook = Some(hook);
    let db = Arc::new(Db::open_device(Arc::new(dev), o).unwrap());
    db.put(b"k", b"old").unwrap();
    db.flush().unwrap();
    db.put(b"k", b"v1").unwrap();
    armed.store(true, Ordering::SeqCst);
    let reader = {
        let db = db.clone();
        thread::spawn(move || read(&db))
    };
    entered.wait();
    db.put(b"k", b"v2").unwrap();
    db.flush().unwrap();
    release.wait();
    reader.join().unwrap()
}

fn check(got: Option<Vec<u8>>, what: &str) {
    let got = got.map(|v| String::from_utf8(v).unwrap());
    assert!(
        matches!(got.as_deref(), Some("v1" | "v2")),
        "{what} answered {got:?}: v1 was the value when it started, v2 came while it ran"
    );
}

#[test]
fn a_get_never_answers_with_a_value_overwritten_before_it_started() {
    check(race(|db| db.get(b"k").unwrap()), "get");
}

#[test]
fn a_multi_get_never_answers_with_a_value_overwritten_before_it_started() {
    let got = race(|db| db.multi_get(&[b"k"], &ReadOptions::default()).unwrap().pop().unwrap());
    check(got, "multi_get");
}
