//! The order in which write groups publish (`pipeline.rs`): tickets handed out in the order
//! of the groups' WAL pages, each group publishing only once its own pages are
//! written and every earlier ticket has published, so an acknowledged write never follows a
//! hole in the log.
//!
//! Kept apart from the logger queues so that `crates/lsm-model` compiles this very file
//! against shuttle's primitives (it names them through `super::sync`) and explores the
//! turns beside the write group's hand-over and the memtable switch.
//!
//! Every write group takes a ticket, not only the pipelined ones: a group appended under the
//! WAL lock takes one already written ([`Turns::begin_written`]) and lets go of the lock and
//! of the leadership before it inserts, so that groups insert side by side and publish in
//! order.
//!
//! Life of a ticket: [`Turns::begin`] -> [`Turns::written`] or [`Turns::failed`] (or both at
//! once: [`Turns::begin_written`]) -> (the group inserts into its memtable) ->
//! [`Turns::wait_turn`] -> [`Turns::published`].

use super::sync::{AtomicU64, Condvar, Mutex, Ordering, spin_until};
use std::collections::VecDeque;

struct TurnState {
    /// The ticket the next [`Turns::begin`] hands out.
    next: u64,
    /// Every ticket below this one has published.
    published_below: u64,
    /// Whether each unpublished ticket's pages are written: entry `i` is ticket
    /// `published_below + i` (a ring that keeps its memory, where a set allocated and freed
    /// a node for nearly every group).
    written: VecDeque<bool>,
    /// How many of `written` are true.
    written_count: usize,
    /// The first ticket whose pages failed, with why: it and every later ticket fail.
    failed: Option<(u64, String)>,
}

/// The publication order of pipelined groups.
pub struct Turns {
    state: Mutex<TurnState>,
    cv: Condvar,
    /// `TurnState::published_below`, readable without the lock: a group waiting for its
    /// turn watches it for a moment before it sleeps.
    published_below: AtomicU64,
    /// `TurnState::next`, readable without the lock ([`Turns::idle`]).
    handed_out: AtomicU64,
}

impl Default for Turns {
    fn default() -> Turns {
        Turns::new()
    }
}

impl Turns {
    pub fn new() -> Turns {
        Turns {
            state: Mutex::new(TurnState {
                next: 0,
                published_below: 0,
                written: VecDeque::new(),
                written_count: 0,
                failed: None,
            }),
            cv: Condvar::new(),
            published_below: AtomicU64::new(0),
            handed_out: AtomicU64::new(0),
        }
    }

    /// Whether every ticket handed out has published. Called under the WAL lock, under which
    /// alone tickets are handed out, it stays true for as long as the caller holds the lock
    /// and takes no ticket: a group that holds the lock until it has published then needs
    /// none.
    pub fn idle(&self) -> bool {
        self.published_below.load(Ordering::Acquire) == self.handed_out.load(Ordering::Relaxed)
    }

    /// Hands out the next ticket (called under the WAL lock, right after the group's pages
    /// were packed, so tickets follow the pages' order).
    pub fn begin(&self) -> u64 {
        self.hand_out(false)
    }

    /// Hands out the next ticket, its pages already written: a group appended to the WAL
    /// under the WAL lock, which only needs its turn to publish in order.
    pub fn begin_written(&self) -> u64 {
        self.hand_out(true)
    }

    fn hand_out(&self, written: bool) -> u64 {
        let mut st = self.state.lock();
        let t = st.next;
        st.next += 1;
        self.handed_out.store(st.next, Ordering::Relaxed);
        st.written.push_back(written);
        st.written_count += usize::from(written);
        t
    }

    /// `ticket`'s pages are written (durably).
    pub fn written(&self, ticket: u64) {
        let mut st = self.state.lock();
        let at = (ticket - st.published_below) as usize;
        if !std::mem::replace(&mut st.written[at], true) {
            st.written_count += 1;
        }
        drop(st);
        self.cv.notify_all();
    }

    /// `ticket`'s pages failed: it and every later ticket fail; earlier ones may still
    /// publish.
    pub fn failed(&self, ticket: u64, why: String) {
        let mut st = self.state.lock();
        if st.failed.as_ref().is_none_or(|(t, _)| ticket < *t) {
            st.failed = Some((ticket, why));
        }
        self.cv.notify_all();
    }

    /// Every ticket below this one has published.
    pub fn published_below(&self) -> u64 {
        self.state.lock().published_below
    }

    /// Fails every ticket not yet published (the store stopped for another reason).
    pub fn fail_unpublished(&self, why: String) {
        let below = self.state.lock().published_below;
        self.failed(below, why);
    }

    /// Whether some ticket failed.
    pub fn any_failed(&self) -> bool {
        self.state.lock().failed.is_some()
    }

    /// Waits until `ticket` may publish: its pages written and every earlier ticket
    /// published.
    ///
    /// # Errors
    /// Why, if this ticket or an earlier one failed: its pages may follow a hole, and its
    /// writes must not be acknowledged.
    ///
    /// The wait is usually for an earlier group's inserts, a few microseconds: it watches
    /// for them without sleeping first (`sync::spin_until`), since a thread that sleeps takes
    /// tens of microseconds to wake, and every later group waits behind it (fillrandom, 4
    /// threads on 16 cores, groups overlapped: 45% of the writers' time went to these waits
    /// when they slept at once).
    pub fn wait_turn(&self, ticket: u64) -> Result<(), String> {
        spin_until(|| self.published_below.load(Ordering::Acquire) >= ticket);
        let mut st = self.state.lock();
        loop {
            if let Some((t, why)) = &st.failed {
                if *t <= ticket {
                    return Err(why.clone());
                }
            }
            if st.published_below == ticket && st.written.front() == Some(&true) {
                return Ok(());
            }
            self.cv.wait(&mut st);
        }
    }

    /// `ticket` published (it had its turn): the next one may.
    pub fn published(&self, ticket: u64) {
        let mut st = self.state.lock();
        assert_eq!(st.published_below, ticket, "tickets publish in order");
        assert_eq!(st.written.pop_front(), Some(true), "a ticket publishes once written");
        st.written_count -= 1;
        st.published_below = ticket + 1;
        self.published_below.store(ticket + 1, Ordering::Release);
        self.cv.notify_all();
    }

    /// Waits until every ticket handed out has its pages written (it may not have published:
    /// its group may still be inserting or waiting for its turn).
    ///
    /// # Errors
    /// Why, if a ticket failed.
    pub fn wait_written(&self) -> Result<(), String> {
        let mut st = self.state.lock();
        loop {
            if let Some((_, why)) = &st.failed {
                return Err(why.clone());
            }
            if st.written_count == st.written.len() {
                return Ok(());
            }
            self.cv.wait(&mut st);
        }
    }

    /// Waits until every ticket handed out has published.
    ///
    /// # Errors
    /// Why, if a ticket failed (the tickets after it never publish).
    pub fn wait_idle(&self) -> Result<(), String> {
        let mut st = self.state.lock();
        loop {
            if let Some((_, why)) = &st.failed {
                return Err(why.clone());
            }
            if st.published_below == st.next {
                return Ok(());
            }
            self.cv.wait(&mut st);
        }
    }
}
