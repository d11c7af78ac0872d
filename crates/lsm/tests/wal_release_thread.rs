//! A freed WAL group's storage goes back on the WAL's release thread, not in the write path
//! (`wal/release.rs`): a release that takes long (a hole punched on a file system mounted
//! with `discard` waits for the device) does not delay the writes made meanwhile, `flush`
//! returns once the storage is back, and the store still holds what it acknowledged.
//!
//! The device here holds every release at a gate until the test opens it, and counts those
//! that reached it: writes that complete while a release is held at the gate did not wait for
//! it. Were the release made under the store's locks again (the flush thread frees the group
//! it flushed), those writes would wait at the gate until its timeout, which the device
//! records and the test refuses.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use parking_lot::{Condvar, Mutex};
use shale_io::{Device, DeviceInfo, DeviceRef, Queue, QueueOptions, SimDevice};
use shale_lsm::{Db, Options, WalTail, WriteBatch, WriteOptions};

/// How long a release waits at the closed gate before going through anyway (and recording
/// that it had to): far longer than the test's work, so only a release that something
/// waited for reaches it.
const GATE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct GateState {
    open: bool,
    /// Releases that reached the device.
    entered: u64,
    /// Releases that went through because the gate's timeout passed.
    timed_out: u64,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        self.state.lock().open = true;
        self.cv.notify_all();
    }

    /// Waits until `n` releases have reached the device.
    fn wait_entered(&self, n: u64) {
        let mut s = self.state.lock();
        while s.entered < n {
            assert!(
                !self.cv.wait_for(&mut s, GATE_TIMEOUT).timed_out(),
                "no release of a freed WAL group reached the device"
            );
        }
    }
}

/// A simulated device whose releases in the WAL area wait at a gate.
#[derive(Debug)]
struct GatedReleases {
    inner: DeviceRef,
    gate: Arc<Gate>,
    /// The WAL area (known once the volume is laid out).
    wal_area: Mutex<std::ops::Range<u64>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

impl Device for GatedReleases {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn open_queue(&self, opts: &QueueOptions) -> shale_io::Result<Box<dyn Queue>> {
        self.inner.open_queue(opts)
    }
    fn allocate_range(&self, offset: u64, len: u64) -> shale_io::Result<()> {
        self.inner.allocate_range(offset, len)
    }
    fn release_range(&self, offset: u64, len: u64) -> shale_io::Result<()> {
        if !self.wal_area.lock().contains(&offset) {
            return self.inner.release_range(offset, len);
        }
        let mut s = self.gate.state.lock();
        s.entered += 1;
        self.gate.cv.notify_all();
        while !s.open {
            if self.gate.cv.wait_for(&mut s, GATE_TIMEOUT).timed_out() {
                s.timed_out += 1;
                break;
            }
        }
        drop(s);
        self.inner.release_range(offset, len)
    }
}

fn options() -> Options {
    Options { wal_tail: WalTail::Off, ..small_options() }
}

fn put(db: &Db, n: u16, w: u32, sync: bool) {
    let mut b = WriteBatch::new();
    b.put(&key(n), &value(n, (w, 0), 300));
    db.write(&b, &WriteOptions { sync }).unwrap();
}

#[test]
fn writes_do_not_wait_for_a_freed_groups_release_and_flush_does() {
    let sim = SimDevice::new(DEVICE_BYTES, 4096, 3).unwrap();
    let gate = Arc::new(Gate::default());
    let gated = Arc::new(GatedReleases {
        inner: Arc::new(sim.clone()),
        gate: gate.clone(),
        wal_area: Mutex::new(0..0),
    });
    let dev: DeviceRef = gated.clone();
    // The open releases what an earlier writer left (every group, at once): let it through.
    gate.open();
    let db = Db::open_device(dev.clone(), options()).unwrap();
    let l = db.volume().layout();
    *gated.wal_area.lock() = l.wal_offset..l.wal_offset + l.wal_bytes;
    gate.state.lock().open = false;
    let entered_at_open = gate.state.lock().entered;

    // Writes without sync and no WAL tail: their group's pages are written (and so
    // allocated), and none is a synced page the freed group would keep: the free after the
    // flush gives the whole group back.
    let mut model = std::collections::BTreeMap::new();
    for w in 1..=20u32 {
        let n = (w % 7) as u16;
        put(&db, n, w, false);
        model.insert(n, w);
    }
    let db = Arc::new(db);
    let flushed = Arc::new(AtomicBool::new(false));
    let flush = {
        let (db, flushed) = (db.clone(), flushed.clone());
        std::thread::spawn(move || {
            db.flush().unwrap();
            flushed.store(true, Ordering::SeqCst);
        })
    };
    // The flush committed and freed its group; the release reached the device and is held.
    gate.wait_entered(entered_at_open + 1);
    // Writes go on while it is held (these few fill no memtable: none needs a group back).
    for w in 21..=30u32 {
        let n = (w % 7) as u16;
        put(&db, n, w, w % 2 == 0);
        model.insert(n, w);
    }
    assert_eq!(gate.state.lock().timed_out, 0, "a caller waited for a held release");
    // `flush` returns with the storage back, so not yet; and bytes the device still holds
    // are still counted.
    assert!(!flushed.load(Ordering::SeqCst), "the flush returned before the release was done");
    let allocated_held = db.stats().wal_bytes_allocated;

    gate.open();
    flush.join().unwrap();
    let db = Arc::into_inner(db).expect("the flush thread let go of the store");
    let allocated_after = db.stats().wal_bytes_allocated;
    assert!(
        allocated_after < allocated_held,
        "the freed group's bytes left the count before the device gave them back, or never: \
         {allocated_held} while held, {allocated_after} after"
    );
    db.close().unwrap();
    assert_eq!(gate.state.lock().timed_out, 0, "a caller waited for a held release");

    let db = Db::open_device(dev, options()).unwrap();
    let mut want = State::new();
    for (&n, &w) in &model {
        want.insert(n, (w, 0));
    }
    assert_eq!(scan_state(&db, 300).unwrap(), want, "the reopened store lost writes");
    db.close().unwrap();
}
