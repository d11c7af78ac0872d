//! The WAL tail: the records of writes acknowledged without sync whose WAL pages have not
//! completed yet, kept in memory that outlives a crash of the process.
//!
//! Why: promise P2 says a write acknowledged without sync survives a crash of the process.
//! RocksDB keeps it by copying each write into the kernel's page cache with `write(2)`; the
//! WAL here bypasses the page cache (O_DIRECT pages, SpanDB), so without this tail every
//! plain write would wait for a device write of its page (~100 us). Instead the record is
//! copied into a shared mapping of a small file (by default in `/dev/shm`): the mapping's
//! pages belong to the kernel, so they outlive the process, and a store is a memory copy. Full
//! WAL pages are written in the background; once a page and every page before it have
//! completed, the records ending in it leave the tail. Recovery replays the device's WAL,
//! then every record of the tail that continues its sequence numbers.
//!
//! The tail is not durable across power loss (`/dev/shm` is memory), and needs not be: P2 is
//! about the process; power loss keeps exactly the synced writes (P1).
//!
//! Layout of the region (integers little-endian):
//! ```text
//! offset size field
//! 0      8    magic b"SHALTAIL"
//! 8      4    format version (1)
//! 12     4    ring bytes R
//! 16     16   volume id: a tail is only ever read back for the volume that wrote it
//! 32     8    start: logical offset of the oldest record still needed
//! 40     8    end: logical offset just past the newest complete record
//! 48     16   zero
//! 64     R    the ring: logical offset p lies at 64 + p % R; a record may wrap around
//!
//! record: length u32 | crc32c u32 of (length, payload) | payload (one WAL record)
//! ```
//! A record's bytes are stored before `end` moves past it, by the same thread, so a process
//! killed at any instruction leaves `[start, end)` holding complete records only. `start` and
//! `end` are aligned 8-byte stores, never torn.
//!
//! The tail file is named after the volume id, so two copies of one volume (a `cp` of a store)
//! name the same tail. A read-write store holds an exclusive OFD lock on its tail file while
//! it has it mapped (the store lock's kind, `shale_space::store_lock`), and removes it only while
//! holding that lock; a second store finding it locked is refused (`Error::InUse`: it could
//! neither replay the records nor share the file), so a copy opened beside its original needs
//! a tail of its own (`WalTail::Dir`) or none (`WalTail::Off`). A file at the tail's name that
//! is not this volume's tail (no magic, or another volume id) is never resized or formatted:
//! the open is refused and the file is left as it was. A read-only open takes the tail's
//! lock shared, and skips a tail a writer holds (that writer is a copy's: this volume's own
//! writer would hold the store lock).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use shale_space::store_lock::{Mode, lock};

const MAGIC: &[u8; 8] = b"SHALTAIL";
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 64;
const START_AT: usize = 32;
const END_AT: usize = 40;
/// Bytes before a record's payload: its length and checksum.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Ring size of a new tail: room for what arrives while page writes wait behind compaction
/// I/O (a write waits when the ring is full; 1 MiB made 1 KB updates wait, docs/lsm.md).
pub const DEFAULT_RING_BYTES: u32 = 8 << 20;

/// Where a store keeps the records of unsynced writes until their WAL pages complete.
#[derive(Clone, Debug, Default)]
pub enum WalTail {
    /// A file in `/dev/shm` named after the volume id (the default). Where `/dev/shm` cannot
    /// be used the store falls back to [`WalTail::Off`] and logs a warning.
    #[default]
    Shm,
    /// A file in this directory, named after the volume id. Any file system works; on a
    /// disk-backed one the tail also reaches the disk now and then (not needed for P2).
    Dir(PathBuf),
    /// Memory shared inside this process: for tests that simulate a crash of the process by
    /// reopening with [`MemoryTail::crash_copy`].
    Memory(MemoryTail),
    /// No tail: a write without sync is acknowledged once its WAL page write has completed,
    /// one device write per write (or per group of concurrent writes).
    Off,
}

