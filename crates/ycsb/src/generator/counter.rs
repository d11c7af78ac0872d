//! Counters shared by all client threads: the load phase's record numbers, and the run phase's
//! insert numbers, which "latest" and the key choosers may only pick once acknowledged.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// YCSB's `CounterGenerator`: hands out `start, start + 1, ...` to any number of threads.
#[derive(Debug)]
pub struct CounterGenerator {
    next: AtomicU64,
}

impl CounterGenerator {
    /// A counter whose first value is `start`.
    pub fn new(start: u64) -> CounterGenerator {
        CounterGenerator { next: AtomicU64::new(start) }
    }

    /// The next value; each value goes to exactly one caller.
    pub fn next_value(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The value before the next one (YCSB's `lastValue`); `None` before 0 was handed out.
    pub fn last_value(&self) -> Option<u64> {
        self.next.load(Ordering::Relaxed).checked_sub(1)
    }
}

/// Unacknowledged values the [`AcknowledgedCounterGenerator`] tracks at once (YCSB's 2^20).
pub const ACK_WINDOW: u64 = 1 << 20;

/// YCSB's `AcknowledgedCounterGenerator`: a counter whose [`last_value`] only moves past a value
/// once it and every value before it have been acknowledged, i.e. their inserts are done.
///
/// The run phase's inserts take numbers from it, and the key choosers never pick a number
/// above `last_value`, so a read never asks for a record whose insert is still in flight.
///
/// [`last_value`]: AcknowledgedCounterGenerator::last_value
///
/// ```
/// use ycsb::generator::AcknowledgedCounterGenerator;
///
/// let c = AcknowledgedCounterGenerator::new(10);
/// assert_eq!(c.last_value(), Some(9));
/// let (a, b) = (c.next_value(), c.next_value());
/// c.acknowledge(b);
/// assert_eq!(c.last_value(), Some(9)); // 10 is still in flight
/// c.acknowledge(a);
/// assert_eq!(c.last_value(), Some(11));
/// ```
#[derive(Debug)]
pub struct AcknowledgedCounterGenerator {
    counter: CounterGenerator,
    /// `window[v % ACK_WINDOW]`: value `v` is acknowledged but `limit` has not passed it yet.
    window: Vec<AtomicBool>,
    /// One plus the highest value below which everything is acknowledged (0: none yet).
    limit: AtomicU64,
    /// Held by the one thread moving `limit`; others leave their acknowledgement in `window`.
    advancing: Mutex<()>,
}

impl AcknowledgedCounterGenerator {
    /// A counter whose first value is `start`; values below `start` count as acknowledged.
    pub fn new(start: u64) -> AcknowledgedCounterGenerator {
        AcknowledgedCounterGenerator {
            counter: CounterGenerator::new(start),
            window: (0..ACK_WINDOW).map(|_| AtomicBool::new(false)).collect(),
            limit: AtomicU64::new(start),
            advancing: Mutex::new(()),
        }
    }

    /// The next value; acknowledge it once its insert is done.
    pub fn next_value(&self) -> u64 {
        self.counter.next_value()
    }

    /// The highest value below which (inclusive) every value is acknowledged; `None` when the
    /// counter started at 0 and 0 is not acknowledged yet.
    pub fn last_value(&self) -> Option<u64> {
        self.limit.load(Ordering::Acquire).checked_sub(1)
    }

    /// Marks `value` done, and moves [`last_value`](Self::last_value) past every contiguous
    /// acknowledged value unless another thread is doing so (then that thread, or the next
    /// acknowledgement, moves it: as YCSB's `tryLock`).
    ///
    /// # Panics
    /// When [`ACK_WINDOW`] values are outstanding at once (YCSB throws "Too many
    /// unacknowledged insertion keys"); with one insert in flight per thread that needs a
    /// million threads.
    pub fn acknowledge(&self, value: u64) {
        let slot = &self.window[(value % ACK_WINDOW) as usize];
        let was_set = slot.swap(true, Ordering::AcqRel);
        assert!(!was_set, "too many unacknowledged insertion keys (window {ACK_WINDOW})");
        let Ok(_guard) = self.advancing.try_lock() else { return };
        let mut limit = self.limit.load(Ordering::Acquire);
        // At most one pass over the window, as YCSB's loop.
        for _ in 0..ACK_WINDOW {
            let s = &self.window[(limit % ACK_WINDOW) as usize];
            if !s.swap(false, Ordering::AcqRel) {
                break;
            }
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_hands_out_each_value_once() {
        let c = CounterGenerator::new(0);
        assert_eq!(c.last_value(), None);
        let seen: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..1000).map(|_| c.next_value()).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..4000).collect::<Vec<_>>());
        assert_eq!(c.last_value(), Some(3999));
    }

    #[test]
    fn acknowledged_counter_moves_only_over_contiguous_acks() {
        let c = AcknowledgedCounterGenerator::new(0);
        assert_eq!(c.last_value(), None);
        let v: Vec<u64> = (0..5).map(|_| c.next_value()).collect();
        c.acknowledge(v[2]);
        c.acknowledge(v[1]);
        assert_eq!(c.last_value(), None);
        c.acknowledge(v[0]);
        assert_eq!(c.last_value(), Some(2));
        c.acknowledge(v[4]);
        assert_eq!(c.last_value(), Some(2));
        c.acknowledge(v[3]);
        assert_eq!(c.last_value(), Some(4));
    }

    #[test]
    fn acknowledged_counter_under_threads_reaches_the_end() {
        let c = AcknowledgedCounterGenerator::new(100);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..5000 {
                        let v = c.next_value();
                        let seen = c.last_value().unwrap();
                        assert!(seen < v, "{seen} acknowledged before {v} was");
                        c.acknowledge(v);
                    }
                });
            }
        });
        // A thread that lost try_lock leaves its value for the next acknowledgement; one more
        // settles everything.
        let v = c.next_value();
        c.acknowledge(v);
        assert_eq!(c.last_value(), Some(100 + 20_000));
    }
}
