//! Injected device faults: a failed version-log write stops the volume (P5), failed reads at
//! recovery are typed errors, and damage confined to one mirror is repaired from the other.

mod common;

use common::*;
use shale_io::{Damage, Fault, FaultPlan, OpKind, SimDevice};
use shale_space::{Edit, Error, Volume};

fn committed_volume(commits: u64) -> (SimDevice, Volume, Record) {
    let dev = SimDevice::new(1 << 20, 512, 7).unwrap();
    let volume = open(arc(dev.clone()), &tiny_layout()).volume;
    let empty = Committed { live: Default::default() };
    let record = run_workload(&volume, 7, commits, empty, 1, &|| dev.writes());
    (dev, volume, record)
}

fn one_commit(volume: &Volume, n: u64) -> Result<(), Error> {
    let e = volume.allocate(1)?;
    let edit = Edit { added: vec![e], engine: n.to_le_bytes().to_vec(), ..Edit::default() };
    volume.commit(&edit, &mut || n.to_le_bytes().to_vec()).map(|_| ())
}

#[test]
fn failed_log_write_stops_the_volume_until_reopen() {
    for sticky in [false, true] {
        let (dev, volume, record) = committed_volume(10);
        dev.set_faults(FaultPlan {
            faults: vec![Fault::Eio { op: OpKind::Write, nth: 1, sticky }],
        });
        let err = one_commit(&volume, 11).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "{err}");
        assert!(volume.stopped().is_some());
        dev.set_faults(FaultPlan::default());
        // Even with the device healthy again, the failed write is never retried and trusted.
        let err = one_commit(&volume, 12).unwrap_err();
        assert!(matches!(err, Error::Stopped(_)), "{err}");
        drop(volume);
        // The failed commit was not acknowledged: it may or may not be there, all else is.
        let image = dev.crash_image(dev.writes(), Damage::Lose);
        let reopened = open(arc(SimDevice::from_image(image, 512, 7).unwrap()), &tiny_layout());
        let n = recovered_commit(&reopened);
        assert!(n == 10 || n == 11, "recovered commit {n}");
        if n == 10 {
            check_recovered(&reopened, &record, u64::MAX, 1);
        }
        one_commit(&reopened.volume, 12).expect("a reopened volume commits again");
    }
}

#[test]
fn failed_second_mirror_write_and_failed_anchor_write_stop_too() {
    // Writes 1 and 2 of a commit are the two mirror copies; anchors follow bases.
    for nth in 1..=6 {
        let (dev, volume, _) = committed_volume(3);
        dev.set_faults(FaultPlan {
            faults: vec![Fault::Eio { op: OpKind::Write, nth, sticky: false }],
        });
        let mut failed = false;
        for n in 4..12 {
            match one_commit(&volume, n) {
                Ok(()) => assert!(!failed, "a commit succeeded after a failure"),
                Err(Error::Io(_)) if !failed => failed = true,
                Err(Error::Stopped(_)) if failed => {}
                Err(e) => panic!("fault at write {nth}: unexpected {e}"),
            }
        }
        // Slot data is written through other queues; only log writes are in this window, so
        // the fault always lands on the version log.
        assert!(failed, "fault at write {nth} never surfaced");
    }
}

#[test]
fn failed_read_during_recovery_is_an_io_error() {
    let (dev, volume, _) = committed_volume(5);
    drop(volume);
    for nth in 1..=3 {
        dev.set_faults(FaultPlan {
            faults: vec![Fault::Eio { op: OpKind::Read, nth, sticky: false }],
        });
        let err = Volume::open(arc(dev.clone()), &options(tiny_layout())).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "read {nth}: {err}");
    }
    dev.set_faults(FaultPlan::default());
    Volume::open(arc(dev), &options(tiny_layout())).expect("opens once reads work");
}

#[test]
fn bit_flip_in_a_mirror_a_read_is_repaired_from_mirror_b() {
    let (dev, volume, record) = committed_volume(12);
    let base_pos = volume.log_state().base_pos;
    drop(volume);
    // Read 1 is the header area, read 2 mirror A: flip a byte inside the newest base.
    let byte = 512 + base_pos + 40;
    dev.set_faults(FaultPlan { faults: vec![Fault::ReadBitFlip { nth_read: 2, byte, xor: 0x20 }] });
    let opened = open(arc(dev.clone()), &tiny_layout());
    assert_eq!(opened.volume.log_state().repaired, 1);
    check_recovered(&opened, &record, u64::MAX, 1);
}

#[test]
fn misdirected_mirror_write_is_repaired_from_the_other_copy() {
    let (dev, volume, record) = committed_volume(4);
    let slot0 = volume.extent_range(shale_space::Extent::fast(200, 1)).start;
    // The next commit's first write (mirror A) lands in the slot area instead.
    dev.set_faults(FaultPlan { faults: vec![Fault::Misdirect { nth_write: 1, to_offset: slot0 }] });
    let e = volume.allocate(1).unwrap();
    let edit = Edit { added: vec![e], engine: 5u64.to_le_bytes().to_vec(), ..Edit::default() };
    volume.commit(&edit, &mut Vec::new).unwrap();
    drop(volume);
    let reopened = open(arc(dev), &tiny_layout());
    assert_eq!(recovered_commit(&reopened), 5, "the acknowledged commit survives");
    assert!(reopened.volume.log_state().repaired >= 1);
    assert!(reopened.volume.live_extents().contains(&e));
    let _ = record;
}
