//! The arena: a bump allocator with a fixed byte capacity that memtable nodes live in.
//!
//! A memtable is written, sealed, flushed and then dropped whole, so its nodes never need to be
//! freed one by one. Bumping an offset is the cheapest allocator there is, and a fixed capacity
//! turns "the memtable is big enough to flush" into an allocation that fails.
//!
//! Memory comes from the system in chunks of `chunk_bytes`. The common path bumps an atomic
//! offset inside the current chunk with a compare-and-swap, so several writer threads allocate at
//! once without a lock; only installing a new chunk takes the mutex. An allocation larger than a
//! quarter chunk gets a chunk of its own, so that moving to a new chunk never strands more than a
//! quarter of the old one.
//!
//! The bound: the bytes of all chunks together never exceed the capacity. The last chunk is cut
//! short to fit under it, and an allocation that does not fit fails with `None`.

use super::sync::{AtomicPtr, AtomicUsize, Mutex, Ordering};
use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

/// Bytes of a chunk taken from the system (the last chunk may be shorter, to fit the capacity).
pub(crate) const CHUNK_BYTES: usize = HUGE_PAGE_BYTES;
/// A transparent huge page on x86-64 and most aarch64 Linux kernels. Chunks of a multiple of
/// it are mapped at an aligned address and advised `MADV_HUGEPAGE`.
const HUGE_PAGE_BYTES: usize = 2 << 20;
/// Alignment of every chunk, and so the largest alignment an allocation may ask for.
pub(crate) const CHUNK_ALIGN: usize = 16;
/// An allocation over `chunk_bytes / DEDICATED_DIVISOR` gets a chunk of its own.
const DEDICATED_DIVISOR: usize = 4;

/// One allocation from the system; `offset` is how much of it has been handed out.
struct Chunk {
    base: NonNull<u8>,
    len: usize,
    offset: AtomicUsize,
    /// Whether `base` is an anonymous mapping of `len` bytes (freed with `munmap`) rather
    /// than a heap allocation.
    mapped: bool,
}

// SAFETY: a chunk owns its memory exclusively (it is freed only in `Chunk::drop`); `base` and
// `len` are never written after creation, and the bytes behind `base` are handed out in disjoint
// ranges through the atomic `offset`, so sharing or moving a chunk between threads cannot make
// two threads own the same byte.
unsafe impl Send for Chunk {}
// SAFETY: as for `Send`: all shared mutation goes through the atomic `offset`.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Takes a chunk of `len` bytes from the system, `handed_out` of them already in use.
    fn new(len: usize, handed_out: usize) -> Chunk {
        if let Some(base) = spare::SPARE.take(len).or_else(|| map_huge(len)) {
            return Chunk { base, len, offset: AtomicUsize::new(handed_out), mapped: true };
        }
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (`layout` asserts it).
        let base = unsafe { alloc::alloc(layout) };
        let Some(base) = NonNull::new(base) else { alloc::handle_alloc_error(layout) };
        Chunk { base, len, offset: AtomicUsize::new(handed_out), mapped: false }
    }

    fn layout(len: usize) -> Layout {
        assert!(len > 0, "empty arena chunk");
        Layout::from_size_align(len, CHUNK_ALIGN).expect("arena chunk layout")
    }

    /// Hands out `layout` from the unused tail of this chunk, or `None` if it does not fit.
    fn bump(&self, layout: Layout) -> Option<NonNull<u8>> {
        // Relaxed is enough: the offset only partitions the chunk into disjoint ranges; the
        // bytes themselves are published by whoever fills them (the skiplist's Release CAS).
        let mut offset = self.offset.load(Ordering::Relaxed);
        loop {
            // `base` is CHUNK_ALIGN-aligned and `layout.align() <= CHUNK_ALIGN`, so aligning the
            // offset aligns the address.
            let start = offset.checked_next_multiple_of(layout.align())?;
            let end = start.checked_add(layout.size())?;
            if end > self.len {
                return None;
            }
            match self.offset.compare_exchange_weak(
                offset,
                end,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                // SAFETY: `start + size <= len`, so the pointer stays inside this chunk's
                // allocation, and it keeps the allocation's provenance.
                Ok(_) => return Some(unsafe { self.base.add(start) }),
                Err(now) => offset = now,
            }
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if self.mapped {
            if let Err(base) = spare::SPARE.give(self.base, self.len) {
                // SAFETY: `base..base + len` is exactly the mapping `map_huge` kept, unmapped
                // only here, once (the spare list declined it).
                unsafe { libc::munmap(base.as_ptr().cast(), self.len) };
            }
            return;
        }
        // SAFETY: `base` came from `alloc::alloc` with exactly this layout, and it is freed
        // only here, once: chunks are owned by the arena's list and dropped with it.
        unsafe { alloc::dealloc(self.base.as_ptr(), Self::layout(self.len)) };
    }
}

