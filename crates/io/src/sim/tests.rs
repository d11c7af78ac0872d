//! Unit tests of the simulated device: durability rules, crash damage, faults, determinism.

use super::rng::SplitMix64;
use super::*;
use crate::buf::AlignedBuf;
use crate::device::{QueueExt, QueueOptions};
use crate::error::OpKind;

const BS: u32 = 512;
const CAP: u64 = 64 * 1024;

fn device() -> (SimDevice, Box<dyn Queue>) {
    let dev = SimDevice::new(CAP, BS, 1).unwrap();
    let queue = dev.open_queue(&QueueOptions::default()).unwrap();
    (dev, queue)
}

fn filled(len: usize, byte: u8) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    buf.fill(byte);
    buf
}

/// A buffer whose every 512-byte sector is distinguishable, so a torn write shows which
/// pieces landed.
fn patterned(len: usize, salt: u8) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = ((i / 512) as u8).wrapping_mul(7).wrapping_add(salt) | 1;
    }
    buf
}

fn put(q: &mut Box<dyn Queue>, offset: u64, buf: AlignedBuf, durable: bool) {
    q.write_at(offset, buf, durable).unwrap();
}

fn region(image: &[u8], offset: u64, len: usize) -> &[u8] {
    &image[offset as usize..offset as usize + len]
}

fn all(image: &[u8], offset: u64, len: usize, byte: u8) -> bool {
    region(image, offset, len).iter().all(|&b| b == byte)
}

fn seeded_damages() -> Vec<Damage> {
    let mut damages = Vec::new();
    for seed in 0..32 {
        for torn_unit in [512, 4096] {
            damages.push(Damage::Random { seed, torn_unit });
            damages.push(Damage::TornLast { seed, torn_unit });
        }
    }
    damages
}

#[test]
fn a_write_lost_in_flight_is_dropped_even_when_durable_and_later_ones_kept() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(4096, 0xAA), true);
    put(&mut q, 4096, filled(4096, 0xBB), true);
    put(&mut q, 8192, filled(512, 0xCC), false);
    put(&mut q, 12288, filled(512, 0xDD), true);
    assert_eq!(dev.write_at(2), Some((4096, 4096, true)));
    assert_eq!(dev.write_at(3), Some((8192, 512, false)));
    assert_eq!(dev.write_at(5), None);
    let image = dev.crash_image(4, Damage::LostInFlight { write: 2 });
    assert!(all(&image, 0, 4096, 0xAA), "an earlier durable write is kept");
    assert!(all(&image, 4096, 4096, 0), "the write in flight is lost");
    assert!(all(&image, 8192, 512, 0), "an unsynced write is lost, as under Lose");
    assert!(all(&image, 12288, 512, 0xDD), "a later durable write is kept");
    assert!(dev.unreaped_at(4).is_empty(), "each write above was reaped before the next");
}

#[test]
fn a_write_names_the_earlier_writes_its_queue_had_not_reaped() {
    let (dev, mut q) = device();
    let write = |tag, offset| crate::Request {
        tag,
        op: crate::Op::Write { offset, buf: filled(512, 0xEE), durable: true },
    };
    q.submit(write(1, 0)).unwrap();
    q.submit(write(2, 512)).unwrap();
    q.submit(crate::Request { tag: 3, op: crate::Op::Flush }).unwrap();
    q.submit(write(4, 1024)).unwrap();
    assert_eq!(dev.unreaped_at(1), Vec::<u64>::new());
    assert_eq!(dev.unreaped_at(2), vec![1]);
    assert_eq!(dev.unreaped_at(3), vec![1, 2], "a flush is no write");
    let mut out = Vec::new();
    assert_eq!(q.reap(0, &mut out).unwrap(), 4);
    q.submit(write(5, 1536)).unwrap();
    assert_eq!(dev.unreaped_at(4), Vec::<u64>::new(), "reaped before it was submitted");
}

