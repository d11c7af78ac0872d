//! A store over a fast and a capacity volume: one version log names the extents of both;
//! every way of giving the wrong volumes is refused with `Error::Tiers` and leaves both
//! devices as they were; an interrupted creation is finished.

use std::sync::Arc;

use shale_io::{
    AlignedBuf, Device, DeviceRef, MemoryDevice, Op, Queue, QueueExt, QueueOptions, Request,
};
use shale_space::{Edit, Error, Extent, IoClass, LayoutOptions, Role, Tier, Volume, VolumeOptions};

fn opts() -> VolumeOptions {
    VolumeOptions {
        layout: LayoutOptions { slot_bytes: 4096, version_log_bytes: 64 << 10, wal_bytes: 8192 },
        engine: Some(shale_space::EngineKind::Lsm),
        ..VolumeOptions::default()
    }
}

fn devices() -> (Arc<MemoryDevice>, Arc<MemoryDevice>) {
    (
        Arc::new(MemoryDevice::new(1 << 20, 512).unwrap()),
        Arc::new(MemoryDevice::new(2 << 20, 4096).unwrap()),
    )
}

/// Writes one slot of `e` full of `byte` through a slot queue, by address.
fn fill(volume: &Volume, e: Extent, byte: u8) {
    let mut q = volume.queue(IoClass::Slot, &QueueOptions::default()).unwrap();
    let r = volume.extent_range(e);
    let mut buf = AlignedBuf::zeroed((r.end - r.start) as usize);
    buf.fill(byte);
    q.write_at(r.start, buf, false).unwrap();
    q.flush().unwrap();
}

fn read(volume: &Volume, e: Extent) -> Vec<u8> {
    let mut q = volume.queue(IoClass::Slot, &QueueOptions::default()).unwrap();
    let r = volume.extent_range(e);
    q.read_at(r.start, (r.end - r.start) as usize).unwrap().to_vec()
}

fn commit(volume: &Volume, added: Vec<Extent>, removed: Vec<Extent>) {
    volume.commit(&Edit { added, removed, ..Edit::default() }, &mut || b"state".to_vec()).unwrap();
}

#[test]
fn extents_of_both_tiers_survive_reopen_and_trims() {
    let (fast, cap) = devices();
    let opened = Volume::open_tiered(fast.clone(), cap.clone(), &opts()).unwrap();
    assert!(opened.created);
    let v = opened.volume;
    assert_eq!(v.tiers(), &[Tier::Fast, Tier::Capacity]);
    assert_eq!(v.header().role, Role::Fast);
    assert_eq!(v.tier_header(Tier::Capacity).unwrap().role, Role::Capacity);
    assert_eq!(v.header().partner_id, v.tier_header(Tier::Capacity).unwrap().volume_id);
    // Enough commits to trim the 64 KiB version log several times, with extents of both
    // tiers live across the trims (bases carry the capacity list).
    let mut live = Vec::new();
    for i in 0..400u32 {
        let tier = if i % 3 == 0 { Tier::Fast } else { Tier::Capacity };
        let e = v.allocate_on(tier, 1 + i % 2).unwrap();
        assert_eq!(e.tier, tier);
        fill(&v, e, i as u8);
        let removed = if live.len() > 12 { vec![live.remove(0)] } else { vec![] };
        commit(&v, vec![e], removed);
        live.push(e);
    }
    assert!(v.log_state().trims_since_open > 0, "the test must trim");
    v.check_slots().unwrap();
    let mut expected = live.clone();
    expected.sort();
    let before: Vec<Vec<u8>> = live.iter().map(|&e| read(&v, e)).collect();
    // The capacity tier's bytes are on the capacity device, at its own offsets.
    let on_cap = *live.iter().find(|e| e.tier == Tier::Capacity).unwrap();
    let (tier, offset) = Tier::split(v.extent_range(on_cap).start);
    assert_eq!(tier, Tier::Capacity);
    let mut q = cap.open_queue(&QueueOptions::default()).unwrap();
    assert_eq!(
        q.read_at(offset, 4096).unwrap().to_vec(),
        before[live.iter().position(|e| *e == on_cap).unwrap()][..4096]
    );
    assert!(v.tier_io(Tier::Capacity, IoClass::Slot).write_bytes > 0);
    assert!(v.tier_io(Tier::Fast, IoClass::Slot).write_bytes > 0);
    assert_eq!(v.tier_io(Tier::Capacity, IoClass::VersionLog).writes, 0, "one version log");
    drop(v);

    let v = Volume::open_tiered(fast, cap, &opts()).unwrap().volume;
    let mut got = v.live_extents();
    got.sort();
    assert_eq!(got, expected);
    v.check_slots().unwrap();
    let after: Vec<Vec<u8>> = live.iter().map(|&e| read(&v, e)).collect();
    assert_eq!(after, before);
    assert_eq!(
        v.tier_slot_usage(Tier::Capacity).live,
        live.iter().filter(|e| e.tier == Tier::Capacity).map(|e| e.count).sum::<u32>()
    );
}

