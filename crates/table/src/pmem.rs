//! Persistent memory for the undo log: the [`PmemLog`] trait, a real file mapping made
//! durable with cache-line write-backs ([`FilePmem`]), and a simulated one for crash tests
//! ([`SimPmem`]).
//!
//! The model is that of byte-addressable persistent memory (an NVDIMM, or a DAX mapping):
//! stores land in the CPU cache, and reach persistence only when their cache lines are
//! written back (`clwb`, else `clflushopt`, else `clflush`) and a fence (`sfence`) orders
//! the write-backs before what follows. [`PmemLog::persist`] is that pair. What was written
//! and not persisted may be lost at a crash, line by line: a 64-byte line is the unit that
//! survives or not, never smaller pieces of it.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Bytes of a cache line: the unit persistent memory keeps or loses at a crash.
pub const LINE_BYTES: usize = 64;

/// A region of persistent memory.
pub trait PmemLog: Send + std::fmt::Debug {
    /// Bytes of the region.
    fn len(&self) -> usize;

    /// Whether the region is empty (never, for a usable log).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes at `offset` into `out`.
    fn read(&self, offset: usize, out: &mut [u8]);

    /// The ranges of the region that may hold bytes other than zeros, in order; the rest
    /// reads as zeros. A search of the whole log reads only these: a region never written
    /// is not read, which for a file mapping on tmpfs would allocate every page it faults
    /// in. The whole region unless the region knows better.
    fn written_ranges(&self) -> Vec<Range<usize>> {
        std::iter::once(0..self.len()).collect()
    }

    /// Stores `data` at `offset`: visible to reads at once, persistent only after
    /// [`PmemLog::persist`] of its lines.
    fn write(&mut self, offset: usize, data: &[u8]);

    /// Makes every line overlapping `offset..offset + len` persistent, and orders it before
    /// anything written later.
    ///
    /// # Errors
    /// The operating system's error where persistence goes through it (`msync`).
    fn persist(&mut self, offset: usize, len: usize) -> Result<()>;
}

/// How a [`FilePmem`] makes its stores persistent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlushMode {
    /// Cache-line write-backs and a fence (`clwb` or `clflushopt` or `clflush`, then
    /// `sfence`) on x86-64, `msync` elsewhere. Persistent across power loss on a DAX mapping
    /// of real persistent memory; on a file of the page cache (`/dev/shm`, a plain file) it
    /// survives a crash of the process only: the emulation the paper's experiments use.
    #[default]
    CacheLines,
    /// `msync` of the pages: persistent on any file system, at a page write per persist.
    Msync,
}

/// Options of a [`FilePmem`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilePmemOptions {
    /// How stores are made persistent.
    pub flush: FlushMode,
    /// Extra latency added to every persist, to emulate slower persistent memory (NVDIMM
    /// timings are a few hundred nanoseconds); zero by default.
    pub extra_latency: Duration,
}

/// Persistent memory emulated by a shared mapping of a file, locked (an OFD lock, as the
/// store lock) while mapped.
pub struct FilePmem {
    map: crate::pmem_map::Mapping,
    /// The mapped file, open for its lock and for finding its holes.
    /// Open, with the exclusive OFD lock that keeps other handles from mapping it.
    file: shale_space::store_lock::LockedFile,
    opts: FilePmemOptions,
    line_flush: LineFlush,
}

impl std::fmt::Debug for FilePmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilePmem")
            .field("len", &self.map.bytes().len())
            .field("dax", &self.map.is_dax())
            .field("opts", &self.opts)
            .field("line_flush", &self.line_flush)
            .finish()
    }
}

