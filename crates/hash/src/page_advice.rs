//! The log's page cache advice (`POSIX_FADV_WILLNEED` for a sealed segment, `DONTNEED` for
//! a collected one), given on a thread of its own.
//!
//! Why a thread: the advice is only a hint, but the kernel acts on WILLNEED before the call
//! returns (it allocates the pages and submits their reads): milliseconds for an 8 MiB
//! segment (BENCHMARKS-history.md has the measurement). The segment is sealed by whichever thread runs
//! the worker's turn, at queue depth 1 the caller's own, whose store would wait that long;
//! with the advice handed over it waits for a channel send. One thread, in order, so a
//! collected segment's DONTNEED never runs before the WILLNEED of its sealing.
//!
//! A failed advice costs only the hint: the read path checks every record it reads and
//! goes to the device on a miss.
//!
//! Paced: one chunk's read at a time. WILLNEED only submits its reads, so a segment advised
//! chunk after chunk put 8 MiB of reads in the device's queue at once, ahead of the batches'
//! durable writes that the callers wait for: at 64 writers on a loop device the writes' p99
//! rose from about 2 ms to 9-11 ms, and the stores' from 4.5 ms to 11 (BENCHMARKS-history.md,
//! "the page cache advice paced"). So after each chunk's advice the thread reads the chunk's
//! last page through the page cache, which returns once the chunk's reads are done: the
//! warming reads take one chunk of the device's queue, and a segment is still read back
//! well before the next one is sealed (8 MiB in 64 reads of 128 KiB).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use shale_io::BufferedReader;
use shale_space::log_page::PAGE_BYTES;

/// Bytes of one `POSIX_FADV_WILLNEED`: the kernel reads at most its readahead window (128
/// KiB by default) per call and ignores the rest, so a segment takes one call per chunk.
const WARM_CHUNK_BYTES: u64 = 128 << 10;

/// One piece of advice: a byte range of the volume.
enum Advice {
    /// Read it into the page cache (a sealed segment's written pages).
    Warm { at: u64, len: u64 },
    /// Drop its cached pages (a collected segment, before its slots are freed).
    Forget { at: u64, len: u64 },
}

/// The advice thread of one store; ended and joined when dropped.
pub(crate) struct PageAdvice {
    /// `None` only once dropped: the thread ends when it is gone.
    sender: Option<Sender<Advice>>,
    thread: Option<JoinHandle<()>>,
}

impl PageAdvice {
    /// Starts the thread on a descriptor of its own of `reader`'s file; `None` (and a debug
    /// line) if the descriptor or the thread cannot be had: the store reads on without it.
    pub(crate) fn start(reader: &BufferedReader) -> Option<PageAdvice> {
        let own = match reader.try_clone() {
            Ok(r) => r,
            Err(e) => {
                log::debug!("no page cache advice: {}", shale_io::Chain(&e));
                return None;
            }
        };
        let (sender, receiver) = channel();
        let thread = std::thread::Builder::new()
            .name("shale-hash-advice".into())
            .spawn(move || advise(&own, &receiver));
        match thread {
            Ok(thread) => Some(PageAdvice { sender: Some(sender), thread: Some(thread) }),
            Err(e) => {
                log::debug!("no page cache advice: cannot start its thread: {e}");
                None
            }
        }
    }

    /// Asks for `[at, at + len)` to be read into the page cache, in the background.
    pub(crate) fn warm(&self, at: u64, len: u64) {
        self.send(Advice::Warm { at, len });
    }

    /// Asks for the cached pages of `[at, at + len)` to be dropped, after every advice given
    /// before.
    pub(crate) fn forget(&self, at: u64, len: u64) {
        self.send(Advice::Forget { at, len });
    }

    fn send(&self, advice: Advice) {
        if let Some(sender) = &self.sender {
            // The thread ends only when the sender is dropped, below.
            let _ = sender.send(advice);
        }
    }
}

impl Drop for PageAdvice {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: each advice in order, until the store drops its sender.
fn advise(reader: &BufferedReader, advice: &Receiver<Advice>) {
    while let Ok(a) = advice.recv() {
        let result = match a {
            Advice::Warm { at, len } => warm(
                at,
                len,
                |from, chunk| reader.prefetch(from, chunk),
                |page| reader.read_at(page, PAGE_BYTES).map(drop),
            ),
            Advice::Forget { at, len } => reader.drop_cached(at, len),
        };
        if let Err(e) = result {
            log::debug!("page cache advice refused: {}", shale_io::Chain(&e));
        }
    }
}

/// Reads `[at, at + len)` (whole pages) into the page cache a chunk at a time: `prefetch`
/// advises a chunk, then `wait` reads its last page, which returns once the chunk is in
/// (module comment, "Paced"). Stops at the first error.
fn warm<E>(
    at: u64,
    len: u64,
    mut prefetch: impl FnMut(u64, u64) -> Result<(), E>,
    mut wait: impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    let end = at + len;
    let mut from = at;
    while from < end {
        let chunk = (end - from).min(WARM_CHUNK_BYTES);
        prefetch(from, chunk)?;
        wait(from + chunk - PAGE_BYTES as u64)?;
        from += chunk;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[derive(Debug, PartialEq)]
    enum Call {
        Prefetch(u64, u64),
        Wait(u64),
    }

    fn record(at: u64, len: u64, fail_wait_at: Option<u64>) -> (Vec<Call>, Result<(), u64>) {
        let calls = RefCell::new(Vec::new());
        let result = warm(
            at,
            len,
            |from, chunk| {
                calls.borrow_mut().push(Call::Prefetch(from, chunk));
                Ok(())
            },
            |page| {
                calls.borrow_mut().push(Call::Wait(page));
                if fail_wait_at == Some(page) { Err(page) } else { Ok(()) }
            },
        );
        (calls.into_inner(), result)
    }

    #[test]
    fn each_chunk_is_waited_for_before_the_next_is_advised() {
        let page = PAGE_BYTES as u64;
        // Two whole chunks and a partial one of three pages, from a page-aligned start.
        let at = 40 * page;
        let len = 2 * WARM_CHUNK_BYTES + 3 * page;
        let (calls, result) = record(at, len, None);
        assert_eq!(result, Ok(()));
        let c = WARM_CHUNK_BYTES;
        assert_eq!(
            calls,
            [
                Call::Prefetch(at, c),
                Call::Wait(at + c - page),
                Call::Prefetch(at + c, c),
                Call::Wait(at + 2 * c - page),
                Call::Prefetch(at + 2 * c, 3 * page),
                Call::Wait(at + 2 * c + 2 * page),
            ]
        );
    }

    #[test]
    fn a_failed_wait_ends_the_warming() {
        let page = PAGE_BYTES as u64;
        let first_wait = WARM_CHUNK_BYTES - page;
        let (calls, result) = record(0, 4 * WARM_CHUNK_BYTES, Some(first_wait));
        assert_eq!(result, Err(first_wait));
        assert_eq!(calls, [Call::Prefetch(0, WARM_CHUNK_BYTES), Call::Wait(first_wait)]);
    }
}