/// Maps `len` bytes at a huge-page-aligned address and advises the kernel to back them with
/// huge pages; `None` when `len` is not a multiple of a huge page or the kernel refuses (the
/// caller then takes the chunk from the heap).
///
/// Why: a random insert into a 64 MiB skiplist visits a dozen nodes scattered over the arena,
/// and with 4 KiB pages nearly every visit also misses the TLB (16,384 pages against about
/// 2,000 TLB entries). Huge pages cut that to 32 pages. Only the arena is advised: its chunks
/// are filled densely, unlike the allocator's heap, where advising everything costs memory.
fn map_huge(len: usize) -> Option<NonNull<u8>> {
    if cfg!(miri) || len == 0 || len % HUGE_PAGE_BYTES != 0 {
        return None;
    }
    // Over-map by one huge page, then unmap the unaligned head and tail.
    let span = len + HUGE_PAGE_BYTES;
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw.addr();
    let base = start.next_multiple_of(HUGE_PAGE_BYTES);
    let head = base - start;
    let tail = span - head - len;
    // SAFETY: the head and tail ranges lie inside the mapping just made and are unmapped once;
    // `raw.byte_add(head)` keeps the mapping's provenance.
    let base = unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap(raw.byte_add(head + len), tail);
        }
        let base = raw.byte_add(head);
        // Advice only: a kernel without THP leaves 4 KiB pages, which is still correct.
        libc::madvise(base, len, libc::MADV_HUGEPAGE);
        base
    };
    NonNull::new(base.cast())
}

/// Huge chunks of arenas that dropped, kept for the arenas that come next.
///
/// Why: a memtable lives for one write buffer, and each new one used to fault in fresh pages
/// that the kernel zeroed first: `clear_page_erms` was a tenth of a random fill's profile. A
/// chunk taken from here is already mapped and needs no zeroing (the arena never relies on
/// zeroed memory: every node is written whole).
///
/// Bound: at most as many bytes as the largest arena that gave chunks back had taken, that is
/// one memtable's worth, the memory the next memtable is about to take anyway; and only while
/// some arena lives (an open store always has its active memtable's). When the last arena of
/// the process drops, the list unmaps everything it holds and takes no more.
///
/// Ready chunks. Until memtables have dropped, every chunk is fresh memory, and the writer
/// that faults it in waits while the kernel zeroes its huge page: 19% of a fill's profile
/// (`clear_page_erms`, the first two memtables; slower still in a VM whose host backs guest
/// memory at its first touch). So `Spare::prefault_forever`, a thread of its own once a
/// store opens (`memtable::start_prefaulter`), keeps [`READY_CHUNKS`] chunks mapped and touched ahead of
/// the arenas: the zeroing moves off the writer, to a core the writer is not using. Also only
/// while some arena lives; a chunk handed out from them is counted as any taken chunk.
///
/// Idle chunks go back. A memtable that fills slowly (a read-mostly load: YCSB B writes about
/// one chunk a second) or not at all (workload C) would leave up to a whole write buffer of
/// spare chunks mapped for as long as the store is open: 64 MiB that, in a memory cgroup, the
/// page cache could hold data in instead (it did: 74 MiB of chunks, 37 of them, during YCSB C
/// in a 550 MiB group). So the same thread, every [`TRIM_INTERVAL`], keeps only the spares
/// that [`KEEP_INTERVALS`] intervals at the last one's rate would take, and after an interval
/// in which no arena asked for a chunk, also the ready ones and stops making more until an
/// arena asks again. A fast writer keeps everything (it takes the chunks within seconds); a
/// slow one is served by the ready chunks, whose zeroing at a few chunks a second is cheap.
mod spare {
    use std::ptr::NonNull;
    use std::sync::{Condvar, Mutex};

