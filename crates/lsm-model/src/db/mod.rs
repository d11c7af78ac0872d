//! The write group and the memtable switch, led as `Db::write` leads them.
//!
//! [`Store`] is a model of the engine's write path with the WAL and the SSTs left out (they
//! sit behind locks that the model keeps: the WAL lock, held by a leader until its group is
//! appended, or, for a pipelined group, until its pages are packed; and the state lock). Its
//! queue and group hand-over are the engine's own (`write_group.rs`, included by path), and
//! so is the publication order of every group (`space/src/page_log/turns.rs`); its memtables are the
//! engine's skiplist ([`crate::memtable::List`]). Every group takes a ticket and lets go of
//! the WAL lock and the leadership before it inserts, as the engine's groups of unsynced
//! writes do on a machine of 8 cores or more (a group that holds on until it has published,
//! as the others do, runs one of the schedules explored here); a pipelined group's page
//! writes are the model's scheduling point between its ticket and its inserts (shuttle lets
//! a later group's "writes" finish first), an appended group's ticket is written at once.
//! The steps of `Inner::write`, `Inner::lead_group`, `Inner::finish_staged`, `Inner::insert_and_publish`, `Inner::append_group`,
//! `Inner::make_room`/`switch_memtable` and `Inner::get` are stated again below, in the same
//! order, each under the name of the function it stands for: a change to one of those
//! functions must be made here too.

#[path = "../../../space/src/page_log/turns.rs"]
mod turns;
#[path = "../../../lsm/src/db/write_group.rs"]
mod write_group;
#[path = "../../../space/src/page_log/write_queue.rs"]
mod write_queue;
use crate::sync;

use std::sync::Arc;

use crate::memtable::List;
use sync::{AtomicU64, Mutex, Ordering};
use turns::Turns;
use write_group::{GroupSync, Outcome, Pending, WriteQueue};

/// The memtable type the write group hands to writers.
pub(crate) type Memtable = List;

/// What a failed group hands its writers; the model's groups never fail.
#[derive(Debug)]
pub(crate) struct Error;

/// Bytes of each model memtable's arena: far more than a model run writes.
const MEMTABLE_BYTES: usize = 1 << 20;
/// Arena chunks small enough that a run crosses several.
const CHUNK_BYTES: usize = 4 << 10;

struct State {
    mem: Arc<Memtable>,
    /// Ops in `mem`: the model sizes memtables in ops, not bytes.
    mem_ops: usize,
    /// Sealed memtables, oldest first (never flushed in the model).
    imm: Vec<Arc<Memtable>>,
    last_seq: u64,
    /// `State::allocated_seq`: ahead of `last_seq` while pipelined groups are in flight.
    allocated_seq: u64,
    switches: usize,
}

/// The write path and the read path over memtables.
pub struct Store {
    writers: WriteQueue,
    /// `Inner::wal`: the leader holds it from its group's stamping to its publication.
    wal: Mutex<()>,
    state: Mutex<State>,
    /// `Inner::published` (`db/published.rs`): the memtables, newest first, swapped whole
    /// under the state lock whenever they change (the engine's `ArcSwap`; a pointer behind a
    /// mutex here, which shuttle can interleave), and the last complete sequence, stored after
    /// the group's inserts. Reads take them without the state lock.
    published_view: Mutex<Arc<Vec<Arc<Memtable>>>>,
    published_seq: AtomicU64,
    memtable_ops: usize,
    leader_inserts_ops_max: usize,
    /// `Inner::pipeline`: whether groups are staged for it (as sync groups are while loggers
    /// are allowed) rather than appended, and its turns, which every group takes.
    pipelined: bool,
    turns: Turns,
}

/// One batch: puts of (key, value).
pub type Batch = Vec<(Vec<u8>, Vec<u8>)>;

