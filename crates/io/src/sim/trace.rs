//! The simulated device's history: every write, flush and corruption, in the order the device
//! executed them. Crash images are rebuilt from it.

/// One thing that changed (or could change) what stable media holds.
#[derive(Debug)]
pub(crate) enum Event {
    /// A write that the device acknowledged; `offset` is where its data actually landed (a
    /// misdirected write records its wrong target).
    Write {
        /// The write's number among all writes the device received (1-based), which keys its
        /// random fate under [`super::Damage::Random`].
        number: u64,
        offset: u64,
        data: Box<[u8]>,
        /// Durable on completion (FUA), without waiting for a flush.
        durable: bool,
    },
    /// A successful flush: every write before it is durable.
    Flush,
    /// A test flipped bits of a persisted byte.
    Corrupt { offset: u64, xor: u8 },
}

/// The events, and where each write's crash point begins among them.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub(crate) events: Vec<Event>,
    /// `write_starts[i]` is the index in `events` at which write `i + 1` arrived. A failed write
    /// adds no event but still gets a start, so crash point `k` is always "right before write
    /// `k + 1` arrived" whether or not any write failed.
    write_starts: Vec<usize>,
    /// For each write (by number) submitted while earlier writes of its queue had completed
    /// but were not yet reaped: their numbers (`SimDevice::unreaped_at`).
    pub(crate) unreaped: std::collections::HashMap<u64, Vec<u64>>,
}

impl Trace {
    /// Writes the device has received, failed ones included.
    pub(crate) fn writes(&self) -> u64 {
        self.write_starts.len() as u64
    }

    /// Records that a write arrived and returns its 1-based number.
    pub(crate) fn begin_write(&mut self) -> u64 {
        self.write_starts.push(self.events.len());
        self.write_starts.len() as u64
    }

    pub(crate) fn push(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The events that happened before a power cut right after write `k`: those up to the
    /// arrival of write `k + 1`, so flushes and corruptions between the two are included.
    ///
    /// # Panics
    /// If `k` exceeds [`Trace::writes`].
    pub(crate) fn until_crash_point(&self, k: u64) -> &[Event] {
        let writes = self.writes();
        assert!(k <= writes, "crash point {k} beyond the {writes} writes the device received");
        let end = if k == writes { self.events.len() } else { self.write_starts[k as usize] };
        &self.events[..end]
    }
}
