//! Unit tests of the group-commit queue with real threads (this file is not shared with
//! `crates/lsm-model`, which explores the queue's interleavings under shuttle).

use std::sync::Arc;
use std::sync::mpsc;

use super::write_queue::{Queued, SpinCredit, Told, WriteQueue};

#[derive(Debug)]
struct Item {
    id: u64,
    bytes: usize,
}

impl Queued for Item {
    fn id(&self) -> u64 {
        self.id
    }
    fn footprint(&self) -> usize {
        self.bytes
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Said {
    Lead,
    Done(u64),
    Failed,
}

impl Told for Said {
    fn lead() -> Said {
        Said::Lead
    }
}

/// Waits until `n` writers are queued behind the leader (an event, not a time).
fn queued(q: &WriteQueue<Item, Said>, n: usize) {
    while q.waiting() < n {
        std::thread::yield_now();
    }
}

#[test]
fn the_first_writer_leads_and_takes_the_queue_up_to_the_cap_then_passes_on() {
    let q = Arc::new(WriteQueue::<Item, Said>::new());
    let (id, told) = q.join(|id| Item { id, bytes: 10 });
    assert_eq!(told, Said::Lead);
    // Four writers queue while it leads.
    let (tx, rx) = mpsc::channel();
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (q, tx) = (q.clone(), tx.clone());
            std::thread::spawn(move || {
                let (me, told) = q.join(|id| Item { id, bytes: 10 });
                tx.send((me, told)).unwrap();
            })
        })
        .collect();
    queued(&q, 5);
    // The leader's group: itself and one more within 25 bytes.
    let group = q.take_group(25);
    assert_eq!(group.len(), 2);
    assert_eq!(group[0].id, id);
    let other = group[1].id;
    q.finish(id, group.iter().map(|p| (p.id, Said::Done(p.id))).collect());
    assert_eq!(rx.recv().unwrap(), (other, Said::Done(other)), "the grouped writer is told");
    // Passing on: the next queued writer leads, and its group holds at least itself,
    // whatever the cap.
    q.pass_leadership();
    let (next, told) = rx.recv().unwrap();
    assert_eq!(told, Said::Lead);
    let group = q.take_group(5);
    assert_eq!(group.iter().map(|p| p.id).collect::<Vec<_>>(), vec![next]);
    q.finish(next, vec![(next, Said::Done(next))]);
    q.pass_leadership();
    let (third, told) = rx.recv().unwrap();
    assert_eq!(told, Said::Lead);
    // A leader that gives up: its group's writers are told it failed, and the leadership
    // passes on (to no one: the queue is empty).
    let group = q.take_group(100);
    assert_eq!(group.len(), 2);
    let last = group[1].id;
    q.abandon(third, || Said::Failed);
    assert_eq!(rx.recv().unwrap(), (last, Said::Failed));
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(q.waiting(), 0);
    let (_, told) = q.join(|id| Item { id, bytes: 1 });
    assert_eq!(told, Said::Lead, "nobody leads after the abandoned group");
}

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
