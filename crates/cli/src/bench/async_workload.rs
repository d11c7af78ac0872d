//! `--async`: the write and point-read benchmarks through the async API (`Db::submit_write`,
//! `Db::submit_get`).
//!
//! Each thread keeps a window of up to [`WINDOW_TICKETS`] tickets outstanding: it submits,
//! and when the window is full, or the store answers Busy, it waits for its oldest ticket
//! before going on (resubmitting what was refused). An operation counts when its ticket
//! completes, so ops/sec is completed operations over the run, as without `--async`. A
//! histogram's latency is each ticket's own, as the client sees it: from the first attempt to
//! submit it (Busy answers included) to its completion being taken, so time a completed ticket
//! waits behind an older one in the window counts too. Tickets that are already complete
//! (lucky reads, answered on the thread itself) are counted at once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use shale_lsm::{Db, Error, ReadOptions, Result, Ticket, WriteBatch};

use crate::bench::keys::{KeyGen, ValueGen, format_key};
use crate::bench::report::ThreadStats;
use crate::bench::workload::{Budget, Shared};

/// Tickets a benchmark thread keeps outstanding with `--async`.
pub const WINDOW_TICKETS: usize = 32;

/// A thread's outstanding tickets, oldest first, each with when it was first submitted and
/// what it stands for.
struct Window<T, M> {
    outstanding: VecDeque<(Ticket<T>, Instant, M)>,
}

impl<T, M> Window<T, M> {
    fn new() -> Window<T, M> {
        Window { outstanding: VecDeque::with_capacity(WINDOW_TICKETS) }
    }

    /// Submits through `submit` until admitted, completing the oldest ticket after each Busy;
    /// then completes tickets while the window is full or its oldest is done. `done` is told
    /// each completed ticket's result, what it stands for and its latency.
    fn submit(
        &mut self,
        mut submit: impl FnMut() -> Result<Ticket<T>>,
        what: M,
        done: &mut impl FnMut(T, M, Duration),
    ) -> Result<()> {
        let submitted = Instant::now();
        let ticket = loop {
            match submit() {
                Ok(ticket) => break ticket,
                // Every queue place is another thread's: give it the core.
                Err(Error::Busy) if self.outstanding.is_empty() => std::thread::yield_now(),
                Err(Error::Busy) => self.complete_oldest(done)?,
                Err(e) => return Err(e),
            }
        };
        self.outstanding.push_back((ticket, submitted, what));
        while self.outstanding.len() >= WINDOW_TICKETS
            || self.outstanding.front().is_some_and(|(t, _, _)| t.is_done())
        {
            self.complete_oldest(done)?;
        }
        Ok(())
    }

    /// Waits for the oldest ticket and hands its result to `done`.
    fn complete_oldest(&mut self, done: &mut impl FnMut(T, M, Duration)) -> Result<()> {
        if let Some((ticket, submitted, what)) = self.outstanding.pop_front() {
            let result = ticket.wait()?;
            done(result, what, submitted.elapsed());
        }
        Ok(())
    }

    /// Waits for every ticket left.
    fn drain(&mut self, done: &mut impl FnMut(T, M, Duration)) -> Result<()> {
        while !self.outstanding.is_empty() {
            self.complete_oldest(done)?;
        }
        Ok(())
    }
}

/// The fill benchmarks and overwrite: `--batch_size` entries per submitted batch until the
/// budget is spent.
pub fn write(
    db: &Db,
    sh: &Shared,
    st: &mut ThreadStats,
    mut keys: KeyGen,
    seed: u64,
) -> Result<()> {
    let mut values = ValueGen::new(sh.value_size, seed ^ 0x5eed);
    let mut k = vec![0; sh.key_size];
    let mut budget = Budget::new(sh);
    let entry_bytes = (sh.key_size + sh.value_size) as u64;
    let mut window = Window::new();
    // Each ticket stands for its batch's entries: the last batch may be cut short.
    let mut done = |(), entries: u64, latency| {
        st.finished_ops_after(entries, entries * entry_bytes, latency);
    };
    let mut submitted = 0;
    while !budget.done(submitted) {
        let entries = budget.batch_entries(submitted, sh.batch_size);
        let mut batch = WriteBatch::new();
        for _ in 0..entries {
            format_key(keys.next_number(), &mut k);
            batch.put(&k, values.next_value());
        }
        if !budget.acquire(sh.rate.as_ref(), entries as u64 * entry_bytes) {
            break;
        }
        window.submit(|| db.submit_write(&batch, &sh.write), entries as u64, &mut done)?;
        submitted += entries as u64;
    }
    window.drain(&mut done)
}

/// readrandom and readmissing: one random key of `key_size` bytes per submitted get.
pub fn read_random(
    db: &Db,
    sh: &Shared,
    st: &mut ThreadStats,
    mut keys: KeyGen,
    key_size: usize,
) -> Result<()> {
    let mut k = vec![0; key_size];
    let mut budget = Budget::new(sh);
    let opts = ReadOptions::default();
    let mut window = Window::new();
    let mut done = |value: Option<Vec<u8>>, (), latency| {
        let bytes = value.as_ref().map_or(0, |v| (key_size + v.len()) as u64);
        st.looked_up(1, u64::from(value.is_some()));
        st.finished_ops_after(1, bytes, latency);
    };
    let mut submitted = 0;
    while !budget.done(submitted) {
        format_key(keys.next_number(), &mut k);
        window.submit(|| db.submit_get(&k, &opts), (), &mut done)?;
        submitted += 1;
    }
    window.drain(&mut done)
}
