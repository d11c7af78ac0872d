//! A point read against a flush that drops the version it should answer with.
//!
//! A point read takes no lock: it loads the published memtables and SSTs (its view) and the
//! last complete sequence number, and answers with the newest version at or below that
//! sequence in that view. A flush leaves out a version that a newer one hides from every
//! reader it knows of. Loaded the other way round (the sequence, then the view), a reader
//! that was descheduled between the two while its key got a newer version and a flush ran
//! found the flushed SST holding only the newer version, above its sequence, and answered
//! with an older version from a deeper SST: a value overwritten before the read started
//! (`db/published.rs`). Here a failpoint pauses every point read between its two loads, so
//! the write and the flush come between them every time.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use shale_io::SimDevice;
use shale_lsm::{Db, Options, ReadOptions};

const PAUSE: Duration = Duration::from_secs(2);

fn open() -> Arc<Db> {
    let dev = SimDevice::new(16 << 20, 4096, 1).unwrap();
    let mut o = Options::small_for_tests();
    o.pause_in_point_reads = Some(PAUSE);
    Arc::new(Db::open_device(Arc::new(dev), o).unwrap())
}

/// Runs `read` on another thread while the key `k` gets its value `v2` and is flushed, with
/// "old" in an SST below and "v1" the value when the read starts; returns what it read and
/// whether the write and flush finished within the read's pause (else the run proves
/// nothing, though its answer must still be right).
fn race(read: fn(&Db) -> Option<Vec<u8>>) -> (Option<Vec<u8>>, bool) {
    let db = open();
    db.put(b"k", b"old").unwrap();
    db.flush().unwrap();
    db.put(b"k", b"v1").unwrap();
    let go = Arc::new(Barrier::new(2));
    let reader = {
        let (db, go) = (db.clone(), go.clone());
        thread::spawn(move || {
            go.wait();
            let started = Instant::now();
            (read(&db), started)
        })
    };
    go.wait();
    // The reader is in its pause by now (were it not, its answer must still be right; only
    // the proof needs the timing, which the caller checks).
    thread::sleep(PAUSE / 4);
    let writing = Instant::now();
    db.put(b"k", b"v2").unwrap();
    db.flush().unwrap();
    let written = Instant::now();
    let (got, started) = reader.join().unwrap();
    (got, started < writing && written < started + PAUSE)
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
    let (got, raced) = race(|db| db.get(b"k").unwrap());
    assert!(raced, "the write and flush took longer than the read's pause: nothing was tested");
    check(got, "get");
}

#[test]
fn a_multi_get_never_answers_with_a_value_overwritten_before_it_started() {
    let (got, raced) =
        race(|db| db.multi_get(&[b"k"], &ReadOptions::default()).unwrap().pop().unwrap());
    assert!(raced, "the write and flush took longer than the read's pause: nothing was tested");
    check(got, "multi_get");
}