#[test]
fn late_completions_wait_one_reap_unless_the_reap_needs_them() {
    let (dev, mut q) = device();
    dev.set_late_completions(true);
    let write = |tag, offset| crate::Request {
        tag,
        op: crate::Op::Write { offset, buf: filled(512, 0xEE), durable: true },
    };
    let tags =
        |out: &mut Vec<crate::Completion>| -> Vec<u64> { out.drain(..).map(|c| c.tag).collect() };
    let mut out = Vec::new();
    q.submit(write(1, 0)).unwrap();
    assert_eq!(q.reap(0, &mut out).unwrap(), 0, "a new completion waits a reap");
    assert_eq!(q.in_flight(), 1);
    q.submit(write(2, 512)).unwrap();
    assert_eq!(dev.unreaped_at(2), vec![1], "write 1 was passed over, not handed back");
    q.reap(0, &mut out).unwrap();
    assert_eq!(tags(&mut out), [1]);
    q.submit(write(3, 1024)).unwrap();
    q.reap(2, &mut out).unwrap();
    assert_eq!(tags(&mut out), [2, 3], "the held one, and a new one the reap needs");
    assert_eq!(q.in_flight(), 0);
    // Every write ran at submission.
    assert!(all(&dev.durable_image(), 0, 1536, 0xEE));
}

#[test]
fn unsynced_writes_are_lost_under_lose_and_kept_under_keep() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(4096, 0xAA), false);
    put(&mut q, 8192, filled(512, 0xBB), false);
    assert_eq!(dev.writes(), 2);
    // Reads see the cache at once.
    assert!(all(&q.read_at(0, 4096).unwrap(), 0, 4096, 0xAA));

    let lost = dev.crash_image(2, Damage::Lose);
    assert!(lost.iter().all(|&b| b == 0));
    let kept = dev.crash_image(2, Damage::Keep);
    assert!(all(&kept, 0, 4096, 0xAA));
    assert!(all(&kept, 8192, 512, 0xBB));
    assert!(dev.durable_image().iter().all(|&b| b == 0));
    assert_eq!(dev.current_image(), kept);
}

#[test]
fn durable_writes_and_flushed_writes_survive_every_damage() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(4096, 0x11), false);
    q.flush().unwrap();
    put(&mut q, 4096, filled(4096, 0x22), true);
    put(&mut q, 8192, patterned(8192, 3), false);
    put(&mut q, 16384, patterned(8192, 5), false);
    let mut damages = vec![Damage::Lose, Damage::Keep];
    damages.extend(seeded_damages());
    for damage in damages {
        let image = dev.crash_image(4, damage);
        assert!(all(&image, 0, 4096, 0x11), "flushed write lost under {damage:?}");
        assert!(all(&image, 4096, 4096, 0x22), "durable write lost under {damage:?}");
    }
    let durable = dev.durable_image();
    assert!(all(&durable, 4096, 4096, 0x22));
    assert!(all(&durable, 8192, 16384, 0), "unsynced writes are not durable yet");
}

#[test]
fn a_flush_after_write_k_belongs_to_crash_point_k() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(512, 0x33), false);
    assert!(all(&dev.crash_image(1, Damage::Lose), 0, 512, 0));
    q.flush().unwrap();
    assert!(all(&dev.crash_image(1, Damage::Lose), 0, 512, 0x33));
    put(&mut q, 512, filled(512, 0x44), false);
    // Crash point 1 still ends before write 2 and after the flush.
    let image = dev.crash_image(1, Damage::Keep);
    assert!(all(&image, 0, 512, 0x33));
    assert!(all(&image, 512, 512, 0));
}

#[test]
fn crash_image_at_zero_is_the_initial_image_and_at_writes_matches_the_live_images() {
    let mut initial = vec![0u8; CAP as usize];
    for (i, b) in initial.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let dev = SimDevice::from_image(initial.clone(), BS, 9).unwrap();
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    assert_eq!(&q.read_at(512, 512).unwrap()[..], &initial[512..1024]);
    assert_eq!(dev.crash_image(0, Damage::Keep), initial);
    put(&mut q, 0, filled(1024, 0x55), true);
    put(&mut q, 2048, filled(512, 0x66), false);
    q.flush().unwrap();
    put(&mut q, 2048, filled(1024, 0x77), false);
    assert_eq!(dev.crash_image(0, Damage::Keep), initial);
    assert_eq!(dev.crash_image(0, Damage::Random { seed: 3, torn_unit: 512 }), initial);
    assert_eq!(dev.crash_image(dev.writes(), Damage::Keep), dev.current_image());
    assert_eq!(dev.crash_image(dev.writes(), Damage::Lose), dev.durable_image());
}

#[test]
#[should_panic(expected = "beyond the 1 writes")]
fn crash_point_beyond_the_writes_is_a_bug() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(512, 1), false);
    let _ = dev.crash_image(2, Damage::Lose);
}