/// A tail region in this process's memory (see [`WalTail::Memory`]).
#[derive(Clone, Debug, Default)]
pub struct MemoryTail {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl MemoryTail {
    /// An empty region.
    pub fn new() -> MemoryTail {
        MemoryTail::default()
    }

    /// A new region holding what this one holds now: what a crash of the process at this
    /// instant would leave to the next open.
    pub fn crash_copy(&self) -> MemoryTail {
        MemoryTail { bytes: Arc::new(Mutex::new(self.bytes.lock().clone())) }
    }
}

/// Storage of a tail region.
trait Region: Send {
    fn write(&mut self, offset: usize, bytes: &[u8]);
    fn read(&self, offset: usize, len: usize) -> Vec<u8>;
    fn len(&self) -> usize;
}

/// A tail file mapped for writing, with the file kept open: its OFD lock lives as long as
/// the descriptor.
struct Mapped(memmap2::MmapMut, #[allow(dead_code)] std::fs::File);

impl Region for Mapped {
    fn write(&mut self, offset: usize, bytes: &[u8]) {
        self.0[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        self.0[offset..offset + len].to_vec()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl Region for MemoryTail {
    fn write(&mut self, offset: usize, bytes: &[u8]) {
        self.bytes.lock()[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        self.bytes.lock()[offset..offset + len].to_vec()
    }
    fn len(&self) -> usize {
        self.bytes.lock().len()
    }
}

/// An open tail.
pub struct TailLog {
    region: Box<dyn Region>,
    ring: u64,
    start: u64,
    end: u64,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for TailLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TailLog")
            .field("ring", &self.ring)
            .field("start", &self.start)
            .field("end", &self.end)
            .field("path", &self.path)
            .finish()
    }
}

/// The file a tail of volume `id` uses in `dir`.
pub fn tail_path(dir: &Path, volume_id: &[u8; 16]) -> PathBuf {
    let hex: String = volume_id.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("shale-{hex}.tail"))
}

impl TailLog {
    /// Opens the tail of volume `volume_id`, making it if missing, and returns it with the
    /// records it still holds, oldest first. `None` for [`WalTail::Off`] (and for
    /// [`WalTail::Shm`] where `/dev/shm` is unusable).
    ///
    /// # Errors
    /// [`Error::Io`] when the tail file cannot be made or mapped (outside the `Shm` default).
    pub fn open(spec: &WalTail, volume_id: &[u8; 16]) -> Result<Option<(TailLog, Vec<Vec<u8>>)>> {
        let (region, path): (Box<dyn Region>, Option<PathBuf>) = match spec {
            WalTail::Off => return Ok(None),
            WalTail::Memory(m) => {
                let m = m.clone();
                if m.len() == 0 {
                    m.bytes
                        .lock()
                        .resize((HEADER_BYTES + u64::from(DEFAULT_RING_BYTES)) as usize, 0);
                }
                (Box::new(m), None)
            }
            WalTail::Dir(dir) => {
                let path = tail_path(dir, volume_id);
                (Box::new(map_file(&path, volume_id)?), Some(path))
            }
            WalTail::Shm => {
                let path = tail_path(Path::new("/dev/shm"), volume_id);
                match map_file(&path, volume_id) {
                    Ok(m) => (Box::new(m), Some(path)),
                    // Held by another store, or not a tail of this volume: running without a
                    // tail would skip records this store may need replayed; refuse instead.
                    Err(e @ (Error::InUse(_) | Error::InvalidArgument(_))) => return Err(e),
                    Err(e) => {
                        log::warn!(
                            "WAL tail unusable at {} ({e}): writes without sync will each wait \
                             for their WAL page",
                            path.display()
                        );
                        return Ok(None);
                    }
                }
            }
        };
        let mut tail = TailLog { region, ring: 0, start: 0, end: 0, path };
        let records = tail.load(volume_id);
        Ok(Some((tail, records)))
    }

    /// The records the tail of volume `volume_id` holds, oldest first, read without changing
    /// anything: no file is made, sized or formatted and no record is trimmed (a read-only
    /// open of the store: the tail stays for the next read-write open to replay).
    ///
    /// # Errors
    /// [`Error::Io`] when a tail file exists but cannot be opened or mapped.
    pub fn read_records(spec: &WalTail, volume_id: &[u8; 16]) -> Result<Vec<Vec<u8>>> {
        let region: Box<dyn Region> = match spec {
            WalTail::Off => return Ok(Vec::new()),
            WalTail::Memory(m) if m.len() == 0 => return Ok(Vec::new()),
            WalTail::Memory(m) => Box::new(m.clone()),
            WalTail::Dir(dir) => match map_file_read_only(&tail_path(dir, volume_id))? {
                Some(m) => Box::new(m),
                None => return Ok(Vec::new()),
            },
            WalTail::Shm => {
                match map_file_read_only(&tail_path(Path::new("/dev/shm"), volume_id))? {
                    Some(m) => Box::new(m),
                    None => return Ok(Vec::new()),
                }
            }
        };
        let mut tail = TailLog { region, ring: 0, start: 0, end: 0, path: None };
        Ok(tail.read_existing(volume_id).unwrap_or_default())
    }

    /// Reads the header and the records, or formats the region afresh where it holds no tail
    /// of this volume.
    fn load(&mut self, volume_id: &[u8; 16]) -> Vec<Vec<u8>> {
        match self.read_existing(volume_id) {
            Some(records) => records,
            None => {
                let len = self.region.len() as u64;
                self.format(volume_id, len - HEADER_BYTES);
                Vec::new()
            }
        }
    }

    /// The records of this volume's tail, or `None` where the region holds no tail of it.
    fn read_existing(&mut self, volume_id: &[u8; 16]) -> Option<Vec<Vec<u8>>> {
        let len = self.region.len() as u64;
        if len < HEADER_BYTES {
            return None;
        }
        let h = self.region.read(0, HEADER_BYTES as usize);
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        let ring = u64::from(u32_at(12));
        let ours = &h[..8] == MAGIC
            && u32_at(8) == VERSION
            && ring > 0
            && HEADER_BYTES + ring == len
            && h[16..32] == volume_id[..]
            && u64_at(START_AT) <= u64_at(END_AT)
            && u64_at(END_AT) - u64_at(START_AT) <= ring;
        if !ours {
            return None;
        }
        self.ring = ring;
        self.start = u64_at(START_AT);
        self.end = u64_at(END_AT);
        let mut records = Vec::new();
        let mut pos = self.start;
        while pos + RECORD_HEADER_BYTES as u64 <= self.end {
            let head = self.read_ring(pos, RECORD_HEADER_BYTES);
            let n = u32::from_le_bytes(head[..4].try_into().unwrap()) as u64;
            let crc = u32::from_le_bytes(head[4..].try_into().unwrap());
            let body_at = pos + RECORD_HEADER_BYTES as u64;
            if body_at + n > self.end {
                break;
            }
            let body = self.read_ring(body_at, n as usize);
            if crc32c::crc32c_append(crc32c::crc32c(&head[..4]), &body) != crc {
                // Stored before `end` moved past it, so this cannot happen after a crash of
                // the process; the region was damaged some other way. Keep what came before.
                log::warn!("WAL tail record at {pos} fails its checksum; the tail ends there");
                break;
            }
            records.push(body);
            pos = body_at + n;
        }
        Some(records)
    }

    fn format(&mut self, volume_id: &[u8; 16], ring: u64) {
        let mut h = vec![0u8; HEADER_BYTES as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(ring as u32).to_le_bytes());
        h[16..32].copy_from_slice(volume_id);
        self.region.write(0, &h);
        self.ring = ring;
        self.start = 0;
        self.end = 0;
    }

    /// Bytes free in the ring.
    pub fn room(&self) -> u64 {
        self.ring - (self.end - self.start)
    }

    /// Size of the ring.
    pub fn ring_bytes(&self) -> u64 {
        self.ring
    }

    /// Bytes a record of `len` payload bytes takes.
    pub fn footprint(len: usize) -> u64 {
        (RECORD_HEADER_BYTES + len) as u64
    }

    /// Appends a record and returns the logical offset just past it.
    ///
    /// # Panics
    /// If it does not fit: the caller checks [`TailLog::room`].
    pub fn append(&mut self, payload: &[u8]) -> u64 {
        assert!(TailLog::footprint(payload.len()) <= self.room(), "WAL tail overflow");
        let mut head = [0u8; RECORD_HEADER_BYTES];
        head[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..4]), payload);
        head[4..].copy_from_slice(&crc.to_le_bytes());
        self.write_ring(self.end, &head);
        self.write_ring(self.end + RECORD_HEADER_BYTES as u64, payload);
        self.end += TailLog::footprint(payload.len());
        // Only now is the record inside [start, end).
        self.region.write(END_AT, &self.end.to_le_bytes());
        self.end
    }

    /// Forgets the records before logical offset `pos`: their pages have completed.
    pub fn trim_to(&mut self, pos: u64) {
        let pos = pos.min(self.end);
        if pos > self.start {
            self.start = pos;
            self.region.write(START_AT, &self.start.to_le_bytes());
        }
    }

    /// Forgets every record: all of them are on the device (or, at open, replayed and
    /// committed).
    pub fn clear(&mut self) {
        self.trim_to(self.end);
    }

    /// Removes a tail file after a clean close (nothing in it is needed).
    pub fn remove_file(self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }

    fn write_ring(&mut self, pos: u64, bytes: &[u8]) {
        let at = (pos % self.ring) as usize;
        let first = bytes.len().min(self.ring as usize - at);
        self.region.write(HEADER_BYTES as usize + at, &bytes[..first]);
        if first < bytes.len() {
            self.region.write(HEADER_BYTES as usize, &bytes[first..]);
        }
    }

    fn read_ring(&self, pos: u64, len: usize) -> Vec<u8> {
        let at = (pos % self.ring) as usize;
        let first = len.min(self.ring as usize - at);
        let mut out = self.region.read(HEADER_BYTES as usize + at, first);
        if first < len {
            out.extend(self.region.read(HEADER_BYTES as usize, len - first));
        }
        out
    }
}

fn map_file(path: &Path, volume_id: &[u8; 16]) -> Result<Mapped> {
    use shale_io::PathOp;
    let failed = |op| move |e| Error::from(shale_io::Error::at_path(op, path, e));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(failed(PathOp::Open))?;
    lock_tail(&file, path, Mode::Exclusive)?;
    let want = HEADER_BYTES + u64::from(DEFAULT_RING_BYTES);
    let len = file.metadata().map_err(failed(PathOp::Stat))?.len();
    if len > 0 {
        check_ours(&file, path, volume_id)?;
    }
    if !usable_len(len) {
        // New (or ours but of a size no tail has: damaged; its records cannot be read back
        // anyway): size it; `load` formats it.
        if len > 0 {
            log::warn!(
                "WAL tail {} has an unusable size of {len} bytes: made anew",
                path.display()
            );
        }
        file.set_len(0).map_err(failed(PathOp::Allocate { bytes: want }))?;
        file.set_len(want).map_err(failed(PathOp::Allocate { bytes: want }))?;
    }
    // SAFETY: the file is this store's alone while it holds the tail's exclusive lock (taken
    // above, kept with the mapping): no one else resizes or writes it while it is mapped.
    let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(failed(PathOp::Map))?;
    Ok(Mapped(map, file))
}

/// Takes the tail's lock, or says who holds it.
fn lock_tail(file: &std::fs::File, path: &Path, mode: Mode) -> Result<()> {
    lock(file, mode).map_err(|e| match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES) => Error::InUse(format!(
            "WAL tail {} is held by another store (a copy of this volume, opened elsewhere)",
            path.display()
        )),
        _ => Error::from(shale_io::Error::at_path(shale_io::PathOp::Lock, path, e)),
    })
}