#[test]
fn a_queue_reaches_both_tiers_at_once() {
    let (fast, cap) = devices();
    let v = Volume::open_tiered(fast, cap, &opts()).unwrap().volume;
    let a = v.allocate_on(Tier::Fast, 1).unwrap();
    let b = v.allocate_on(Tier::Capacity, 1).unwrap();
    fill(&v, a, 1);
    fill(&v, b, 2);
    // Reads of both tiers in flight together on one queue, each answered from its tier.
    let mut q =
        v.queue(IoClass::Slot, &QueueOptions { depth: 8, ..QueueOptions::default() }).unwrap();
    for (tag, e) in [(0, a), (1, b), (2, a), (3, b)] {
        let op = Op::Read { offset: v.extent_range(e).start, buf: AlignedBuf::zeroed(4096) };
        q.submit(Request { tag, op }).unwrap();
    }
    let mut done = Vec::new();
    while q.in_flight() > 0 {
        q.reap(q.in_flight(), &mut done).unwrap();
    }
    done.sort_by_key(|c| c.tag);
    let firsts: Vec<u8> = done.iter().map(|c| c.buf.as_ref().unwrap()[0]).collect();
    assert_eq!(firsts, [1, 2, 1, 2]);
    // A flush after writes to both tiers is a caller's bug, refused.
    let w = |e: Extent| Op::Write {
        offset: v.extent_range(e).start,
        buf: AlignedBuf::zeroed(4096),
        durable: false,
    };
    q.submit(Request { tag: 9, op: w(a) }).unwrap();
    q.submit(Request { tag: 9, op: w(b) }).unwrap();
    assert!(q.submit(Request { tag: 9, op: Op::Flush }).is_err());
    // Single-tier stores have no capacity addresses.
    let single =
        Volume::open(Arc::new(MemoryDevice::new(1 << 20, 512).unwrap()), &opts()).unwrap().volume;
    assert!(matches!(single.allocate_on(Tier::Capacity, 1), Err(Error::InvalidArgument(_))));
    let mut sq = single.queue(IoClass::Slot, &QueueOptions::default()).unwrap();
    assert!(sq.read_at(Tier::Capacity.address(1 << 16), 4096).is_err());
}

/// Opens with `f` and checks that it is refused with `Error::Tiers` and that neither device
/// changed.
fn refused(
    devices: &[&Arc<MemoryDevice>],
    f: impl FnOnce() -> Result<shale_space::Opened, Error>,
) -> String {
    let before: Vec<Vec<u8>> = devices.iter().map(|d| d.snapshot()).collect();
    // (Not `unwrap_err`: an `Opened` prints its devices' bytes.)
    let Err(err) = f() else { panic!("the open was not refused") };
    let after: Vec<Vec<u8>> = devices.iter().map(|d| d.snapshot()).collect();
    assert!(before == after, "a refused open wrote to a device: {err}");
    assert!(matches!(err, Error::Tiers(_)), "{err}");
    err.to_string()
}

#[test]
fn wrong_volumes_are_refused_untouched() {
    let (fast, cap) = devices();
    let v = Volume::open_tiered(fast.clone(), cap.clone(), &opts()).unwrap().volume;
    let e = v.allocate_on(Tier::Capacity, 1).unwrap();
    commit(&v, vec![e], vec![]);
    drop(v);
    let d = |m: &Arc<MemoryDevice>| -> DeviceRef { m.clone() };

    // The fast volume alone.
    let msg = refused(&[&fast], || Volume::open(d(&fast), &opts()));
    assert!(msg.contains("open it with that volume too"), "{msg}");
    // The capacity volume alone, or given as the fast one.
    let msg = refused(&[&cap], || Volume::open(d(&cap), &opts()));
    assert!(msg.contains("open the store by its fast volume"), "{msg}");
    // Swapped.
    refused(&[&fast, &cap], || Volume::open_tiered(d(&cap), d(&fast), &opts()));
    // Another store's capacity volume.
    let (fast2, cap2) = devices();
    drop(Volume::open_tiered(fast2.clone(), cap2.clone(), &opts()).unwrap());
    let msg = refused(&[&fast, &cap2], || Volume::open_tiered(d(&fast), d(&cap2), &opts()));
    assert!(msg.contains("keeps its SSTs on capacity volume"), "{msg}");
    // A blank capacity device where an extent lives: the capacity volume is missing.
    let blank = Arc::new(MemoryDevice::new(2 << 20, 4096).unwrap());
    let msg = refused(&[&fast, &blank], || Volume::open_tiered(d(&fast), d(&blank), &opts()));
    assert!(msg.contains("missing"), "{msg}");
    // Read-only opens refuse the same way.
    refused(&[&fast], || Volume::open_read_only(d(&fast), &opts()));
    // A single volume given a capacity volume.
    let single = Arc::new(MemoryDevice::new(1 << 20, 512).unwrap());
    drop(Volume::open(single.clone(), &opts()).unwrap());
    let msg = refused(&[&single, &blank], || Volume::open_tiered(d(&single), d(&blank), &opts()));
    assert!(msg.contains("created without a capacity volume"), "{msg}");
    // A new store over a capacity device that holds a volume.
    let new_fast = Arc::new(MemoryDevice::new(1 << 20, 512).unwrap());
    refused(&[&new_fast, &cap], || Volume::open_tiered(d(&new_fast), d(&cap), &opts()));
    // And the right pair still opens.
    Volume::open_tiered(fast, cap, &opts()).unwrap();
}