#[test]
fn a_durable_write_over_an_unsynced_one_wins_in_every_view() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(1024, 0xA0), false);
    put(&mut q, 512, filled(512, 0xB0), true);
    for damage in [Damage::Lose, Damage::Keep] {
        assert!(all(&dev.crash_image(2, damage), 512, 512, 0xB0), "{damage:?}");
    }
    assert!(all(&dev.durable_image(), 512, 512, 0xB0));
    // The flush makes the first write's remaining half durable without undoing the second.
    q.flush().unwrap();
    let durable = dev.durable_image();
    assert!(all(&durable, 0, 512, 0xA0));
    assert!(all(&durable, 512, 512, 0xB0));
    assert_eq!(durable, dev.crash_image(2, Damage::Lose));
}

/// Checks that every `unit`-aligned piece of the written range holds either all of the new
/// data or all of the old, and says whether the write was torn (some pieces each way).
fn pieces_whole(image: &[u8], old: &[u8], offset: u64, data: &[u8], unit: usize) -> (bool, bool) {
    let (mut new_pieces, mut old_pieces) = (0, 0);
    let start = offset as usize;
    let mut at = start;
    while at < start + data.len() {
        let end = ((at / unit + 1) * unit).min(start + data.len());
        let got = &image[at..end];
        if got == &data[at - start..end - start] {
            new_pieces += 1;
        } else if got == &old[at..end] {
            old_pieces += 1;
        } else {
            return (false, false);
        }
        at = end;
    }
    (true, new_pieces > 0 && old_pieces > 0)
}

#[test]
fn torn_writes_only_keep_whole_units_of_the_written_data() {
    for torn_unit in [512u32, 4096] {
        let mut torn_seen = false;
        for seed in 0..64 {
            let (dev, mut q) = device();
            let old = dev.current_image();
            // Starts off a 4 KiB boundary, so the first and last 4 KiB pieces are partial.
            let (offset, data) = (1536, patterned(20 * 1024, seed as u8));
            put(&mut q, offset, data.clone(), false);
            for damage in [Damage::Random { seed, torn_unit }, Damage::TornLast { seed, torn_unit }]
            {
                let image = dev.crash_image(1, damage);
                let (whole, torn) = pieces_whole(&image, &old, offset, &data, torn_unit as usize);
                assert!(whole, "{damage:?} kept part of a {torn_unit}-byte piece");
                torn_seen |= torn;
                assert_eq!(image[..offset as usize], old[..offset as usize], "{damage:?}");
                assert_eq!(
                    image[offset as usize + data.len()..],
                    old[offset as usize + data.len()..]
                );
            }
        }
        assert!(torn_seen, "no seed tore a write into {torn_unit}-byte pieces");
    }
}

#[test]
fn torn_last_keeps_every_unsynced_write_but_the_last() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(4096, 0x10), false);
    put(&mut q, 4096, filled(4096, 0x20), false);
    put(&mut q, 8192, patterned(8192, 9), true);
    put(&mut q, 16384, patterned(16384, 4), false);
    let old = SimDevice::new(CAP, BS, 0).unwrap().current_image();
    let data = patterned(16384, 4);
    let mut torn_seen = false;
    for seed in 0..32 {
        let image = dev.crash_image(4, Damage::TornLast { seed, torn_unit: 4096 });
        assert!(all(&image, 0, 4096, 0x10));
        assert!(all(&image, 4096, 4096, 0x20));
        let (whole, torn) = pieces_whole(&image, &old, 16384, &data, 4096);
        assert!(whole);
        torn_seen |= torn;
    }
    assert!(torn_seen);
    // At crash point 2 the last unsynced write is the second one.
    let image = dev.crash_image(2, Damage::TornLast { seed: 0, torn_unit: 4096 });
    assert!(all(&image, 0, 4096, 0x10));
}

#[test]
fn random_damage_reorders_some_writes_and_drops_or_keeps_others() {
    let (dev, mut q) = device();
    for i in 0..8u64 {
        put(&mut q, i * 4096, filled(4096, 0x80 | i as u8), false);
    }
    let (mut reordered, mut kept, mut dropped) = (false, false, false);
    for seed in 0..64 {
        let image = dev.crash_image(8, Damage::Random { seed, torn_unit: 4096 });
        let landed: Vec<bool> =
            (0..8).map(|i| all(&image, i * 4096, 4096, 0x80 | i as u8)).collect();
        reordered |= landed.windows(2).any(|w| !w[0] && w[1]);
        kept |= landed.iter().any(|&l| l);
        dropped |= landed.iter().any(|&l| !l);
    }
    assert!(reordered && kept && dropped);
}

