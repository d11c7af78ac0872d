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

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use shale_io::BufferedReader;

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
            Advice::Warm { at, len } => {
                let end = at + len;
                let mut from = at;
                let mut result = Ok(());
                while from < end && result.is_ok() {
                    let chunk = (end - from).min(WARM_CHUNK_BYTES);
                    result = reader.prefetch(from, chunk);
                    from += chunk;
                }
                result
            }
            Advice::Forget { at, len } => reader.drop_cached(at, len),
        };
        if let Err(e) = result {
            log::debug!("page cache advice refused: {}", shale_io::Chain(&e));
        }
    }
}
