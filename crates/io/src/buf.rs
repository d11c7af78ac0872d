//! Aligned buffers that O_DIRECT accepts.
//!
//! O_DIRECT needs the buffer address, the file offset and the length to be multiples of the
//! device's logical block size. Every buffer here is aligned to [`BUF_ALIGN`] (4 KiB, the largest
//! logical block size in use), so one buffer works on any backend; lengths are multiples of
//! [`SECTOR_SIZE`] and each backend checks them against its own block size.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer's address.
pub const BUF_ALIGN: usize = 4096;
/// The smallest unit a buffer length may be a multiple of.
pub const SECTOR_SIZE: usize = 512;

/// A zero-initialised, heap-allocated byte buffer aligned to [`BUF_ALIGN`].
///
/// Requests take buffers by value and completions hand them back, so a buffer can never be
/// touched by the program while the kernel is reading or writing it.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); no interior mutability.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out &[u8]; mutation needs &mut self.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes.
    ///
    /// # Panics
    /// If `len` is zero or not a multiple of [`SECTOR_SIZE`]: sizes come from the layers above
    /// and a wrong one is a bug there.
    pub fn zeroed(len: usize) -> AlignedBuf {
        assert!(
            len > 0 && len % SECTOR_SIZE == 0,
            "buffer length {len} not a positive multiple of {SECTOR_SIZE}"
        );
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size (asserted above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    /// A buffer holding `data` followed by zeros up to the next multiple of `unit` bytes
    /// (`unit` itself a multiple of [`SECTOR_SIZE`]).
    ///
    /// Only the padding is zeroed, not the whole buffer first: a batch of the hash engine's
    /// log (hundreds of KiB, every byte of it data) was written twice over, the zeroing a
    /// tenth of its worker's time at 64 writers.
    pub fn padded_copy(data: &[u8], unit: usize) -> AlignedBuf {
        let len = data.len().div_ceil(unit).max(1) * unit;
        assert!(
            len > 0 && len % SECTOR_SIZE == 0,
            "buffer length {len} not a positive multiple of {SECTOR_SIZE}"
        );
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size (`len` is at least one `unit`, and a multiple of
        // SECTOR_SIZE, asserted above).
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        // SAFETY: `ptr` owns `len` writable bytes, `data.len() <= len`, and the regions do not
        // overlap (the allocation is new); every byte is written before the buffer is handed
        // out, so nothing reads uninitialised memory.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), data.len());
            std::ptr::write_bytes(ptr.as_ptr().add(data.len()), 0, len - data.len());
        }
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, BUF_ALIGN).expect("buffer layout")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length buffers do not exist.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Raw pointer for handing to the kernel.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Raw mutable pointer for handing to the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        let mut copy = AlignedBuf::zeroed(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout in zeroed().
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        for len in [512, 4096, 8192, 1 << 20] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
            assert!(b.iter().all(|&x| x == 0));
            assert_eq!(b.len(), len);
        }
    }

    #[test]
    fn padded_copy_rounds_up() {
        let b = AlignedBuf::padded_copy(b"hello", 4096);
        assert_eq!(b.len(), 4096);
        assert_eq!(&b[..5], b"hello");
        assert!(b[5..].iter().all(|&x| x == 0));
        assert_eq!(AlignedBuf::padded_copy(&[], 512).len(), 512);
    }

    #[test]
    #[should_panic(expected = "not a positive multiple")]
    fn unaligned_length_is_a_bug() {
        let _ = AlignedBuf::zeroed(100);
    }
}