#[test]
fn the_same_seed_gives_the_same_image_and_seeds_differ() {
    let build = || {
        let (dev, mut q) = device();
        for i in 0..12u64 {
            put(&mut q, i * 4096, patterned(4096, i as u8), i % 5 == 0);
        }
        dev
    };
    let (a, b) = (build(), build());
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..16 {
        for damage in
            [Damage::Random { seed, torn_unit: 512 }, Damage::TornLast { seed, torn_unit: 512 }]
        {
            let image = a.crash_image(12, damage);
            assert_eq!(image, a.crash_image(12, damage), "{damage:?} is not repeatable");
            assert_eq!(image, b.crash_image(12, damage), "{damage:?} differs between devices");
            distinct.insert(image);
        }
    }
    assert!(distinct.len() > 8, "seeds barely matter: {} distinct images", distinct.len());
}

#[test]
fn a_write_fares_the_same_at_every_later_crash_point() {
    // Fates are keyed by write number, so growing the crash point never changes the fate of an
    // earlier unsynced write: crash images at k and k+1 agree outside write k+1's range.
    let (dev, mut q) = device();
    for i in 0..6u64 {
        put(&mut q, i * 4096, patterned(4096, i as u8), false);
    }
    let damage = Damage::Random { seed: 77, torn_unit: 512 };
    let (at5, at6) = (dev.crash_image(5, damage), dev.crash_image(6, damage));
    assert_eq!(at5[..5 * 4096], at6[..5 * 4096]);
}

#[test]
fn eio_fails_the_nth_op_of_its_kind_and_sticky_fails_the_rest() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(512, 1), false);
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Write, nth: 2, sticky: false }],
    });
    put(&mut q, 512, filled(512, 2), false);
    let err = q.write_at(1024, filled(512, 3), false).unwrap_err();
    assert!(
        matches!(err, Error::Io { op: OpKind::Write, offset: 1024, ref source }
        if source.raw_os_error() == Some(libc::EIO)),
        "{err}"
    );
    put(&mut q, 1536, filled(512, 4), false);
    // The failed write counts as write 3 and leaves no trace on any image.
    assert_eq!(dev.writes(), 4);
    assert!(all(&dev.current_image(), 1024, 512, 0));
    assert_eq!(dev.crash_image(3, Damage::Keep), dev.crash_image(2, Damage::Keep));
    assert!(all(&dev.crash_image(4, Damage::Keep), 1536, 512, 4));

    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Read, nth: 1, sticky: true }],
    });
    for _ in 0..3 {
        assert!(matches!(q.read_at(0, 512), Err(Error::Io { op: OpKind::Read, .. })));
    }
    put(&mut q, 0, filled(512, 5), false);
    assert_eq!(dev.stats().faults, 4);
    dev.set_faults(FaultPlan::default());
    assert!(all(&q.read_at(0, 512).unwrap(), 0, 512, 5));
}

#[test]
fn a_failed_flush_makes_nothing_durable() {
    let (dev, mut q) = device();
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Flush, nth: 1, sticky: false }],
    });
    put(&mut q, 0, filled(512, 7), false);
    assert!(matches!(q.flush(), Err(Error::Io { op: OpKind::Flush, .. })));
    assert!(all(&dev.durable_image(), 0, 512, 0));
    assert!(all(&dev.crash_image(1, Damage::Lose), 0, 512, 0));
    q.flush().unwrap();
    assert!(all(&dev.durable_image(), 0, 512, 7));
    assert!(all(&dev.crash_image(1, Damage::Lose), 0, 512, 7));
}

#[test]
fn no_space_fails_writes_that_end_past_the_limit() {
    let (dev, mut q) = device();
    dev.set_faults(FaultPlan { faults: vec![Fault::NoSpace { from_offset: 8192 }] });
    put(&mut q, 4096, filled(4096, 1), false);
    let err = q.write_at(7680, filled(1024, 2), false).unwrap_err();
    assert!(matches!(err, Error::NoSpace { offset: 7680 }), "{err}");
    assert!(matches!(q.write_at(8192, filled(512, 2), true), Err(Error::NoSpace { .. })));
    assert!(all(&dev.current_image(), 4096, 4096, 1));
    assert!(all(&dev.current_image(), 8192, 1024, 0));
    assert_eq!(dev.writes(), 3);
    assert_eq!(dev.stats().bytes_written, 4096);
}