/// A batch as a queued record: 8 bytes of first sequence (stamped by the leader), then each
/// op as u32 key length, key, u32 value length, value (little-endian).
fn encode(batch: &Batch) -> Vec<u8> {
    let mut out = vec![0u8; 8];
    for (k, v) in batch {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

fn decode(record: &[u8]) -> Batch {
    let mut ops = Vec::new();
    let mut at = 8;
    let take = |at: &mut usize| {
        let len = u32::from_le_bytes(record[*at..*at + 4].try_into().unwrap()) as usize;
        let bytes = record[*at + 4..*at + 4 + len].to_vec();
        *at += 4 + len;
        bytes
    };
    while at < record.len() {
        let k = take(&mut at);
        let v = take(&mut at);
        ops.push((k, v));
    }
    ops
}

/// `insert_ops`: a batch's ops into a memtable, numbered from `first_seq`.
fn insert_ops(batch: &Batch, first_seq: u64, mem: &Memtable) {
    for (i, (k, v)) in batch.iter().enumerate() {
        assert!(mem.insert(k, first_seq + i as u64, v), "model memtables never fill");
    }
}

impl Store {
    /// A store whose memtables are switched once they hold `memtable_ops` ops, and whose
    /// leaders insert a group's ops themselves up to `leader_inserts_ops_max` ops (above it,
    /// each writer inserts its own, as in a large group of the engine).
    pub fn new(memtable_ops: usize, leader_inserts_ops_max: usize) -> Store {
        Store::with_pipeline(memtable_ops, leader_inserts_ops_max, false)
    }

    /// As [`Store::new`]; with `pipelined`, every group is staged for the WAL pipeline.
    pub fn with_pipeline(
        memtable_ops: usize,
        leader_inserts_ops_max: usize,
        pipelined: bool,
    ) -> Store {
        let mem = Arc::new(List::new(MEMTABLE_BYTES, CHUNK_BYTES));
        let state =
            State { mem, mem_ops: 0, imm: Vec::new(), last_seq: 0, allocated_seq: 0, switches: 0 };
        Store {
            writers: WriteQueue::default(),
            wal: Mutex::new(()),
            published_view: Mutex::new(Arc::new(vec![state.mem.clone()])),
            published_seq: AtomicU64::new(0),
            state: Mutex::new(state),
            memtable_ops,
            leader_inserts_ops_max,
            pipelined,
            turns: Turns::new(),
        }
    }

    /// `Inner::write`: queue the batch, then lead a group, insert as told, or be done.
    pub fn write(&self, batch: &Batch) {
        let (id, outcome) = self.writers.join(encode(batch), batch.len(), batch.len(), false);
        match outcome {
            Outcome::Lead => self.lead_group(id, batch),
            Outcome::Insert { first_seq, mem, group } => {
                insert_ops(batch, first_seq, &mem);
                group.inserted();
                group.wait_published();
            }
            Outcome::Done => {}
            Outcome::Failed(e) => panic!("model groups never fail: {e:?}"),
        }
    }

    /// `Inner::lead_group`.
    fn lead_group(&self, id: u64, batch: &Batch) {
        let mut group = self.writers.take_group(usize::MAX);
        assert_eq!(group[0].id, id, "the leader is first in its group");
        let wal = self.wal.lock();
        if !self.pipelined {
            // `Inner::wait_pipeline_written`: before an append that is not staged.
            self.turns.wait_written().expect("model writes never fail");
        }
        let (firsts, mem, last_seq) = self.append_group(&mut group);
        let ticket = if self.pipelined { self.turns.begin() } else { self.turns.begin_written() };
        drop(wal);
        self.writers.pass_leadership();
        let group_seqs = (firsts.as_slice(), &mem, last_seq);
        if self.pipelined {
            self.finish_staged(id, batch, &group, group_seqs, ticket);
        } else {
            self.insert_and_publish(id, batch, &group, group_seqs, ticket);
        }
    }

    /// `Inner::finish_staged`: the pages' writes (a scheduling point: a later group's may
    /// finish first), then the inserts and the publication in turn.
    fn finish_staged(
        &self,
        id: u64,
        batch: &Batch,
        group: &[Pending],
        group_seqs: (&[u64], &Arc<Memtable>, u64),
        ticket: u64,
    ) {
        shuttle::thread::yield_now();
        self.turns.written(ticket);
        self.insert_and_publish(id, batch, group, group_seqs, ticket);
    }

    /// `Inner::insert_and_publish`: the inserts, then the publication in the ticket's turn.
    fn insert_and_publish(
        &self,
        id: u64,
        batch: &Batch,
        group: &[Pending],
        (firsts, mem, last_seq): (&[u64], &Arc<Memtable>, u64),
        ticket: u64,
    ) {
        let ops: usize = group.iter().map(|p| p.ops).sum();
        if group.len() == 1 || ops <= self.leader_inserts_ops_max {
            for (p, &first_seq) in group.iter().zip(firsts) {
                insert_ops(&decode(&p.record), first_seq, mem);
            }
            self.turns.wait_turn(ticket).expect("model writes never fail");
            self.publish_last_seq(last_seq);
            self.turns.published(ticket);
            let outcomes = group.iter().map(|p| (p.id, Outcome::Done)).collect();
            self.writers.finish(id, outcomes);
        } else {
            let sync = GroupSync::new(group.len());
            let outcomes = group
                .iter()
                .zip(firsts)
                .map(|(p, &first_seq)| {
                    (p.id, Outcome::Insert { first_seq, mem: mem.clone(), group: sync.clone() })
                })
                .collect();
            self.writers.finish(id, outcomes);
            insert_ops(batch, firsts[0], mem);
            sync.inserted();
            sync.wait_inserted();
            self.turns.wait_turn(ticket).expect("model writes never fail");
            self.publish_last_seq(last_seq);
            self.turns.published(ticket);
            sync.publish();
        }
    }

    /// `Inner::append_group` with `make_room` (a full memtable is sealed and a new one
    /// started, under the state lock) and no WAL.
    fn append_group(&self, group: &mut [Pending]) -> (Vec<u64>, Arc<Memtable>, u64) {
        let ops: usize = group.iter().map(|p| p.ops).sum();
        let mut st = self.state.lock();
        if st.mem_ops > 0 && st.mem_ops + ops > self.memtable_ops {
            // `switch_memtable`: groups in flight still inserting into the memtable finish
            // first, the state lock let go meanwhile (they publish under it).
            drop(st);
            self.turns.wait_idle().expect("model writes never fail");
            st = self.state.lock();
            let full =
                std::mem::replace(&mut st.mem, Arc::new(List::new(MEMTABLE_BYTES, CHUNK_BYTES)));
            st.imm.push(full);
            st.mem_ops = 0;
            st.switches += 1;
            self.publish_view(&st);
        }
        let mut seq = st.allocated_seq + 1;
        let mut firsts = Vec::with_capacity(group.len());
        for p in group.iter_mut() {
            p.record[..8].copy_from_slice(&seq.to_le_bytes());
            firsts.push(seq);
            seq += p.ops as u64;
        }
        st.allocated_seq = seq - 1;
        st.mem_ops += ops;
        (firsts, st.mem.clone(), seq - 1)
    }

    /// `Inner::publish_view`: under the state lock, after every change to the memtables.
    fn publish_view(&self, st: &State) {
        let mut mems = vec![st.mem.clone()];
        mems.extend(st.imm.iter().rev().cloned());
        *self.published_view.lock() = Arc::new(mems);
    }

    /// `Inner::publish_last_seq`: the state's last sequence and the published one.
    fn publish_last_seq(&self, seq: u64) {
        let mut st = self.state.lock();
        assert!(seq > st.last_seq, "publication went back from {} to {seq}", st.last_seq);
        st.last_seq = seq;
        st.allocated_seq = st.allocated_seq.max(seq);
        self.published_seq.store(seq, Ordering::Release);
    }

    /// `Inner::get` over the memtables (`Inner::read_view`, `Publication::load`): the last
    /// published sequence, then the published memtables (the active one, then the sealed
    /// ones newest first), without the state lock.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.get_at(key, None)
    }

    /// As [`Store::get`], at `snapshot` (a sequence from [`Store::snapshot`]) if given.
    pub fn get_at(&self, key: &[u8], snapshot: Option<u64>) -> Option<Vec<u8>> {
        let last_seq = self.published_seq.load(Ordering::Acquire);
        let mems = self.published_view.lock().clone();
        let snapshot = snapshot.unwrap_or(last_seq);
        mems.iter().find_map(|m| m.get(key, snapshot)).map(|(_, v)| v)
    }

    /// `Db::snapshot`: the last published sequence, which every later read at it must see
    /// the same way.
    pub fn snapshot(&self) -> u64 {
        self.state.lock().last_seq
    }

    /// Memtable switches so far.
    pub fn switches(&self) -> usize {
        self.state.lock().switches
    }

    /// The last published sequence number.
    pub fn last_seq(&self) -> u64 {
        self.state.lock().last_seq
    }
}