    /// Chunks kept faulted in ahead of the arenas: 4 MiB. A writer fills a chunk in about
    /// 13 ms (fillseq, 100-byte values), the thread faults one in within a few: one ready
    /// while the next is made is enough, and each more is memory the store holds.
    pub(super) const READY_CHUNKS: usize = 2;

    /// How often the prefault thread trims idle chunks.
    pub(super) const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    /// Spare chunks kept: what this many intervals take at the rate of the last one.
    pub(super) const KEEP_INTERVALS: usize = 2;

    /// A chunk's base; the list owns the mapping behind it.
    struct Base(NonNull<u8>);
    // SAFETY: a spare chunk belongs to the list alone; no arena refers to it any more, so
    // handing its address to another thread shares nothing.
    unsafe impl Send for Base {}

    struct List {
        bases: Vec<Base>,
        /// Bytes the list may hold: the most any dropped arena had taken.
        limit_bytes: usize,
        /// Arenas alive.
        arenas: usize,
        /// Fresh chunks faulted in ahead of the arenas, at most [`READY_CHUNKS`].
        ready: Vec<Base>,
        /// Some arena took a chunk since arenas came to live: the store writes. A store opened
        /// only to be read holds no ready chunk.
        filling: bool,
        /// Chunks arenas asked for since the last trim (whether one was spare or not).
        asked: usize,
    }

    impl List {
        fn wants_ready(&self) -> bool {
            self.arenas > 0 && self.filling && self.ready.len() < READY_CHUNKS
        }
    }

    /// A list of spare huge chunks. The process has one ([`SPARE`]); tests make their own.
    pub(super) struct Spare {
        list: Mutex<List>,
        /// Signalled when ready chunks are wanted.
        want: Condvar,
    }

    /// The process's spare chunks, shared by every arena.
    pub(super) static SPARE: Spare = Spare::new();

    impl Spare {
        pub(super) const fn new() -> Spare {
            let list = List {
                bases: Vec::new(),
                limit_bytes: 0,
                arenas: 0,
                ready: Vec::new(),
                filling: false,
                asked: 0,
            };
            Spare { list: Mutex::new(list), want: Condvar::new() }
        }

        /// A spare mapped chunk of exactly `len` bytes, if one is kept: one a dropped arena
        /// gave back, else a ready one.
        pub(super) fn take(&self, len: usize) -> Option<NonNull<u8>> {
            if len != super::HUGE_PAGE_BYTES {
                return None;
            }
            let mut list = self.list.lock().ok()?;
            list.filling = true;
            list.asked += 1;
            let base = list.bases.pop().or_else(|| list.ready.pop()).map(|b| b.0);
            if list.wants_ready() {
                self.want.notify_one();
            }
            base
        }

        /// Maps and touches chunks until [`READY_CHUNKS`] are ready, while some arena lives;
        /// returns how many it added.
        pub(super) fn fill_ready(&self) -> usize {
            let mut added = 0;
            loop {
                match self.list.lock() {
                    Ok(list) if list.wants_ready() => {}
                    _ => return added,
                }
                // Mapped and faulted in outside the lock: this is the slow part.
                let Some(base) = super::map_huge(super::HUGE_PAGE_BYTES) else { return added };
                for at in (0..super::HUGE_PAGE_BYTES).step_by(4096) {
                    // SAFETY: `at` lies inside the chunk just mapped, which nothing else
                    // refers to yet; a volatile write so the touch is not optimized away.
                    unsafe { base.as_ptr().add(at).write_volatile(0) };
                }
                let keep = match self.list.lock() {
                    Ok(mut list) if list.wants_ready() => {
                        list.ready.push(Base(base));
                        true
                    }
                    _ => false,
                };
                if !keep {
                    // SAFETY: the whole mapping just made, referred to by nothing else.
                    unsafe { libc::munmap(base.as_ptr().cast(), super::HUGE_PAGE_BYTES) };
                    return added;
                }
                added += 1;
            }
        }