#[test]
fn a_misdirected_write_is_acknowledged_but_lands_elsewhere() {
    let (dev, mut q) = device();
    dev.set_faults(FaultPlan { faults: vec![Fault::Misdirect { nth_write: 2, to_offset: 32768 }] });
    put(&mut q, 0, filled(512, 1), false);
    put(&mut q, 4096, filled(1024, 2), false);
    put(&mut q, 8192, filled(512, 3), false);
    assert!(all(&q.read_at(4096, 1024).unwrap(), 0, 1024, 0));
    assert!(all(&q.read_at(32768, 1024).unwrap(), 0, 1024, 2));
    q.flush().unwrap();
    let image = dev.crash_image(3, Damage::Lose);
    assert!(all(&image, 4096, 1024, 0));
    assert!(all(&image, 32768, 1024, 2));
    assert!(all(&image, 8192, 512, 3));

    // Aimed at the last block, only the part that fits lands.
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Misdirect { nth_write: 1, to_offset: CAP - 512 }],
    });
    put(&mut q, 0, filled(1024, 9), true);
    assert!(all(&dev.durable_image(), CAP - 512, 512, 9));
    assert!(all(&dev.crash_image(4, Damage::Lose), CAP - 512, 512, 9));
}

#[test]
fn a_read_bit_flip_damages_one_read_and_not_the_media() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(1024, 0xF0), true);
    dev.set_faults(FaultPlan {
        faults: vec![Fault::ReadBitFlip { nth_read: 2, byte: 700, xor: 0x01 }],
    });
    assert!(all(&q.read_at(0, 1024).unwrap(), 0, 1024, 0xF0));
    let damaged = q.read_at(0, 1024).unwrap();
    assert_eq!(damaged[700], 0xF1);
    assert!(damaged.iter().enumerate().all(|(i, &b)| i == 700 || b == 0xF0));
    assert!(all(&q.read_at(0, 1024).unwrap(), 0, 1024, 0xF0));
    assert!(all(&dev.current_image(), 0, 1024, 0xF0));
}

#[test]
fn set_faults_restarts_the_counters() {
    let (dev, mut q) = device();
    for _ in 0..3 {
        put(&mut q, 0, filled(512, 1), false);
    }
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Write, nth: 1, sticky: false }],
    });
    assert!(q.write_at(0, filled(512, 1), false).is_err());
    put(&mut q, 0, filled(512, 1), false);
}

#[test]
#[should_panic(expected = "1-based")]
fn an_ordinal_of_zero_is_a_bug() {
    let (dev, _q) = device();
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Read, nth: 0, sticky: true }],
    });
}

#[test]
fn corrupt_flips_a_persisted_byte_from_that_point_on() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(512, 0x0F), true);
    put(&mut q, 512, filled(512, 0x0F), false);
    dev.corrupt(3, 0x80);
    dev.corrupt(600, 0x01);
    assert_eq!(dev.durable_image()[3], 0x8F);
    assert_eq!(dev.durable_image()[600], 0x01);
    assert_eq!(dev.current_image()[600], 0x0E);
    assert_eq!(q.read_at(0, 512).unwrap()[3], 0x8F);
    assert_eq!(dev.crash_image(2, Damage::Lose)[3], 0x8F);
    assert_eq!(dev.crash_image(2, Damage::Keep)[600], 0x0E);
    // A later write over the byte replaces it; a crash before the flip does not see it.
    put(&mut q, 0, filled(512, 0x0F), true);
    assert_eq!(dev.crash_image(3, Damage::Lose)[3], 0x0F);
    assert_eq!(dev.crash_image(1, Damage::Lose)[3], 0x0F);
    assert_eq!(dev.crash_image(dev.writes(), Damage::Lose), dev.durable_image());
}

#[test]
fn stats_count_requests_and_bytes() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(1024, 1), true);
    put(&mut q, 0, filled(512, 1), false);
    q.read_at(0, 2048).unwrap();
    q.flush().unwrap();
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Read, nth: 1, sticky: false }],
    });
    assert!(q.read_at(0, 512).is_err());
    assert_eq!(
        dev.stats(),
        SimStats {
            reads: 2,
            writes: 2,
            flushes: 1,
            durable_writes: 1,
            bytes_read: 2048,
            bytes_written: 1536,
            faults: 1,
            releases: 0,
        }
    );
}

