//! Unit tests of the write group's parts that the model checker does not explore (this file is
//! not shared with `crates/lsm-model`, whose atomics only work inside a shuttle run).

use super::write_group::SpinCredit;

/// Waits that end in time keep writers spinning; waits that run long (synced groups) turn
/// spinning off but for one probe in 16, and a few waits in time turn it back on.
#[test]
fn spin_credit_follows_how_waits_end() {
    let c = SpinCredit::default();
    assert!(c.worth_spinning(), "spinning starts on");
    for _ in 0..100 {
        c.record(true);
    }
    assert!((0..100).all(|_| c.worth_spinning()), "waits in time keep it on");
    // Long waits: each costs more credit than a wait in time earns.
    for _ in 0..8 {
        c.record(false);
    }
    let spun = (0..160).filter(|_| c.worth_spinning()).count();
    assert_eq!(spun, 10, "off but for one probe in 16");
    // Probes that end in time earn the credit back.
    for _ in 0..8 {
        c.record(true);
    }
    assert!((0..100).all(|_| c.worth_spinning()), "back on");
}