impl FilePmem {
    /// Maps `path`, creating it with `len` bytes (zeros) when it is missing or empty. An
    /// existing file keeps its size, which must be `len`, or `len` and a valid owner
    /// trailer (`pmem_owner.rs`, [`FilePmem::record_owner`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a file of another size or a `len` below 64 KiB;
    /// `shale_space::Error::InUse` when another handle maps it (another store given the same
    /// `pmem_path`); [`Error::Space`] with the path for an operating system error.
    pub fn open(path: &Path, len: u64, opts: FilePmemOptions) -> Result<FilePmem> {
        if len < 64 << 10 {
            return Err(Error::InvalidArgument(format!(
                "a persistent memory log of {len} bytes; at least 65536"
            )));
        }
        let io = |op, e| Error::Space(shale_io::Error::at_path(op, path, e).into());
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io(shale_io::PathOp::Open, e))?;
        let file = shale_space::store_lock::LockedFile::lock(
            file,
            shale_space::store_lock::Mode::Exclusive,
        )
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES) => Error::Space(shale_space::Error::InUse(format!(
                "{} is the undo log of a store that is open",
                path.display()
            ))),
            _ => io(shale_io::PathOp::Lock, e),
        })?;
        let size = file.metadata().map_err(|e| io(shale_io::PathOp::Open, e))?.len();
        let owned = size == len + crate::pmem_owner::OWNER_BYTES
            && crate::pmem_owner::read(&file, size).is_some();
        if size == 0 {
            file.set_len(len).map_err(|e| io(shale_io::PathOp::Create, e))?;
        } else if size != len && !owned {
            return Err(Error::InvalidArgument(format!(
                "{} holds {size} bytes; the options ask for a log of {len}",
                path.display()
            )));
        }
        // A DAX mapping where the file system gives one (`pmem_map.rs`). The file is open
        // read-write and this process holds an exclusive OFD lock on it (taken above, kept
        // with the mapping), so no other handle of this engine maps it and no other Rust
        // reference aliases the bytes. A process that ignores the lock and writes the file
        // would break that, as it would for any mapping.
        let map = crate::pmem_map::Mapping::new(&file, len as usize)
            .map_err(|e| io(shale_io::PathOp::Map, e))?;
        Ok(FilePmem { map, file, opts, line_flush: LineFlush::detect() })
    }

    /// Writes the owner trailer (`pmem_owner.rs`) past the log's bytes: the store's volume
    /// file, for `shale orphans` to judge the file by. One `pwrite` (which also grows the
    /// file the first time), so a killed process leaves the old trailer or the new one,
    /// never a longer file without one. A path too long to record is not recorded: the file
    /// then names no store, and is never judged an orphan.
    ///
    /// # Errors
    /// The write fails (named with the path).
    pub fn record_owner(&self, path: &Path, volume_file: &Path) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let Some(trailer) = crate::pmem_owner::encode(volume_file) else { return Ok(()) };
        let at = self.map.bytes().len() as u64;
        self.file.write_all_at(&trailer, at).and_then(|()| self.file.sync_data()).map_err(|e| {
            Error::Space(shale_io::Error::at_path(shale_io::PathOp::Create, path, e).into())
        })
    }

    /// Whether the file is mapped with DAX (`MAP_SYNC`): on a file system mounted with DAX
    /// over real persistent memory, where cache-line write-backs make stores durable. Else
    /// the mapping is of the page cache, and survives a crash of the process only (with
    /// [`FlushMode::CacheLines`]).
    pub fn is_dax(&self) -> bool {
        self.map.is_dax()
    }

    /// The instruction this CPU writes lines back with.
    pub fn line_flush_name(&self) -> &'static str {
        self.line_flush.name()
    }
}

impl PmemLog for FilePmem {
    fn len(&self) -> usize {
        self.map.bytes().len()
    }

    fn read(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.map.bytes()[offset..offset + out.len()]);
    }

    /// The file's data extents (`SEEK_DATA`, `SEEK_HOLE`): pages never written are holes
    /// of the sparse file the open made.
    fn written_ranges(&self) -> Vec<Range<usize>> {
        use std::os::fd::AsRawFd;
        let fd = self.file.as_raw_fd();
        let len = self.map.bytes().len();
        let mut ranges = Vec::new();
        let mut at = 0usize;
        while at < len {
            // SAFETY: lseek on a descriptor this struct owns; it moves only the descriptor's
            // offset, which nothing else uses (the bytes go through the mapping).
            let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                // ENXIO: nothing but holes past `at`. Another error (a file system that
                // cannot say): take the rest as written.
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO) {
                    ranges.push(at..len);
                }
                break;
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            let end = if hole < 0 { len } else { (hole as usize).min(len) };
            ranges.push(data as usize..end);
            at = end;
        }
        ranges
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.map.bytes_mut()[offset..offset + data.len()].copy_from_slice(data);
    }

    fn persist(&mut self, offset: usize, len: usize) -> Result<()> {
        assert!(offset + len <= self.map.bytes().len(), "persist past the region's end");
        if len == 0 {
            return Ok(());
        }
        match self.opts.flush {
            FlushMode::Msync => self.map.flush_range(offset, len).map_err(|e| {
                Error::Space(
                    shale_io::Error::Io {
                        op: shale_io::OpKind::Flush,
                        offset: offset as u64,
                        source: e,
                    }
                    .into(),
                )
            })?,
            FlushMode::CacheLines => {
                let first = offset / LINE_BYTES * LINE_BYTES;
                let base = self.map.bytes().as_ptr();
                self.line_flush.write_back(base, first, offset + len);
            }
        }
        if !self.opts.extra_latency.is_zero() {
            spin_for(self.opts.extra_latency);
        }
        Ok(())
    }
}