/// A crash after the fast volume was written and before the capacity volume's header: the
/// capacity device is still blank and the committed version holds no capacity extent, so the
/// next open finishes the creation.
#[test]
fn an_interrupted_creation_is_finished() {
    let (fast, cap) = devices();
    let v = Volume::open_tiered(fast.clone(), cap.clone(), &opts()).unwrap().volume;
    let e = v.allocate_on(Tier::Fast, 1).unwrap();
    commit(&v, vec![e], vec![]);
    let ids = (v.header().volume_id, v.header().partner_id);
    drop(v);
    let blank = Arc::new(MemoryDevice::new(2 << 20, 4096).unwrap());
    let v = Volume::open_tiered(fast.clone(), blank.clone(), &opts()).unwrap().volume;
    let h = v.tier_header(Tier::Capacity).unwrap();
    assert_eq!((h.partner_id, h.volume_id, h.role), (ids.0, ids.1, Role::Capacity));
    assert_eq!(v.live_extents(), vec![e]);
    let on_cap = v.allocate_on(Tier::Capacity, 1).unwrap();
    commit(&v, vec![on_cap], vec![]);
    drop(v);
    // Now that an extent lives on it, a blank device in its place is refused.
    let other_blank = Arc::new(MemoryDevice::new(2 << 20, 4096).unwrap());
    refused(&[&fast, &other_blank], || {
        Volume::open_tiered(fast.clone(), other_blank.clone(), &opts())
    });
    assert!(Volume::open_tiered(fast, blank, &opts()).is_ok());
}

#[test]
fn tiered_paths_refuse_a_missing_or_shared_capacity_path() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, cap) = (dir.path().join("fast"), dir.path().join("cap"));
    let files = Default::default();
    let o = VolumeOptions::small_for_tests();
    assert!(matches!(
        Volume::open_path_tiered(&fast, &fast, &o, &files),
        Err(Error::InvalidArgument(_))
    ));
    let v = Volume::open_path_tiered(&fast, &cap, &o, &files).unwrap().volume;
    let e = v.allocate_on(Tier::Capacity, 3).unwrap();
    commit(&v, vec![e], vec![]);
    drop(v);
    let v = Volume::open_path_tiered_read_only(&fast, &cap, &o, &files).unwrap().volume;
    assert_eq!(v.live_extents(), vec![e]);
    drop(v);
    std::fs::rename(&cap, dir.path().join("elsewhere")).unwrap();
    let err = Volume::open_path_tiered(&fast, &cap, &o, &files).unwrap_err();
    assert!(matches!(err, Error::Tiers(_)), "{err}");
    assert!(!cap.exists(), "a missing capacity path of an existing store is never made");
}

#[test]
fn a_pooled_queue_reaches_both_tiers_and_comes_back_as_if_just_opened() {
    let (fast, cap) = devices();
    let v = Volume::open_tiered(fast, cap, &opts()).unwrap().volume;
    let a = v.allocate_on(Tier::Fast, 1).unwrap();
    let b = v.allocate_on(Tier::Capacity, 1).unwrap();
    let spec = shale_space::PoolSpec { class: IoClass::Slot, depth: 4, idle_max: 1 };
    let block = |byte: u8| {
        let mut buf = AlignedBuf::zeroed(4096);
        buf.fill(byte);
        buf
    };
    // A user writes to the capacity tier and leaves without flushing.
    let mut q = v.queues().checkout(spec).unwrap();
    q.write_at(v.extent_range(b).start, block(2), false).unwrap();
    drop(q);
    // The next user gets the same queue, writes to the fast tier and flushes: its flush
    // covers its own write, not refused as a flush over both tiers.
    let mut q = v.queues().checkout(spec).unwrap();
    assert_eq!(v.queues().stats().reused, 1);
    q.write_at(v.extent_range(a).start, block(1), false).unwrap();
    q.flush().unwrap();
    assert_eq!(q.read_at(v.extent_range(a).start, 4096).unwrap()[0], 1);
    assert_eq!(q.read_at(v.extent_range(b).start, 4096).unwrap()[0], 2);
    assert_eq!(v.tier_io(Tier::Fast, IoClass::Slot).flushes, 1);
}