        /// Waits until ready chunks are wanted, then makes them, and trims idle chunks every
        /// [`TRIM_INTERVAL`]; forever. Calls `on_wake` first and after every wait (at least
        /// every [`TRIM_INTERVAL`]).
        pub(super) fn prefault_forever(&self, mut on_wake: impl FnMut()) -> ! {
            let mut last_trim = std::time::Instant::now();
            loop {
                on_wake();
                let wait = TRIM_INTERVAL.saturating_sub(last_trim.elapsed());
                let wanted = match self.list.lock() {
                    Ok(list) => {
                        match self.want.wait_timeout_while(list, wait, |l| !l.wants_ready()) {
                            Ok((list, _)) => list.wants_ready(),
                            Err(_) => false,
                        }
                    }
                    Err(_) => false,
                };
                if wanted && self.fill_ready() == 0 {
                    // Mapping failed (or the arenas went meanwhile): not a busy loop.
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                if last_trim.elapsed() >= TRIM_INTERVAL {
                    self.trim();
                    last_trim = std::time::Instant::now();
                }
            }
        }

        /// Ends an interval: unmaps the spare chunks beyond what [`KEEP_INTERVALS`] intervals
        /// at this one's rate would take and, when no arena asked for a chunk at all, the
        /// ready chunks too (none is made again until one asks). Returns how many it unmapped.
        pub(super) fn trim(&self) -> usize {
            let idle = {
                let Ok(mut list) = self.list.lock() else { return 0 };
                let keep = list.asked.saturating_mul(KEEP_INTERVALS);
                let mut idle: Vec<Base> = Vec::new();
                if list.bases.len() > keep {
                    let excess = list.bases.len() - keep;
                    idle.extend(list.bases.drain(..excess));
                }
                if list.asked == 0 {
                    list.filling = false;
                    idle.append(&mut list.ready);
                }
                list.asked = 0;
                idle
            };
            for base in &idle {
                // SAFETY: each base is a whole mapping of one huge chunk that only the list
                // owned, and it has left the list.
                unsafe { libc::munmap(base.0.as_ptr().cast(), super::HUGE_PAGE_BYTES) };
            }
            idle.len()
        }

        /// Ready chunks held.
        #[cfg(test)]
        pub(super) fn ready_chunks(&self) -> usize {
            self.list.lock().map_or(0, |l| l.ready.len())
        }

        /// Keeps the mapped chunk at `base` of `len` bytes, or hands it back (`Err`) for the
        /// caller to unmap: when it is not of the kept size, no arena lives, or the list is
        /// full.
        pub(super) fn give(&self, base: NonNull<u8>, len: usize) -> Result<(), NonNull<u8>> {
            let Ok(mut list) = self.list.lock() else { return Err(base) };
            let held = list.bases.len() * super::HUGE_PAGE_BYTES;
            if len != super::HUGE_PAGE_BYTES || list.arenas == 0 || held + len > list.limit_bytes {
                return Err(base);
            }
            list.bases.push(Base(base));
            Ok(())
        }

        /// Counts an arena made.
        pub(super) fn arena_made(&self) {
            if let Ok(mut list) = self.list.lock() {
                list.arenas += 1;
                if list.wants_ready() {
                    self.want.notify_one();
                }
            }
        }

        /// Counts an arena dropping, which had taken `bytes`: the list may hold that much
        /// from now on, unless no arena is left, when it unmaps everything it holds.
        pub(super) fn arena_dropping(&self, bytes: usize) {
            let Ok(mut list) = self.list.lock() else { return };
            list.arenas -= 1;
            list.limit_bytes = list.limit_bytes.max(bytes);
            if list.arenas == 0 {
                list.filling = false;
                let ready: Vec<Base> = list.ready.drain(..).collect();
                for base in list.bases.drain(..).chain(ready) {
                    // SAFETY: each base is a whole mapping of one huge chunk that only the
                    // list owned.
                    unsafe { libc::munmap(base.0.as_ptr().cast(), super::HUGE_PAGE_BYTES) };
                }
                list.limit_bytes = 0;
            }
        }

        /// Bytes held.
        #[cfg(test)]
        pub(super) fn held_bytes(&self) -> usize {
            self.list.lock().map_or(0, |l| l.bases.len() * super::HUGE_PAGE_BYTES)
        }
    }
}

/// Keeps chunks faulted in ahead of the arenas (see the spare list's "Ready chunks"), forever:
/// the body of the thread `memtable::start_prefaulter` starts once a store opens. Calls
/// `on_wake` first and whenever it wakes, at least every [`spare::TRIM_INTERVAL`].
pub(crate) fn prefault_forever(on_wake: impl FnMut()) -> ! {
    spare::SPARE.prefault_forever(on_wake)
}

/// A bump allocator with a fixed byte capacity; everything it hands out lives until it drops.
pub(crate) struct Arena {
    capacity_bytes: usize,
    chunk_bytes: usize,
    /// Bytes of all chunks taken so far; at most `capacity_bytes`. Written under `chunks`.
    allocated_bytes: AtomicUsize,
    /// The chunk that small allocations bump in; null before the first allocation. Points into
    /// a box owned by `chunks`, so it stays valid for as long as the arena.
    current: AtomicPtr<Chunk>,
    /// Every chunk, so that they are freed with the arena; the lock also serializes the
    /// installing of a new current chunk.
    #[expect(clippy::vec_box, reason = "boxes keep each chunk at the address `current` holds")]
    chunks: Mutex<Vec<Box<Chunk>>>,
}

impl Arena {
    /// An arena that hands out at most `capacity_bytes`, from chunks of `chunk_bytes` (cut to
    /// the capacity when it is smaller).
    ///
    /// # Panics
    /// If `chunk_bytes` is zero.
    pub(crate) fn new(capacity_bytes: usize, chunk_bytes: usize) -> Arena {
        assert!(chunk_bytes > 0, "arena chunk size must be positive");
        spare::SPARE.arena_made();
        Arena {
            capacity_bytes,
            chunk_bytes: chunk_bytes.min(capacity_bytes).max(1),
            allocated_bytes: AtomicUsize::new(0),
            current: AtomicPtr::new(ptr::null_mut()),
            chunks: Mutex::new(Vec::new()),
        }
    }