/// Busy-waits: a sleep is far coarser than the sub-microsecond delays emulated.
fn spin_for(d: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The cache-line write-back instruction of this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineFlush {
    /// Writes the line back and keeps it cached.
    #[cfg(target_arch = "x86_64")]
    Clwb,
    /// Writes the line back and evicts it, weakly ordered.
    #[cfg(target_arch = "x86_64")]
    Clflushopt,
    /// Writes the line back and evicts it, ordered (every x86-64 has it).
    #[cfg(target_arch = "x86_64")]
    Clflush,
    /// No line instruction: `msync` of the pages.
    #[cfg(not(target_arch = "x86_64"))]
    Msync,
}

impl LineFlush {
    #[cfg(target_arch = "x86_64")]
    fn detect() -> LineFlush {
        // CPUID leaf 7, sub-leaf 0, EBX: bit 24 CLWB, bit 23 CLFLUSHOPT.
        let ebx = core::arch::x86_64::__cpuid_count(7, 0).ebx;
        if ebx & (1 << 24) != 0 {
            LineFlush::Clwb
        } else if ebx & (1 << 23) != 0 {
            LineFlush::Clflushopt
        } else {
            LineFlush::Clflush
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> LineFlush {
        LineFlush::Msync
    }

    fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            LineFlush::Clwb => "clwb",
            #[cfg(target_arch = "x86_64")]
            LineFlush::Clflushopt => "clflushopt",
            #[cfg(target_arch = "x86_64")]
            LineFlush::Clflush => "clflush",
            #[cfg(not(target_arch = "x86_64"))]
            LineFlush::Msync => "msync",
        }
    }

    /// Writes back the lines of `base[first..end]` (`first` line-aligned) and fences.
    #[cfg(target_arch = "x86_64")]
    fn write_back(self, base: *const u8, first: usize, end: usize) {
        use core::arch::asm;
        let mut at = first;
        while at < end {
            // SAFETY: `base + at` lies inside the mapping (`at < end <= len`, checked by the
            // caller's assert), so the instruction names mapped memory; the write-back
            // instructions change no register, flag or memory contents, only where a line's
            // bytes live, and CPUID said this CPU has the instruction used.
            unsafe {
                let p = base.add(at);
                match self {
                    LineFlush::Clwb => {
                        asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
                    }
                    LineFlush::Clflushopt => {
                        asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
                    }
                    LineFlush::Clflush => core::arch::x86_64::_mm_clflush(p),
                }
            }
            at += LINE_BYTES;
        }
        // SAFETY: sfence has no operands and is part of SSE, which every x86-64 CPU has.
        unsafe { core::arch::x86_64::_mm_sfence() };
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn write_back(self, base: *const u8, first: usize, end: usize) {
        // Reached only through FlushMode::CacheLines off x86-64, where FilePmem::persist
        // sends the range to msync instead; keep the signature total.
        let _ = (base, first, end);
        unreachable!("msync is done by FilePmem::persist off x86-64");
    }
}

/// Simulated persistent memory: stores are traced, and a crash image keeps each line
/// written since its last persist, or loses it, by a seed.
///
/// Clones are handles on one region, so a test keeps one while the store owns another.
/// Given the simulated device beside it ([`SimPmem::beside`]), every event is tagged with
/// the device's write count at that moment, so a crash after device write `k` can be matched
/// with the persistent memory as it was then.
#[derive(Clone)]
pub struct SimPmem {
    inner: Arc<Mutex<SimState>>,
}

struct SimState {
    initial: Vec<u8>,
    current: Vec<u8>,
    events: Vec<(u64, Event)>,
    clock: Option<shale_io::SimDevice>,
}

#[derive(Clone)]
enum Event {
    Write { offset: usize, data: Box<[u8]> },
    Persist { first_line: usize, end_line: usize },
}

impl std::fmt::Debug for SimPmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.lock();
        f.debug_struct("SimPmem")
            .field("len", &s.current.len())
            .field("events", &s.events.len())
            .finish()
    }
}

