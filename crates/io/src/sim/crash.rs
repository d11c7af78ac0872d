//! Crash images: what stable media could hold after a power cut at a given crash point.
//!
//! The image is rebuilt from the trace in three stages:
//! 1. Cut the trace at the crash point (right after write `k`, flushes after it included).
//! 2. Walk it backwards to mark each write durable (written with FUA, or followed by a flush
//!    before the cut) or unsynced.
//! 3. Replay it forwards onto the initial image, in trace order: durable writes and
//!    corruptions always apply; each unsynced write is kept, dropped or torn per [`Damage`].
//!    Replaying in trace order is what lets a later write survive while an earlier one is lost,
//!    which is how reordering in the device's cache shows up.

use super::rng::SplitMix64;
use super::trace::Event;

/// What a power cut does to writes that were not yet durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Every unsynced write is lost (a clean power cut that empties the cache).
    Lose,
    /// Every unsynced write reached the media.
    Keep,
    /// Each unsynced write is independently kept, dropped or torn (one chance in three each); a
    /// torn write is split into pieces at `torn_unit` boundaries of the device (512 or 4096),
    /// and each piece is kept or dropped. A write's fate depends only on `seed` and the write's
    /// number, so the same write fares the same at every crash point.
    Random {
        /// Seed of the fates.
        seed: u64,
        /// Size and alignment of the pieces a torn write breaks into.
        torn_unit: u32,
    },
    /// Every unsynced write is kept except the last one, which is torn into `torn_unit`
    /// pieces, each kept or dropped per `seed` (the classic torn tail of a log).
    TornLast {
        /// Seed of the pieces' fates.
        seed: u64,
        /// Size and alignment of the pieces.
        torn_unit: u32,
    },
    /// Write number `write` never reached the media, durable or not: it was still in flight
    /// at the power cut while later writes, submitted beside it, had completed (an engine that
    /// keeps several durable writes in flight must survive this). Every other unsynced write
    /// is lost, as with [`Damage::Lose`].
    LostInFlight {
        /// The write lost.
        write: u64,
    },
}

/// How one unsynced write reaches the media.
enum Fate {
    Keep,
    Drop,
    Torn(SplitMix64),
}

/// Replays `events` (already cut at the crash point) onto `image`.
///
/// # Panics
/// If the damage's `torn_unit` is not a power of two of at least 512.
pub(crate) fn replay(image: &mut [u8], events: &[Event], damage: Damage) {
    if let Damage::Random { torn_unit, .. } | Damage::TornLast { torn_unit, .. } = damage {
        assert!(
            torn_unit.is_power_of_two() && torn_unit >= 512,
            "torn_unit {torn_unit} is not a power of two of at least 512"
        );
    }
    let unsynced = unsynced_writes(events);
    let last_unsynced = unsynced.iter().rposition(|&u| u);
    for (i, event) in events.iter().enumerate() {
        match event {
            Event::Write { number, offset, data, .. } => {
                let fate = match damage {
                    Damage::LostInFlight { write } if write == *number => Fate::Drop,
                    _ if !unsynced[i] => Fate::Keep,
                    _ => fate(damage, *number, Some(i) == last_unsynced),
                };
                apply(image, *offset, data, fate, damage);
            }
            Event::Corrupt { offset, xor } => image[*offset as usize] ^= xor,
            Event::Flush => {}
        }
    }
}

/// Stage 2: `result[i]` is true when event `i` is a write not yet durable at the cut.
fn unsynced_writes(events: &[Event]) -> Vec<bool> {
    let mut unsynced = vec![false; events.len()];
    let mut flushed_later = false;
    for (i, event) in events.iter().enumerate().rev() {
        match event {
            Event::Flush => flushed_later = true,
            Event::Write { durable, .. } => unsynced[i] = !durable && !flushed_later,
            Event::Corrupt { .. } => {}
        }
    }
    unsynced
}

fn fate(damage: Damage, number: u64, is_last: bool) -> Fate {
    match damage {
        Damage::Lose | Damage::LostInFlight { .. } => Fate::Drop,
        Damage::Keep => Fate::Keep,
        Damage::Random { seed, .. } => {
            let mut rng = SplitMix64::for_item(seed, number);
            match rng.below(3) {
                0 => Fate::Keep,
                1 => Fate::Drop,
                _ => Fate::Torn(rng),
            }
        }
        Damage::TornLast { seed, .. } if is_last => Fate::Torn(SplitMix64::for_item(seed, number)),
        Damage::TornLast { .. } => Fate::Keep,
    }
}

fn apply(image: &mut [u8], offset: u64, data: &[u8], fate: Fate, damage: Damage) {
    let start = offset as usize;
    let len = data.len();
    let target = &mut image[start..start + len];
    match fate {
        Fate::Keep => target.copy_from_slice(data),
        Fate::Drop => {}
        Fate::Torn(mut rng) => {
            let unit = match damage {
                Damage::Random { torn_unit, .. } | Damage::TornLast { torn_unit, .. } => {
                    torn_unit as usize
                }
                Damage::Lose | Damage::Keep | Damage::LostInFlight { .. } => {
                    unreachable!("only seeded damage tears")
                }
            };
            // Pieces follow the device's unit boundaries, not the write's start: that is where
            // a real device's atomicity ends.
            let mut piece_start = 0;
            while piece_start < len {
                let piece_end = ((start + piece_start) / unit + 1) * unit - start;
                let piece_end = piece_end.min(len);
                if rng.coin() {
                    target[piece_start..piece_end].copy_from_slice(&data[piece_start..piece_end]);
                }
                piece_start = piece_end;
            }
        }
    }
}