#[test]
fn the_device_is_a_fixed_size_sim_and_clones_share_it() {
    let (dev, mut q) = device();
    let info = dev.info();
    assert_eq!(
        (info.capacity, info.block_size, info.backend, info.growable),
        (CAP, BS, "sim", false)
    );
    assert!(matches!(dev.grow(2 * CAP), Err(Error::Unsupported(_))));
    let clone = dev.clone();
    put(&mut q, 0, filled(512, 3), false);
    assert_eq!(clone.writes(), 1);
    assert!(format!("{clone:?}").contains("seed: 1"));
    // Misaligned requests never reach the device and are not crash points.
    assert!(q.write_at(100 * 512 + 1, filled(512, 1), false).is_err());
    assert_eq!(dev.writes(), 1);
}

#[test]
fn bad_geometry_is_refused() {
    assert!(matches!(SimDevice::new(4096, 1000, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(SimDevice::new(4096, 256, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(SimDevice::from_image(vec![0; 1000], 512, 0), Err(Error::InvalidArgument(_))));
}

#[test]
fn random_histories_keep_the_live_images_equal_to_their_replays() {
    // The live durable image is maintained incrementally; the replay rebuilds it from scratch.
    // Any disagreement is a bug in one of them.
    for seed in 0..20 {
        let (dev, mut q) = device();
        let mut rng = SplitMix64::new(seed);
        for _ in 0..60 {
            match rng.below(10) {
                0 => q.flush().unwrap(),
                1 => dev.corrupt(rng.below(CAP), rng.next_u64() as u8 | 1),
                _ => {
                    let sectors = 1 + rng.below(16) as usize;
                    let offset = rng.below(CAP / 512 - sectors as u64) * 512;
                    let buf = patterned(sectors * 512, rng.next_u64() as u8);
                    put(&mut q, offset, buf, rng.below(4) == 0);
                }
            }
            let k = dev.writes();
            assert_eq!(dev.durable_image(), dev.crash_image(k, Damage::Lose), "seed {seed}");
            assert_eq!(dev.current_image(), dev.crash_image(k, Damage::Keep), "seed {seed}");
        }
        let back = q.read_at(0, CAP as usize).unwrap();
        assert_eq!(&back[..], &dev.current_image()[..]);
    }
}

#[test]
fn a_release_reads_as_zeros_and_is_durable_only_after_a_flush() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(4096, 0xAA), true);
    dev.release_range(1024, 2048).unwrap();
    assert_eq!(dev.writes(), 2, "a release is a numbered write: crash points fall around it");
    let now = q.read_at(0, 4096).unwrap();
    assert!(all(&now, 0, 1024, 0xAA) && all(&now, 1024, 2048, 0) && all(&now, 3072, 1024, 0xAA));
    // Unsynced: a power cut may undo it.
    assert!(all(&dev.crash_image(2, Damage::Lose), 0, 4096, 0xAA));
    assert!(all(&dev.crash_image(2, Damage::Keep), 1024, 2048, 0));
    q.flush().unwrap();
    assert!(all(&dev.durable_image(), 1024, 2048, 0));
    assert_eq!(dev.current_image(), dev.crash_image(dev.writes(), Damage::Keep));
    let stats = dev.stats();
    assert_eq!((stats.writes, stats.releases, stats.bytes_written), (2, 1, 4096));
    // Misaligned or past the end: refused before it reaches the device, not counted.
    assert!(matches!(dev.release_range(100, 512), Err(Error::InvalidArgument(_))));
    assert!(matches!(dev.release_range(CAP - 512, 1024), Err(Error::InvalidArgument(_))));
    dev.allocate_range(0, CAP).unwrap();
    assert_eq!(dev.writes(), 2);
}

#[test]
fn an_eio_on_writes_fails_a_release_and_leaves_the_bytes() {
    let (dev, mut q) = device();
    put(&mut q, 0, filled(1024, 0x55), true);
    dev.set_faults(FaultPlan {
        faults: vec![
            Fault::Eio { op: OpKind::Write, nth: 1, sticky: false },
            Fault::NoSpace { from_offset: 0 },
        ],
    });
    assert!(matches!(dev.release_range(0, 1024), Err(Error::Io { .. })));
    assert!(all(&q.read_at(0, 1024).unwrap(), 0, 1024, 0x55));
    // The second write: NoSpace would fail a write, not a release.
    dev.release_range(0, 1024).unwrap();
    assert!(all(&q.read_at(0, 1024).unwrap(), 0, 1024, 0));
}