impl SimPmem {
    /// A zeroed region of `len` bytes (a multiple of 64).
    pub fn new(len: usize) -> SimPmem {
        SimPmem::from_image(vec![0; len], None)
    }

    /// A zeroed region whose events are tagged with `device`'s write count.
    pub fn beside(len: usize, device: &shale_io::SimDevice) -> SimPmem {
        SimPmem::from_image(vec![0; len], Some(device.clone()))
    }

    /// A region holding `image` (a crash image, to recover from), tagged with `device`'s
    /// write count if given.
    ///
    /// # Panics
    /// If the image is not a whole number of lines.
    pub fn from_image(image: Vec<u8>, clock: Option<shale_io::SimDevice>) -> SimPmem {
        assert_eq!(image.len() % LINE_BYTES, 0, "a simulated region of whole lines");
        SimPmem {
            inner: Arc::new(Mutex::new(SimState {
                current: image.clone(),
                initial: image,
                events: Vec::new(),
                clock,
            })),
        }
    }

    /// A boxed handle for a store.
    pub fn boxed(&self) -> Box<dyn PmemLog> {
        Box::new(self.clone())
    }

    /// Events so far (writes and persists).
    pub fn events(&self) -> usize {
        self.inner.lock().events.len()
    }

    /// For each persist so far: the number of events up to and including it, and the
    /// device's write count when it happened (0 without a device).
    pub fn persist_points(&self) -> Vec<(usize, u64)> {
        let s = self.inner.lock();
        s.events
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| matches!(e, Event::Persist { .. }))
            .map(|(i, (tag, _))| (i + 1, *tag))
            .collect()
    }

    /// Events that happened while the device had received at most `device_writes` writes:
    /// the cut that goes with a device crash right before write `device_writes + 1`.
    pub fn events_until_device_write(&self, device_writes: u64) -> usize {
        let s = self.inner.lock();
        s.events.iter().take_while(|(tag, _)| *tag <= device_writes).count()
    }

    /// What the region could hold after a crash right after its first `events` events:
    /// persisted lines as they were persisted, and each line written since its last persist
    /// kept (as last written) or lost (as last persisted), one chance in two each, by `seed`.
    ///
    /// # Panics
    /// If `events` exceeds [`SimPmem::events`].
    pub fn crash_image(&self, events: usize, seed: u64) -> Vec<u8> {
        let s = self.inner.lock();
        assert!(events <= s.events.len(), "crash after event {events} of {}", s.events.len());
        let mut durable = s.initial.clone();
        let mut current = s.initial.clone();
        let mut dirty = std::collections::BTreeSet::new();
        for (_, e) in &s.events[..events] {
            match e {
                Event::Write { offset, data } => {
                    current[*offset..*offset + data.len()].copy_from_slice(data);
                    let first = offset / LINE_BYTES;
                    let end = (offset + data.len()).div_ceil(LINE_BYTES);
                    dirty.extend(first..end);
                }
                Event::Persist { first_line, end_line } => {
                    let (a, b) = (first_line * LINE_BYTES, end_line * LINE_BYTES);
                    durable[a..b].copy_from_slice(&current[a..b]);
                    for l in *first_line..*end_line {
                        dirty.remove(&l);
                    }
                }
            }
        }
        for line in dirty {
            if keeps(seed, line as u64) {
                let r = line * LINE_BYTES..(line + 1) * LINE_BYTES;
                durable[r.clone()].copy_from_slice(&current[r]);
            }
        }
        durable
    }

    /// Flips bits `xor` of the byte at `offset`, persistently (a damaged line).
    pub fn corrupt(&self, offset: usize, xor: u8) {
        let mut s = self.inner.lock();
        s.current[offset] ^= xor;
        s.initial[offset] ^= xor;
    }

    /// Zeroes `len` bytes at `offset`, in what reads return and in the initial image, as
    /// if never written: a hole, for tests of what searches the region.
    pub fn zero(&self, offset: usize, len: usize) {
        let mut s = self.inner.lock();
        s.current[offset..offset + len].fill(0);
        s.initial[offset..offset + len].fill(0);
    }

    /// What reads return now.
    pub fn current_image(&self) -> Vec<u8> {
        self.inner.lock().current.clone()
    }
}

