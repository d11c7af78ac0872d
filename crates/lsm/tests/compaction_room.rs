//! Room for compactions: a compaction reserves room for its outputs on the volume, and one
//! whose outputs would not fit beside the running ones' (and the memtables' flushes) waits
//! for them instead of starting (`Inner::room_for_compaction`; its rule is unit-tested in
//! `db/compaction.rs`).
//!
//! A device that cannot grow (14 MiB), holding about 5 MB of live data, an L0 of up to 8
//! SSTs and levels at most 2 MiB past their targets, on a throttle so that compactions
//! overlap, with four compaction threads: compactions wait for room there, the store never
//! stops, and every key reads back after a reopen. This checks that waiting engages and
//! loses nothing, not a store saved from a full device. Sized by runs: 24 at 14 MiB (up to
//! 14 at once) each deferred between 5 and 38 compactions and none stopped; at 15 MiB one
//! in ten deferred none. At 13 MiB four in ten once filled the device with one compaction
//! running, and one in many did at 14 MiB on CI: flushes took the room the compaction had
//! counted on. Flushes now leave a running compaction's reserved room to it
//! (`Inner::wait_for_flush_room`), and at 13 MiB five runs in five passed, each with flushes
//! waiting (25-42 times). At 12 MiB the data outgrows the device.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use shale_io::{Profile, SimDevice, ThrottledDevice};
use shale_lsm::Db;

/// Keys: their live data (5 MB) and L0 leave room for one compaction at a time but often
/// not for several.
const KEYS: u32 = 5_000;
const VALUE: usize = 1000;

#[test]
fn compactions_that_would_not_fit_wait_for_room_instead_of_stopping_the_store() {
    let sim = SimDevice::new(14 << 20, 4096, 5).unwrap();
    let profile = Profile {
        name: "small".into(),
        bandwidth_bytes_per_s: 20_000_000,
        iops: 100_000,
        latency: Duration::from_micros(20),
    };
    let slow = Arc::new(ThrottledDevice::new(Arc::new(sim.clone()), profile).unwrap());
    let mut opts = small_options();
    opts.write_buffer_bytes = 256 << 10;
    opts.target_file_size_base = 256 << 10;
    opts.max_bytes_for_level_base = 1 << 20;
    opts.level0_file_num_compaction_trigger = 2;
    // L0 bounded well within the device: its writes stop before it could fill the device.
    opts.level0_slowdown_writes_trigger = 6;
    opts.level0_stop_writes_trigger = 8;
    // Slowed writes as fast as the 1 ms a group of 32 KB that the slowdown once was, which
    // the key count above was chosen with: at the default 16 MiB/s, a run sometimes kept L0
    // low enough that no compaction had to wait.
    opts.delayed_write_rate = 32 << 20;
    opts.max_background_jobs = 5;
    // The levels' excess bounded too, as L0 is: writes slow past 1 MiB of compaction due
    // and stop past 2. Without it, a run whose compactions fell behind (a loaded machine)
    // held twice L1's target in L1 and filled the device even with one compaction at a
    // time: the store stopped for want of space, which is not what this test is about.
    opts.soft_pending_compaction_bytes_limit = 1 << 20;
    opts.hard_pending_compaction_bytes_limit = 2 << 20;
    // Static level sizes: every compaction is a few SSTs (no merge of the whole last level
    // into itself), so one always fits where several at once may not.
    opts.dynamic_level_bytes = false;
    opts.volume.layout.wal_bytes = 3 * (1 << 20) + 8192;
    let db = Db::open_device(slow, opts.clone()).unwrap();
    let model =
        random_overwrites(&db, KEYS, 20 * KEYS / 32, 32, VALUE, 0x2545_f491_4f6c_dd1d, |_| {});
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.stopped.is_none(), "{s:?}");
    assert!(s.compactions_deferred_for_room > 0, "no compaction waited for room: {s:?}");
    assert!(s.peak_running_compactions > 1, "compactions never overlapped: {s:?}");
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open_device(Arc::new(sim), opts).unwrap();
    assert_reads_back(&db, &model, VALUE);
    db.check().unwrap();
    db.close().unwrap();
}
