//! Many commits through a tiny version log: wraps and trims happen dozens of times, and every
//! reopen returns exactly the committed state.

mod common;

use common::*;
use shale_io::MemoryDevice;

#[test]
fn reopen_after_every_commit_batch_returns_the_committed_state() {
    let layout = tiny_layout();
    let device = arc(MemoryDevice::new(2 << 20, 512).unwrap());
    let mut opened = open(device.clone(), &layout);
    assert!(opened.created);
    let mut start = common::Committed { live: Default::default() };
    let mut next = 1;
    let mut wraps_seen = 0;
    let mut trims_seen = 0;
    for round in 0..40 {
        let record = run_workload(&opened.volume, round, 25, start.clone(), next, &|| 0);
        let before = opened.volume.log_state();
        drop(opened);
        opened = open(device.clone(), &layout);
        assert!(!opened.created);
        let after = opened.volume.log_state();
        assert_eq!(
            (after.base_sn, after.deltas, after.head),
            (before.base_sn, before.deltas, before.head)
        );
        let n = check_recovered(&opened, &record, u64::MAX, next);
        assert_eq!(n, next + 24, "every commit was acknowledged");
        wraps_seen += after.wraps;
        trims_seen = after.base_sn;
        start = record.states.last().unwrap().clone();
        next += 25;
    }
    assert!(trims_seen > 20, "the log was trimmed {trims_seen} times");
    assert!(wraps_seen > 0, "the live chain wrapped");
}

#[test]
fn ring_positions_cover_every_wrap_offset() {
    // Objects of varying sizes land at every sector of the ring over time, so WOR objects are
    // written at many different distances from the ring's end.
    let layout = tiny_layout();
    let device = arc(MemoryDevice::new(2 << 20, 512).unwrap());
    let opened = open(device.clone(), &layout);
    let record = run_workload(
        &opened.volume,
        99,
        600,
        common::Committed { live: Default::default() },
        1,
        &|| 0,
    );
    let heads = opened.volume.log_state();
    drop(opened);
    let reopened = open(device, &layout);
    assert_eq!(reopened.volume.log_state().head, heads.head);
    check_recovered(&reopened, &record, u64::MAX, 1);
}