/// A line's fate at a crash, by seed and line (SplitMix64 of both).
fn keeps(seed: u64, line: u64) -> bool {
    let mut z = seed ^ line.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

impl PmemLog for SimPmem {
    fn len(&self) -> usize {
        self.inner.lock().current.len()
    }

    fn read(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.inner.lock().current[offset..offset + out.len()]);
    }

    /// The runs of 4 KiB pages holding a byte other than zero, as a sparse file reports its
    /// data: what the open's search reads is then what it reads from a file.
    fn written_ranges(&self) -> Vec<Range<usize>> {
        const PAGE: usize = 4096;
        let s = self.inner.lock();
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for (i, page) in s.current.chunks(PAGE).enumerate() {
            if page.iter().all(|&b| b == 0) {
                continue;
            }
            let (start, end) = (i * PAGE, i * PAGE + page.len());
            match ranges.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => ranges.push(start..end),
            }
        }
        ranges
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        let mut s = self.inner.lock();
        s.current[offset..offset + data.len()].copy_from_slice(data);
        let tag = s.clock.as_ref().map_or(0, |d| d.writes());
        s.events.push((tag, Event::Write { offset, data: data.into() }));
    }

    fn persist(&mut self, offset: usize, len: usize) -> Result<()> {
        let mut s = self.inner.lock();
        assert!(offset + len <= s.current.len(), "persist past the region's end");
        let tag = s.clock.as_ref().map_or(0, |d| d.writes());
        let first_line = offset / LINE_BYTES;
        let end_line = (offset + len).div_ceil(LINE_BYTES);
        s.events.push((tag, Event::Persist { first_line, end_line }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persisted_lines_survive_and_unpersisted_ones_go_by_seed() {
        let mut p = SimPmem::new(1024);
        p.write(0, &[1; 64]);
        p.persist(0, 64).unwrap();
        p.write(64, &[2; 128]);
        let n = p.events();
        let mut kept = [0, 0];
        for seed in 0..64 {
            let img = p.crash_image(n, seed);
            assert_eq!(img[..64], [1; 64]);
            for (i, line) in [64..128, 128..192].into_iter().enumerate() {
                let l = &img[line];
                assert!(l.iter().all(|&b| b == 2) || l.iter().all(|&b| b == 0));
                kept[i] += usize::from(l[0] == 2);
            }
        }
        assert!(kept.iter().all(|&k| k > 8 && k < 56), "{kept:?}");
        assert_eq!(p.crash_image(1, 0)[..64], [0; 64], "written, not persisted, seed 0 drops it");
    }

    #[test]
    fn a_file_mapping_persists_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pmem");
        let opts = FilePmemOptions {
            extra_latency: Duration::from_nanos(300),
            ..FilePmemOptions::default()
        };
        let mut p = FilePmem::open(&path, 64 << 10, opts).unwrap();
        p.write(100, b"undo");
        p.persist(100, 4).unwrap();
        drop(p);
        let p = FilePmem::open(&path, 64 << 10, FilePmemOptions::default()).unwrap();
        let mut b = [0; 4];
        p.read(100, &mut b);
        assert_eq!(&b, b"undo");
        assert!(matches!(
            FilePmem::open(&path, 64 << 10, FilePmemOptions::default()),
            Err(Error::Space(shale_space::Error::InUse(_)))
        ));
        drop(p);
        assert!(matches!(
            FilePmem::open(&path, 128 << 10, FilePmemOptions::default()),
            Err(Error::InvalidArgument(_))
        ));
        let mut m = FilePmem::open(
            &path,
            64 << 10,
            FilePmemOptions { flush: FlushMode::Msync, ..FilePmemOptions::default() },
        )
        .unwrap();
        m.write(0, b"x");
        m.persist(0, 1).unwrap();
    }
}