/// Refuses a non-empty file at the tail's name that does not begin as this volume's tail:
/// it is left exactly as it was.
fn check_ours(file: &std::fs::File, path: &Path, volume_id: &[u8; 16]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 32];
    let read = file.read_exact_at(&mut head, 0);
    if read.is_err() || &head[..8] != MAGIC || head[16..32] != volume_id[..] {
        return Err(Error::InvalidArgument(format!(
            "{} is not this store's WAL tail (no tail magic or another volume's id); it was \
             left untouched: move it away, or choose another WalTail",
            path.display()
        )));
    }
    Ok(())
}

/// Whether a tail file of `len` bytes can hold a tail at all.
fn usable_len(len: u64) -> bool {
    (HEADER_BYTES + 8..=HEADER_BYTES + u64::from(u32::MAX)).contains(&len)
}

/// A tail file mapped for reading only (a read-only open of the store).
struct MappedReadOnly(memmap2::Mmap, #[allow(dead_code)] std::fs::File);

impl Region for MappedReadOnly {
    fn write(&mut self, _offset: usize, _bytes: &[u8]) {
        unreachable!("a tail read for a read-only open is never written");
    }
    fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        self.0[offset..offset + len].to_vec()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Maps an existing tail file read-only; `None` where there is none (or it is too short or
/// long to be one).
fn map_file_read_only(path: &Path) -> Result<Option<MappedReadOnly>> {
    use shale_io::PathOp;
    let failed = |op| move |e| Error::from(shale_io::Error::at_path(op, path, e));
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(PathOp::Open)(e)),
    };
    if !usable_len(file.metadata().map_err(failed(PathOp::Stat))?.len()) {
        return Ok(None);
    }
    // A writer holding the tail while this handle holds the store shared is another copy's
    // writer (this volume's own writer would hold the store lock): its records are not ours.
    if let Err(e) = lock_tail(&file, path, Mode::Shared) {
        log::warn!("{e}: its records are not replayed");
        return Ok(None);
    }
    // SAFETY: as in `map_file`; the tail's shared lock, held with the mapping, keeps any
    // writer from mapping it for writing meanwhile.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(failed(PathOp::Map))?;
    Ok(Some(MappedReadOnly(map, file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: [u8; 16] = *b"0123456789abcdef";

    fn open(spec: &WalTail) -> (TailLog, Vec<Vec<u8>>) {
        TailLog::open(spec, &ID).unwrap().unwrap()
    }

    #[test]
    fn records_survive_a_crash_copy_and_wrap_around_the_ring() {
        let mem = MemoryTail::new();
        let (mut t, got) = open(&WalTail::Memory(mem.clone()));
        assert!(got.is_empty());
        let ring = t.ring_bytes();
        // Fill and trim so that later records wrap around the ring's end.
        let big = vec![7u8; (ring / 3) as usize];
        let after_first = t.append(&big);
        t.append(&big);
        t.trim_to(after_first);
        let recs: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 1000 + i as usize]).collect();
        let end_of_big = t.end;
        t.trim_to(end_of_big);
        for r in &recs {
            t.append(r);
        }
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, recs);
    }

    #[test]
    fn read_records_changes_nothing_and_makes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        assert!(TailLog::read_records(&spec, &ID).unwrap().is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a read made a tail file");
        let (mut t, _) = open(&spec);
        let a = t.append(b"first");
        t.append(b"second");
        t.trim_to(a);
        // The writer is gone (a crash): a read-only open of the store reads what it left. (A
        // read beside this volume's own writer cannot happen: the store lock keeps them
        // apart; beside a copy's writer the tail is skipped, see the test below.)
        drop(t);
        let file = tail_path(dir.path(), &ID);
        let before = std::fs::read(&file).unwrap();
        assert_eq!(TailLog::read_records(&spec, &ID).unwrap(), vec![b"second".to_vec()]);
        // Another volume's tail is neither replayed nor formatted over.
        let other = *b"fedcba9876543210";
        std::fs::copy(&file, tail_path(dir.path(), &other)).unwrap();
        assert!(TailLog::read_records(&spec, &other).unwrap().is_empty());
        assert_eq!(std::fs::read(tail_path(dir.path(), &other)).unwrap(), before);
        assert_eq!(std::fs::read(&file).unwrap(), before, "a read changed the tail");
        let mem = MemoryTail::new();
        assert!(TailLog::read_records(&WalTail::Memory(mem.clone()), &ID).unwrap().is_empty());
        assert_eq!(mem.len(), 0, "a read sized the memory tail");
    }

    #[test]
    fn trimmed_records_are_gone_and_a_foreign_tail_is_ignored() {
        let mem = MemoryTail::new();
        let (mut t, _) = open(&WalTail::Memory(mem.clone()));
        let a = t.append(b"first");
        t.append(b"second");
        t.trim_to(a);
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, vec![b"second".to_vec()]);
        let other = TailLog::open(&WalTail::Memory(mem.crash_copy()), b"fedcba9876543210")
            .unwrap()
            .unwrap();
        assert!(other.1.is_empty(), "another volume's tail must not be replayed");
    }

    #[test]
    fn a_record_half_stored_is_not_replayed() {
        let mem = MemoryTail::new();
        let (mut t, _) = open(&WalTail::Memory(mem.clone()));
        t.append(b"whole");
        // A crash while storing the next one: its bytes are there, `end` is not moved yet.
        let end = t.end;
        t.write_ring(end, &[9, 0, 0, 0, 1, 2, 3, 4, b'p', b'a', b'r']);
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, vec![b"whole".to_vec()]);
    }

    #[test]
    fn a_damaged_record_ends_the_tail() {
        let mem = MemoryTail::new();
        let (mut t, _) = open(&WalTail::Memory(mem.clone()));
        t.append(b"one");
        let second = t.end;
        t.append(b"two");
        t.append(b"three");
        t.write_ring(second + RECORD_HEADER_BYTES as u64, b"X");
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, vec![b"one".to_vec()]);
    }

    #[test]
    fn a_file_tail_is_read_back_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        {
            let (mut t, _) = open(&spec);
            t.append(b"kept by the kernel");
            // Dropped without clear: as if the process died.
        }
        let (t, got) = open(&spec);
        assert_eq!(got, vec![b"kept by the kernel".to_vec()]);
        let path = tail_path(dir.path(), &ID);
        assert!(path.exists());
        t.remove_file();
        assert!(!path.exists());
    }

    #[test]
    fn a_tail_held_by_another_store_was_shared_by_copies_of_a_volume() {
        // Two copies of a volume have one id, so they name one tail: the first to open holds
        // it, and the second is refused instead of writing into (or, on close, removing) the
        // first one's records.
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let (mut first, _) = open(&spec);
        first.append(b"the first copy's record");
        match TailLog::open(&spec, &ID) {
            Err(Error::InUse(msg)) => assert!(msg.contains("another store"), "{msg}"),
            other => panic!("a held tail was opened again: {:?}", other.map(|_| ())),
        }
        // A read-only open skips the held tail, and changes nothing.
        assert!(TailLog::read_records(&spec, &ID).unwrap().is_empty());
        drop(first);
        let (_, got) = open(&spec);
        assert_eq!(got, vec![b"the first copy's record".to_vec()]);
    }

    #[test]
    fn a_foreign_file_at_the_tail_name_was_truncated_and_formatted() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let path = tail_path(dir.path(), &ID);
        for foreign in [b"somebody's notes\n".to_vec(), vec![0u8; 4096], {
            // A tail of another volume, at this volume's name.
            let mut h = vec![0u8; HEADER_BYTES as usize + 64];
            h[..8].copy_from_slice(MAGIC);
            h[16..32].copy_from_slice(b"fedcba9876543210");
            h
        }] {
            std::fs::write(&path, &foreign).unwrap();
            match TailLog::open(&spec, &ID) {
                Err(Error::InvalidArgument(msg)) => assert!(msg.contains("untouched"), "{msg}"),
                other => panic!("a foreign file was taken as the tail: {:?}", other.map(|_| ())),
            }
            assert_eq!(std::fs::read(&path).unwrap(), foreign, "the foreign file changed");
        }
        // An empty file is no one's: it is made into the tail.
        std::fs::write(&path, b"").unwrap();
        open(&spec).0.remove_file();
    }
}
