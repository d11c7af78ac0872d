//! The write controller: when writes must wait or slow down, from RocksDB's stall conditions.
//! A pure function of the store's shape, so the conditions are tested exactly and a tuner can
//! ask the same question the write path does.

use crate::options::Options;
use crate::stats::Stall;

/// What the write path must do before a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    /// Go ahead.
    None,
    /// Delay this write a little (and count it as a stall of this kind).
    Delay(Stall),
    /// Wait until background work changes the shape (a stall of this kind).
    Stop(Stall),
}

/// The pressure on writes with `l0_files` SSTs in L0 and `pending_compaction_bytes` of
/// compaction debt. Stops win over delays; L0 over pending bytes. A limit of 0 is off.
pub fn pressure(opts: &Options, l0_files: usize, pending_compaction_bytes: u64) -> Pressure {
    let over = |limit: u64| limit > 0 && pending_compaction_bytes >= limit;
    if l0_files >= opts.level0_stop_writes_trigger {
        Pressure::Stop(Stall::L0Stop)
    } else if over(opts.hard_pending_compaction_bytes_limit) {
        Pressure::Stop(Stall::PendingStop)
    } else if l0_files >= opts.level0_slowdown_writes_trigger {
        Pressure::Delay(Stall::L0Slowdown)
    } else if over(opts.soft_pending_compaction_bytes_limit) {
        Pressure::Delay(Stall::PendingSlowdown)
    } else {
        Pressure::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_conditions_follow_rocksdb() {
        let o = Options {
            soft_pending_compaction_bytes_limit: 100,
            hard_pending_compaction_bytes_limit: 200,
            ..Options::default()
        };
        assert_eq!(pressure(&o, 0, 0), Pressure::None);
        assert_eq!(pressure(&o, 19, 99), Pressure::None);
        assert_eq!(pressure(&o, 20, 0), Pressure::Delay(Stall::L0Slowdown));
        assert_eq!(pressure(&o, 0, 100), Pressure::Delay(Stall::PendingSlowdown));
        assert_eq!(pressure(&o, 36, 0), Pressure::Stop(Stall::L0Stop));
        assert_eq!(pressure(&o, 0, 200), Pressure::Stop(Stall::PendingStop));
        assert_eq!(pressure(&o, 36, 500), Pressure::Stop(Stall::L0Stop), "L0 first");
        assert_eq!(pressure(&o, 20, 200), Pressure::Stop(Stall::PendingStop), "stops win");
        let off = Options {
            soft_pending_compaction_bytes_limit: 0,
            hard_pending_compaction_bytes_limit: 0,
            ..o
        };
        assert_eq!(pressure(&off, 0, u64::MAX), Pressure::None);
    }
}