    /// Hands out uninitialized memory for `layout`, valid until the arena drops; `None` when
    /// it would take the arena past its capacity.
    ///
    /// # Panics
    /// If `layout` is zero-sized or asks for an alignment over [`CHUNK_ALIGN`] (a bug of the
    /// caller, not an operating error).
    pub(crate) fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        assert!(layout.size() > 0, "zero-sized arena allocation");
        assert!(layout.align() <= CHUNK_ALIGN, "arena alignment {} too large", layout.align());
        // Acquire pairs with the Release store that installed the chunk, so its fields (written
        // before the store) are visible here.
        let current = self.current.load(Ordering::Acquire);
        if !current.is_null() && layout.size() <= self.chunk_bytes / DEDICATED_DIVISOR {
            // SAFETY: a non-null `current` points at a boxed chunk in `self.chunks`, which is
            // neither moved nor freed before the arena drops, and `&self` keeps the arena alive.
            if let Some(p) = unsafe { &*current }.bump(layout) {
                return Some(p);
            }
        }
        self.alloc_slow(layout)
    }

    /// Takes a new chunk under the lock: a dedicated one for a large allocation, else a new
    /// current chunk.
    fn alloc_slow(&self, layout: Layout) -> Option<NonNull<u8>> {
        let mut chunks = self.chunks.lock();
        let large = layout.size() > self.chunk_bytes / DEDICATED_DIVISOR;
        if !large {
            // Another thread may have installed a fresh chunk while this one waited for the lock.
            let current = self.current.load(Ordering::Acquire);
            if !current.is_null() {
                // SAFETY: as in `alloc`: chunks live in `self.chunks` until the arena drops.
                if let Some(p) = unsafe { &*current }.bump(layout) {
                    return Some(p);
                }
            }
        }
        let allocated = self.allocated_bytes.load(Ordering::Relaxed);
        let room = self.capacity_bytes - allocated;
        // Rounding to CHUNK_ALIGN keeps the accounting equal to what the system hands out.
        let need = layout.size().checked_next_multiple_of(CHUNK_ALIGN)?;
        let len = if large { need } else { self.chunk_bytes.min(room) };
        if need > len || len > room {
            return None;
        }
        chunks.push(Box::new(Chunk::new(len, layout.size())));
        // Taken after the push, from the box's final owner, so that no later move of the box
        // itself stands between this pointer and its uses.
        let chunk: &Chunk = chunks.last().expect("just pushed");
        let (p, chunk_ptr) = (chunk.base, ptr::from_ref(chunk));
        self.allocated_bytes.store(allocated + len, Ordering::Relaxed);
        if !large {
            // Release publishes the chunk's fields to the Acquire loads in `alloc`.
            self.current.store(chunk_ptr.cast_mut(), Ordering::Release);
        }
        Some(p)
    }

