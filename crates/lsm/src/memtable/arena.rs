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
pub(crate) const CHUNK_BYTES: usize = 1 << 20;
/// Alignment of every chunk, and so the largest alignment an allocation may ask for.
pub(crate) const CHUNK_ALIGN: usize = 16;
/// An allocation over `chunk_bytes / DEDICATED_DIVISOR` gets a chunk of its own.
const DEDICATED_DIVISOR: usize = 4;

/// One allocation from the system; `offset` is how much of it has been handed out.
struct Chunk {
    base: NonNull<u8>,
    len: usize,
    offset: AtomicUsize,
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
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (`layout` asserts it).
        let base = unsafe { alloc::alloc(layout) };
        let Some(base) = NonNull::new(base) else { alloc::handle_alloc_error(layout) };
        Chunk { base, len, offset: AtomicUsize::new(handed_out) }
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
        // SAFETY: `base` came from `alloc::alloc` with exactly this layout, and it is freed
        // only here, once: chunks are owned by the arena's list and dropped with it.
        unsafe { alloc::dealloc(self.base.as_ptr(), Self::layout(self.len)) };
    }
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