    /// Bytes taken from the system so far (all chunks, including their unused tails); never
    /// more than the capacity.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated_bytes.load(Ordering::Relaxed)
    }

    /// The most bytes this arena will ever take from the system.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Runs before the chunks drop, so the spare list can take this arena's whole worth.
        spare::SPARE.arena_dropping(self.allocated_bytes.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Fills `len` bytes at `p` with `byte`.
    fn fill(p: NonNull<u8>, len: usize, byte: u8) {
        // SAFETY: the tests pass only fresh arena allocations of at least `len` bytes, which
        // no other thread writes.
        unsafe { ptr::write_bytes(p.as_ptr(), byte, len) };
    }

    /// Whether the `len` bytes at `p` all equal `byte`.
    fn all_equal(p: NonNull<u8>, len: usize, byte: u8) -> bool {
        // SAFETY: the tests pass only allocations of `len` bytes that they filled and that
        // are alive (the arena is).
        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), len) };
        bytes.iter().all(|&b| b == byte)
    }

    #[test]
    fn allocations_are_aligned_and_disjoint() {
        let arena = Arena::new(1 << 16, 1 << 12);
        let mut got = Vec::new();
        for i in 0..300usize {
            let align = 1 << (i % 5);
            let size = 1 + (i * 7) % 200;
            let p = arena.alloc(Layout::from_size_align(size, align).unwrap()).unwrap();
            assert_eq!(p.as_ptr().addr() % align, 0, "allocation {i} misaligned");
            fill(p, size, i as u8);
            got.push((p, size, i as u8));
        }
        for &(p, size, byte) in &got {
            assert!(all_equal(p, size, byte), "allocation {byte} was overwritten");
        }
        assert!(arena.allocated_bytes() <= arena.capacity_bytes());
    }

    #[test]
    fn large_allocations_get_their_own_chunk_and_keep_the_current_one() {
        let arena = Arena::new(1 << 16, 1 << 12);
        let small = Layout::from_size_align(16, 8).unwrap();
        let a = arena.alloc(small).unwrap();
        assert_eq!(arena.allocated_bytes(), 1 << 12);
        let big = arena.alloc(Layout::from_size_align(3000, 8).unwrap()).unwrap();
        assert_eq!(arena.allocated_bytes(), (1 << 12) + 3008);
        // The next small allocation still comes from the first chunk, right after `a`.
        let b = arena.alloc(small).unwrap();
        assert_eq!(b.as_ptr().addr() - a.as_ptr().addr(), 16);
        assert_ne!(big, b);
    }

    #[test]
    fn filling_to_capacity_fails_and_never_exceeds_the_bound() {
        let capacity = 10_000;
        let arena = Arena::new(capacity, 1 << 12);
        let layout = Layout::from_size_align(40, 8).unwrap();
        let mut handed_out = 0;
        while arena.alloc(layout).is_some() {
            handed_out += layout.size();
            assert!(arena.allocated_bytes() <= capacity);
        }
        // Each chunk strands less than one allocation at its end.
        assert!(handed_out > capacity - 3 * layout.size(), "only {handed_out} of {capacity}");
        assert!(arena.alloc(layout).is_none(), "a failed size must keep failing");
        // An allocation bigger than the whole capacity fails on an empty arena too.
        let empty = Arena::new(capacity, 1 << 12);
        assert!(empty.alloc(Layout::from_size_align(capacity + 1, 8).unwrap()).is_none());
        assert_eq!(empty.allocated_bytes(), 0);
        // ... and one of exactly the capacity fits.
        assert!(empty.alloc(Layout::from_size_align(capacity, 8).unwrap()).is_some());
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not run mmap")]
    fn huge_chunks_are_aligned_to_a_huge_page_and_usable() {
        let arena = Arena::new(3 * HUGE_PAGE_BYTES, HUGE_PAGE_BYTES);
        let layout = Layout::from_size_align(HUGE_PAGE_BYTES / 8, 8).unwrap();
        let mut got = Vec::new();
        while let Some(p) = arena.alloc(layout) {
            fill(p, layout.size(), got.len() as u8);
            got.push(p);
        }
        assert_eq!(got.len(), 24, "three chunks of eight allocations");
        for (i, p) in got.iter().enumerate() {
            if i % 8 == 0 {
                assert_eq!(p.as_ptr().addr() % HUGE_PAGE_BYTES, 0, "chunk {} unaligned", i / 8);
            }
            assert!(all_equal(*p, layout.size(), i as u8));
        }
        // A chunk that is not a whole number of huge pages comes from the heap.
        assert!(map_huge(HUGE_PAGE_BYTES + 4096).is_none());
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not run mmap")]
    fn spare_chunks_are_kept_up_to_one_arena_and_only_while_arenas_live() {
        let spare = spare::Spare::new();
        let chunk = || map_huge(HUGE_PAGE_BYTES).expect("an anonymous mapping");
        let unmap = |p: NonNull<u8>| {
            // SAFETY: `p` is a whole mapping from `map_huge` that the test owns.
            unsafe { libc::munmap(p.as_ptr().cast(), HUGE_PAGE_BYTES) };
        };
        // Nothing is kept before an arena has dropped (no limit yet) ...
        spare.arena_made();
        spare.arena_made();
        let a = chunk();
        assert_eq!(spare.give(a, HUGE_PAGE_BYTES), Err(a));
        // ... then up to the bytes of the largest arena that dropped.
        spare.arena_dropping(2 * HUGE_PAGE_BYTES);
        let b = chunk();
        let c = chunk();
        assert_eq!(spare.give(a, HUGE_PAGE_BYTES), Ok(()));
        assert_eq!(spare.give(b, HUGE_PAGE_BYTES), Ok(()));
        assert_eq!(spare.give(c, HUGE_PAGE_BYTES), Err(c), "over one arena's worth");
        unmap(c);
        assert_eq!(spare.held_bytes(), 2 * HUGE_PAGE_BYTES);
        // Only chunks of exactly one huge page are kept or handed out.
        assert_eq!(spare.take(2 * HUGE_PAGE_BYTES), None);
        let reused = spare.take(HUGE_PAGE_BYTES).expect("a spare chunk");
        assert!(reused == a || reused == b);
        // SAFETY: the chunk is a live mapping of HUGE_PAGE_BYTES that the test now owns.
        unsafe { ptr::write_bytes(reused.as_ptr(), 7, HUGE_PAGE_BYTES) };
        assert_eq!(spare.give(reused, HUGE_PAGE_BYTES), Ok(()));
        // The last arena dropping lets everything go, and nothing is kept after.
        spare.arena_dropping(HUGE_PAGE_BYTES);
        assert_eq!(spare.held_bytes(), 0);
        let d = chunk();
        assert_eq!(spare.give(d, HUGE_PAGE_BYTES), Err(d));
        unmap(d);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not run mmap")]
    fn ready_chunks_are_made_while_arenas_live_and_handed_out_when_none_is_spare() {
        let spare = spare::Spare::new();
        // No arena, or arenas that take no chunk (a store only read): nothing is wanted.
        assert_eq!(spare.fill_ready(), 0);
        spare.arena_made();
        assert_eq!(spare.fill_ready(), 0);
        // An arena took a chunk (none was there): chunks are made ready.
        assert_eq!(spare.take(HUGE_PAGE_BYTES), None);
        assert_eq!(spare.fill_ready(), spare::READY_CHUNKS);
        assert_eq!(spare.fill_ready(), 0, "no more than READY_CHUNKS");
        // Nothing dropped yet, so nothing is spare: the ready chunks are handed out, each a
        // whole usable huge chunk.
        let mut taken = Vec::new();
        for _ in 0..spare::READY_CHUNKS {
            let c = spare.take(HUGE_PAGE_BYTES).expect("a ready chunk");
            assert_eq!(c.as_ptr().addr() % HUGE_PAGE_BYTES, 0);
            // SAFETY: a live mapping of HUGE_PAGE_BYTES that the test now owns.
            unsafe { ptr::write_bytes(c.as_ptr(), 9, HUGE_PAGE_BYTES) };
            taken.push(c);
        }
        assert_eq!(spare.take(HUGE_PAGE_BYTES), None);
        assert_eq!(spare.fill_ready(), spare::READY_CHUNKS, "taking wants more");
        for c in taken {
            // SAFETY: as above; unmapped once.
            unsafe { libc::munmap(c.as_ptr().cast(), HUGE_PAGE_BYTES) };
        }
        // The last arena dropping unmaps the ready chunks too, and none is made after.
        spare.arena_dropping(0);
        assert_eq!(spare.ready_chunks(), 0);
        assert_eq!(spare.fill_ready(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "miri does not run mmap")]
    fn idle_chunks_go_back_at_the_rate_arenas_ask_for_them() {
        let spare = spare::Spare::new();
        let chunk = || map_huge(HUGE_PAGE_BYTES).expect("an anonymous mapping");
        // Two arenas; one dropped, having taken 16 chunks, which the list may now hold.
        spare.arena_made();
        spare.arena_made();
        spare.arena_dropping(16 * HUGE_PAGE_BYTES);
        for _ in 0..16 {
            assert_eq!(spare.give(chunk(), HUGE_PAGE_BYTES), Ok(()));
        }
        // A writer asked for 3 chunks this interval: 2 intervals' worth (6) stays.
        let taken: Vec<_> = (0..3).map(|_| spare.take(HUGE_PAGE_BYTES).expect("spare")).collect();
        assert_eq!(spare.held_bytes(), 13 * HUGE_PAGE_BYTES);
        assert_eq!(spare.fill_ready(), spare::READY_CHUNKS, "the writer wants ready chunks");
        assert_eq!(spare.trim(), 13 - 3 * spare::KEEP_INTERVALS);
        assert_eq!(spare.held_bytes(), 3 * spare::KEEP_INTERVALS * HUGE_PAGE_BYTES);
        assert_eq!(spare.ready_chunks(), spare::READY_CHUNKS, "a writer was active");
        // An interval in which nobody asks: every spare and ready chunk goes, and no ready
        // chunk is made until an arena asks again.
        assert_eq!(spare.trim(), 3 * spare::KEEP_INTERVALS + spare::READY_CHUNKS);
        assert_eq!((spare.held_bytes(), spare.ready_chunks()), (0, 0));
        assert_eq!(spare.fill_ready(), 0, "idle: nothing made ahead");
        assert_eq!(spare.take(HUGE_PAGE_BYTES), None);
        assert_eq!(spare.fill_ready(), spare::READY_CHUNKS, "asked again: ready chunks");
        // Chunks in use are never touched by a trim.
        for c in &taken {
            // SAFETY: a live mapping of HUGE_PAGE_BYTES that the test owns.
            unsafe { ptr::write_bytes(c.as_ptr(), 5, HUGE_PAGE_BYTES) };
        }
        for c in taken {
            // SAFETY: as above; unmapped once.
            unsafe { libc::munmap(c.as_ptr().cast(), HUGE_PAGE_BYTES) };
        }
        spare.arena_dropping(0);
    }

    #[test]
    fn concurrent_allocations_are_disjoint() {
        let threads = 4;
        let per_thread = if cfg!(miri) { 40 } else { 2000 };
        let arena = Arc::new(Arena::new(1 << 20, 1 << 12));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let arena = Arc::clone(&arena);
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    for i in 0..per_thread {
                        let size = 8 + (i * 13 + t * 5) % 120;
                        let layout = Layout::from_size_align(size, 8).unwrap();
                        let p = arena.alloc(layout).expect("capacity is ample");
                        fill(p, size, t as u8);
                        got.push((p, size));
                    }
                    for &(p, size) in &got {
                        assert!(all_equal(p, size, t as u8), "thread {t}'s bytes overwritten");
                    }
                    // Only the addresses leave the thread, for the overlap check.
                    got.iter().map(|&(p, size)| (p.as_ptr().addr(), size)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut ranges: Vec<(usize, usize)> =
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "ranges {:?} and {:?} overlap", w[0], w[1]);
        }
        assert!(arena.allocated_bytes() <= arena.capacity_bytes());
    }
}
