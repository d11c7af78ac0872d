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
//! 8      4    format version (2; 1 had zeros for the instance id)
//! 12     4    ring bytes R
//! 16     16   volume id: a tail is only ever read back for the volume that wrote it
//! 32     8    start: logical offset of the oldest record still needed
//! 40     8    end: logical offset just past the newest complete record
//! 48     16   instance id of the store's volume file (`shale_space::instance_id`; zero for
//!             a store opened on a device directly)
//! 64     R    the ring: logical offset p lies at 64 + p % R; a record may wrap around
//!
//! 64+R   4032 trailer (files made by format 2; a file whose length is a multiple of 4096
//!             has one, a memory tail or a file of format 1 none):
//!             magic b"SHTLPATH" | path bytes u32 | the store's volume file, canonical, as
//!             its last read-write open named it; for `shale orphans` to tell a tail whose
//!             store is gone (never used to find records)
//!
//! record: length u32 | crc32c u32 of (length, payload) | payload (one WAL record)
//! ```
//! A record's bytes are stored before `end` moves past it, by the same thread, so a process
//! killed at any instruction leaves `[start, end)` holding complete records only. `start` and
//! `end` are aligned 8-byte stores, never torn.
//!
//! One store instance, one tail (P7). The tail file is named after the volume id and the
//! instance id of the store's volume file (`shale-<volume id>-<instance id>.tail`): a rename
//! of the store keeps its file and so its tail, while a copy (`cp -a`, rsync, a restore from
//! a backup) is a new file, so it neither reads nor removes the original's tail. A copy of a
//! crashed store therefore opens as after a machine crash (its synced writes, P1), and says
//! in a warning that it left another instance's tail alone. A tail of format 1, named after
//! the volume id alone by a shale before instance ids, is adopted by the first read-write
//! open of its volume (renamed and stamped), as that shale would have replayed it.
//! A read-write store holds an exclusive OFD lock on its tail file while
//! it has it mapped (the store lock's kind, `shale_space::store_lock`), and removes it only while
//! holding that lock; a second store finding it locked is refused (`Error::InUse`). A file at the tail's name that
//! is not this volume's tail (no magic, or another volume id) is never resized or formatted:
//! the open is refused and the file is left as it was. A read-only open takes the tail's
//! lock shared, and skips a tail a writer holds (that writer is a copy's: this volume's own
//! writer would hold the store lock).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use shale_space::store_lock::{LockedFile, Mode, lock, unlock};

const MAGIC: &[u8; 8] = b"SHALTAIL";
const VERSION: u32 = 2;
/// The format before instance ids: read, and adopted by a read-write open.
const VERSION_WITHOUT_INSTANCE: u32 = 1;
const HEADER_BYTES: u64 = 64;
const START_AT: usize = 32;
const END_AT: usize = 40;
const INSTANCE_AT: usize = 48;
/// Bytes of the trailer after the ring: header and trailer make one page, so a file's length
/// says whether it has one.
const TRAILER_BYTES: u64 = 4096 - HEADER_BYTES;
const TRAILER_MAGIC: &[u8; 8] = b"SHTLPATH";

/// The trailer's bytes in a region of `len` bytes: a file tail of format 2 has one.
fn trailer_bytes(len: u64) -> u64 {
    if len % 4096 == 0 { TRAILER_BYTES } else { 0 }
}
/// Bytes before a record's payload: its length and checksum.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Smallest ring of a new tail: room for what arrives while page writes wait behind
/// compaction I/O (a write waits when the ring is full; 1 MiB made 1 KB updates wait,
/// docs/lsm.md). The engine asks for more: room for the unflushed memtables' records, which
/// then never reach the device (the module doc of [`super`], "Deferred groups").
pub const DEFAULT_RING_BYTES: u32 = 8 << 20;

/// The ring's storage is taken and given back in chunks of this size: taken (`fallocate`)
/// before a record is stored in a chunk, given back (a punched hole) once every record in it
/// is trimmed, a few chunks per later write (`PUNCHES_PER_ROOM`). So the tail holds memory for the records it keeps, not for the whole ring, as
/// the page cache holds a deleted log file's pages no longer; and a full `/dev/shm` refuses a
/// chunk with an error the writer handles (it writes pages instead) rather than a SIGBUS at a
/// store into the mapping.
pub const CHUNK_BYTES: u64 = 2 << 20;
/// Trimmed chunks given back per [`TailLog::make_room`]. A flush's commit trims a memtable's
/// records at once (32 chunks for 64 MiB), and punching them all there held the write group's
/// leader, and every writer waiting on the WAL lock, for tens of milliseconds of unmapping and
/// freeing pages (YCSB's load, BENCHMARKS-history.md, "Issue #44: the WAL tail's chunks given
/// back in installments"). Two per call pays that debt back within a few groups while no
/// group waits more than two chunks' worth; a chunk's own storage is taken once per 2 MiB of
/// records, so the debt shrinks while writes go on.
const PUNCHES_PER_ROOM: u64 = 2;

/// Where a store keeps the records of unsynced writes until their WAL pages complete.
#[derive(Clone, Debug, Default)]
pub enum WalTail {
    /// A file in `/dev/shm` named after the volume id and the store's instance (the default).
    /// Where `/dev/shm` cannot be used the store falls back to [`WalTail::Off`] and logs a
    /// warning.
    #[default]
    Shm,
    /// A file in this directory, named after the volume id and the store's instance. Any
    /// file system works; on a disk-backed one the tail also reaches the disk now and then
    /// (not needed for P2).
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
    /// Backs `[offset, offset + len)` with storage before it is written. Memory regions have
    /// it already.
    fn reserve(&mut self, _offset: usize, _len: usize) -> std::io::Result<()> {
        Ok(())
    }
    /// Gives back the storage of `[offset, offset + len)`, whose bytes are no longer needed;
    /// they read as zeros until written again.
    fn release(&mut self, _offset: usize, _len: usize) {}
}

/// A tail file mapped for writing, with the file kept open and locked as long as the
/// mapping lives.
struct Mapped(memmap2::MmapMut, #[allow(dead_code)] LockedFile);

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
    fn reserve(&mut self, offset: usize, len: usize) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: plain system call on a descriptor this mapping owns.
        let rc = unsafe {
            libc::fallocate(
                self.1.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Map the chunk's pages in one call rather than one fault per 4 KiB page as records
        // reach them: the faults tripled a fill's page faults (16.7k to 50.8k for 1M records
        // of 100 B). Only a hint: a kernel without MADV_POPULATE_WRITE (before 5.14) faults.
        let _ = self.0.advise_range(memmap2::Advice::PopulateWrite, offset, len);
        Ok(())
    }
    fn release(&mut self, offset: usize, len: usize) {
        use std::os::fd::AsRawFd;
        // SAFETY: as above. Failing only keeps memory that could have gone back: the bytes
        // are trimmed either way, so the error is not worth more than a debug line.
        let rc = unsafe {
            libc::fallocate(
                self.1.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            log::debug!("WAL tail: hole not punched: {}", std::io::Error::last_os_error());
        }
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
    /// The ring is a whole number of [`CHUNK_BYTES`] chunks, taken and given back as records
    /// come and go (a ring of another size, left by an older store, stays whole).
    chunked: bool,
    /// Logical offsets `[released_to, reserved_to)`, whole chunks, have storage: from the
    /// chunk holding `start` to the one holding `end` (or past it). Chunks `[punched_to,
    /// released_to)` hold no record but still have theirs: given back a few at a time
    /// ([`PUNCHES_PER_ROOM`]), not all at once by the trim that freed them.
    punched_to: u64,
    released_to: u64,
    reserved_to: u64,
    /// A chunk was refused (the file system is full): said once.
    refused: bool,
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

/// Which store a tail belongs to: its volume id, and the instance id of its volume file
/// (`None` for a store opened on a device directly, which no copy can share).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailOwner {
    /// The volume id, from the format header.
    pub volume_id: [u8; 16],
    /// [`shale_space::instance_id`] of the store's volume file.
    pub instance_id: Option<[u8; 16]>,
}

impl TailOwner {
    /// The instance id as the header stores it.
    fn instance_bytes(&self) -> [u8; 16] {
        self.instance_id.unwrap_or([0; 16])
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file the tail of `owner` uses in `dir`.
pub fn tail_path(dir: &Path, owner: &TailOwner) -> PathBuf {
    match &owner.instance_id {
        Some(instance) => {
            dir.join(format!("shale-{}-{}.tail", hex(&owner.volume_id), hex(instance)))
        }
        None => legacy_tail_path(dir, &owner.volume_id),
    }
}

/// The name a tail of volume `volume_id` had before instance ids (and still has for a store
/// opened on a device directly).
fn legacy_tail_path(dir: &Path, volume_id: &[u8; 16]) -> PathBuf {
    dir.join(format!("shale-{}.tail", hex(volume_id)))
}

/// Tails in `dir` of other instances of the same volume (copies of the store): named after
/// its volume id with another instance id.
fn other_instances(dir: &Path, owner: &TailOwner) -> Vec<PathBuf> {
    let ours = tail_path(dir, owner);
    let prefix = format!("shale-{}-", hex(&owner.volume_id));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with(&prefix) && name.ends_with(".tail") && *p != ours
        })
        .collect()
}

/// Gives a tail of format 1 (named after the volume id alone) to the instance opening its
/// volume read-write, as the shale that wrote it would have replayed it; and says which
/// tails of other instances of the volume were left alone.
fn adopt_or_report(dir: &Path, owner: &TailOwner) {
    if owner.instance_id.is_none() {
        return;
    }
    let ours = tail_path(dir, owner);
    let legacy = legacy_tail_path(dir, &owner.volume_id);
    if !ours.exists() && legacy.exists() {
        match std::fs::rename(&legacy, &ours) {
            Ok(()) => log::info!(
                "WAL tail {} of an older shale adopted as {}",
                legacy.display(),
                ours.display()
            ),
            Err(e) => log::warn!("WAL tail {} not adopted: {}", legacy.display(), shale_io::Chain(&e)),
        }
    }
    for other in other_instances(dir, owner) {
        log::warn!(
            "WAL tail {} belongs to another copy of this volume (the store this one was copied \
             from, or a copy of it): left alone; this store opens as after a machine crash, \
             without the writes that copy acknowledged without sync",
            other.display()
        );
    }
}

impl TailLog {
    /// Opens the tail of volume `volume_id`, making it if missing, and returns it with the
    /// records it still holds, oldest first. `None` for [`WalTail::Off`] (and for
    /// [`WalTail::Shm`] where `/dev/shm` is unusable).
    ///
    /// # Errors
    /// [`Error::Io`] when the tail file cannot be made or mapped (outside the `Shm` default).
    ///
    /// A new tail's ring is `ring_bytes` rounded up to whole [`CHUNK_BYTES`] chunks; an
    /// existing one keeps the size it has, and its records.
    pub fn open(
        spec: &WalTail,
        owner: &TailOwner,
        volume_path: Option<&Path>,
        ring_bytes: u64,
    ) -> Result<Option<(TailLog, Vec<Vec<u8>>)>> {
        let ring = new_ring_bytes(ring_bytes);
        let (region, path): (Box<dyn Region>, Option<PathBuf>) = match spec {
            WalTail::Off => return Ok(None),
            WalTail::Memory(m) => {
                let m = m.clone();
                if m.len() == 0 {
                    // Zeroed by the allocator, lazily: a test's tail costs only what it holds.
                    *m.bytes.lock() = vec![0; (HEADER_BYTES + ring) as usize];
                }
                (Box::new(m), None)
            }
            WalTail::Dir(dir) => {
                adopt_or_report(dir, owner);
                let path = tail_path(dir, owner);
                (Box::new(map_file(&path, owner, ring)?), Some(path))
            }
            WalTail::Shm => {
                adopt_or_report(Path::new(SHM_DIR), owner);
                let path = tail_path(Path::new(SHM_DIR), owner);
                match map_file(&path, owner, ring) {
                    Ok(m) => (Box::new(m), Some(path)),
                    // Held by another store, or not a tail of this volume: running without a
                    // tail would skip records this store may need replayed; refuse instead.
                    Err(e @ (Error::InUse(_) | Error::InvalidArgument(_))) => return Err(e),
                    Err(e) => {
                        log::warn!(
                            "WAL tail unusable at {} ({}): writes without sync will each wait \
                             for their WAL page",
                            path.display(),
                            shale_io::Chain(&e)
                        );
                        return Ok(None);
                    }
                }
            }
        };
        let mut tail = TailLog::unloaded(region, path);
        let records = tail.load(owner);
        if let Some(p) = volume_path {
            tail.write_trailer(p);
        }
        tail.release_dead_chunks();
        Ok(Some((tail, records)))
    }

    /// The records the tail of volume `volume_id` holds, oldest first, read without changing
    /// anything: no file is made, sized or formatted and no record is trimmed (a read-only
    /// open of the store: the tail stays for the next read-write open to replay).
    ///
    /// # Errors
    /// [`Error::Io`] when a tail file exists but cannot be opened or mapped.
    pub fn read_records(spec: &WalTail, owner: &TailOwner) -> Result<Vec<Vec<u8>>> {
        let dir = match spec {
            WalTail::Off => return Ok(Vec::new()),
            WalTail::Memory(m) if m.len() == 0 => return Ok(Vec::new()),
            WalTail::Memory(m) => {
                let mut tail = TailLog::unloaded(Box::new(m.clone()), None);
                return Ok(tail.read_existing(owner).unwrap_or_default());
            }
            WalTail::Dir(dir) => dir.as_path(),
            WalTail::Shm => Path::new(SHM_DIR),
        };
        // This instance's tail, or one an older shale left under the volume id alone (a
        // read-only open adopts nothing: it reads that one where it is).
        let mut candidates = vec![tail_path(dir, owner)];
        if owner.instance_id.is_some() {
            candidates.push(legacy_tail_path(dir, &owner.volume_id));
        }
        for path in candidates {
            if let Some(m) = map_file_read_only(&path)? {
                let mut tail = TailLog::unloaded(Box::new(m), None);
                if let Some(records) = tail.read_existing(owner) {
                    return Ok(records);
                }
            }
        }
        Ok(Vec::new())
    }

    fn unloaded(region: Box<dyn Region>, path: Option<PathBuf>) -> TailLog {
        TailLog {
            region,
            ring: 0,
            start: 0,
            end: 0,
            path,
            chunked: false,
            punched_to: 0,
            released_to: 0,
            reserved_to: 0,
            refused: false,
        }
    }

    /// After loading: the chunks from `start`'s to `end`'s hold the records; any other
    /// chunk's storage (left by an earlier store) goes back.
    fn release_dead_chunks(&mut self) {
        self.chunked = self.ring % CHUNK_BYTES == 0;
        if !self.chunked {
            return;
        }
        self.released_to = self.start / CHUNK_BYTES * CHUNK_BYTES;
        self.punched_to = self.released_to;
        self.reserved_to = self.end.div_ceil(CHUNK_BYTES) * CHUNK_BYTES;
        let chunks = self.ring / CHUNK_BYTES;
        let live = (self.reserved_to - self.released_to) / CHUNK_BYTES;
        let first_live = self.released_to / CHUNK_BYTES % chunks;
        for i in 0..chunks {
            // Distance after the first live chunk, around the ring.
            if (i + chunks - first_live) % chunks >= live {
                self.region.release(self.chunk_offset(i * CHUNK_BYTES), CHUNK_BYTES as usize);
            }
        }
    }

    /// Byte offset in the region of the chunk at logical offset `pos` (chunk-aligned).
    fn chunk_offset(&self, pos: u64) -> usize {
        (HEADER_BYTES + pos % self.ring) as usize
    }
    /// Reads the header and the records, or formats the region afresh where it holds no tail
    /// of this volume.
    fn load(&mut self, owner: &TailOwner) -> Vec<Vec<u8>> {
        match self.read_existing(owner) {
            Some(records) => {
                // A tail of format 1 (adopted) is stamped with this instance.
                self.region.write(8, &VERSION.to_le_bytes());
                self.region.write(INSTANCE_AT, &owner.instance_bytes());
                records
            }
            None => {
                let len = self.region.len() as u64;
                self.format(owner, len - HEADER_BYTES - trailer_bytes(len));
                Vec::new()
            }
        }
    }

    /// Records the store's volume file in the trailer, where the region has one.
    fn write_trailer(&mut self, volume_path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let len = self.region.len() as u64;
        let path = volume_path.as_os_str().as_bytes();
        if trailer_bytes(len) == 0 || path.len() as u64 > TRAILER_BYTES - 12 {
            return;
        }
        let mut t = Vec::with_capacity(12 + path.len());
        t.extend_from_slice(TRAILER_MAGIC);
        t.extend_from_slice(&(path.len() as u32).to_le_bytes());
        t.extend_from_slice(path);
        self.region.write((HEADER_BYTES + self.ring) as usize, &t);
    }

    /// The records of this instance's tail (or of a format 1 tail of its volume), or `None`
    /// where the region holds no tail of it.
    fn read_existing(&mut self, owner: &TailOwner) -> Option<Vec<Vec<u8>>> {
        let len = self.region.len() as u64;
        if len < HEADER_BYTES {
            return None;
        }
        let h = self.region.read(0, HEADER_BYTES as usize);
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        let ring = u64::from(u32_at(12));
        let instance_ok = match u32_at(8) {
            VERSION => h[INSTANCE_AT..INSTANCE_AT + 16] == owner.instance_bytes(),
            VERSION_WITHOUT_INSTANCE => h[INSTANCE_AT..INSTANCE_AT + 16] == [0; 16],
            _ => false,
        };
        let ours = &h[..8] == MAGIC
            && instance_ok
            && ring > 0
            && HEADER_BYTES + ring + trailer_bytes(len) == len
            && h[16..32] == owner.volume_id[..]
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

    fn format(&mut self, owner: &TailOwner, ring: u64) {
        let mut h = vec![0u8; HEADER_BYTES as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(ring as u32).to_le_bytes());
        h[16..32].copy_from_slice(&owner.volume_id);
        h[INSTANCE_AT..INSTANCE_AT + 16].copy_from_slice(&owner.instance_bytes());
        self.region.write(0, &h);
        self.ring = ring;
        self.start = 0;
        self.end = 0;
    }

    /// Bytes free in the ring. A chunked ring counts from the start of `start`'s chunk: the
    /// chunk is given back whole, so nothing new may land in it meanwhile.
    pub fn room(&self) -> u64 {
        let from = if self.chunked { self.released_to } else { self.start };
        self.ring - (self.end - from)
    }

    /// Whether `bytes` more fit: room in the ring, and storage for it, taken now. `false`
    /// where the file system refuses the storage (a full `/dev/shm`).
    pub fn make_room(&mut self, bytes: u64) -> bool {
        if bytes > self.room() {
            return false;
        }
        let want = self.end + bytes;
        while self.chunked && self.reserved_to < want {
            let k = self.reserved_to;
            if k >= self.ring && self.punched_to <= k - self.ring {
                // The chunk a lap behind, in this chunk's place, was trimmed but not given
                // back yet: its storage serves again, and its punch is owed no more. (Chunks
                // are taken in order and every take settles its own place this way, so the
                // oldest owed punch is exactly that chunk.)
                debug_assert_eq!(self.punched_to, k - self.ring, "WAL tail chunks out of order");
                self.punched_to = k - self.ring + CHUNK_BYTES;
            } else if let Err(e) = self.region.reserve(self.chunk_offset(k), CHUNK_BYTES as usize) {
                if !std::mem::replace(&mut self.refused, true) {
                    log::warn!(
                        "WAL tail {}: no storage for more records ({}); writes without sync \
                         wait for their WAL pages while it lasts",
                        self.path.as_deref().unwrap_or(Path::new("(memory)")).display(),
                        shale_io::Chain(&e)
                    );
                }
                return false;
            }
            self.reserved_to += CHUNK_BYTES;
        }
        self.give_back(PUNCHES_PER_ROOM);
        true
    }

    /// Gives back the storage of up to `chunks` trimmed chunks, oldest first.
    fn give_back(&mut self, chunks: u64) {
        for _ in 0..chunks {
            if self.punched_to >= self.released_to {
                return;
            }
            self.region.release(self.chunk_offset(self.punched_to), CHUNK_BYTES as usize);
            self.punched_to += CHUNK_BYTES;
        }
    }

    /// Gives back the storage of every trimmed chunk now (where no writer waits: a flush
    /// that found the WAL free, a close).
    pub fn give_back_all(&mut self) {
        self.give_back(u64::MAX);
    }

    /// Logical offset just past the newest record.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Whether every record is trimmed.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The records stored between logical offsets `from` and `to` (record boundaries, with
    /// `from` not trimmed), oldest first, each with the logical offset just past it.
    ///
    /// # Panics
    /// If `from` is trimmed already or the range does not hold whole records.
    pub fn records_between(&self, from: u64, to: u64) -> Vec<(Vec<u8>, u64)> {
        assert!(self.start <= from && from <= to && to <= self.end, "records not held");
        let mut out = Vec::new();
        let mut pos = from;
        while pos < to {
            let head = self.read_ring(pos, RECORD_HEADER_BYTES);
            let n = u32::from_le_bytes(head[..4].try_into().unwrap()) as u64;
            let body_at = pos + RECORD_HEADER_BYTES as u64;
            assert!(body_at + n <= to, "a record crosses the end of the range");
            pos = body_at + n;
            out.push((self.read_ring(body_at, n as usize), pos));
        }
        out
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
    /// If it does not fit: the caller checks [`TailLog::make_room`].
    pub fn append(&mut self, payload: &[u8]) -> u64 {
        let footprint = TailLog::footprint(payload.len());
        assert!(footprint <= self.room(), "WAL tail overflow");
        assert!(
            !self.chunked || self.end + footprint <= self.reserved_to,
            "WAL tail record without storage: make_room first"
        );
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
        // The chunks wholly before `start` hold no record any more: `start` is stored first,
        // so a crash between the two never leaves it pointing into a hole. Their storage goes
        // back a few chunks per later `make_room` ([`PUNCHES_PER_ROOM`]).
        if self.chunked {
            self.released_to = self.released_to.max(self.start / CHUNK_BYTES * CHUNK_BYTES);
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

/// The ring a new tail gets for a request of `bytes`: whole chunks, at most what the header's
/// 32-bit size holds. A ring smaller than a chunk (the tests' small rings) is whole pages,
/// and its storage is held whole.
fn new_ring_bytes(bytes: u64) -> u64 {
    const PAGE: u64 = 4096;
    if bytes < CHUNK_BYTES {
        return bytes.max(PAGE).div_ceil(PAGE) * PAGE;
    }
    let max = u64::from(u32::MAX) / CHUNK_BYTES * CHUNK_BYTES;
    bytes.div_ceil(CHUNK_BYTES).saturating_mul(CHUNK_BYTES).min(max)
}

/// Where [`WalTail::Shm`] keeps tails.
pub const SHM_DIR: &str = "/dev/shm";

fn map_file(path: &Path, owner: &TailOwner, ring: u64) -> Result<Mapped> {
    use shale_io::PathOp;
    let failed = |op| move |e| Error::from(shale_io::Error::at_path(op, path, e));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(failed(PathOp::Open))?;
    let file = lock_tail(file, path, Mode::Exclusive)?;
    let want = HEADER_BYTES + ring + TRAILER_BYTES;
    let len = file.metadata().map_err(failed(PathOp::Stat))?.len();
    if len > 0 {
        check_ours(&file, path, &owner.volume_id)?;
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
    let map = unsafe { memmap2::MmapMut::map_mut(&*file) }.map_err(failed(PathOp::Map))?;
    Ok(Mapped(map, file))
}

/// Takes the tail's lock, or says who holds it.
fn lock_tail(file: std::fs::File, path: &Path, mode: Mode) -> Result<LockedFile> {
    LockedFile::lock(file, mode).map_err(|e| match e.raw_os_error() {
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
    (HEADER_BYTES + 8..=HEADER_BYTES + u64::from(u32::MAX) + TRAILER_BYTES).contains(&len)
}

/// What a file in a tail directory is, for `shale orphans`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailFile {
    /// The file.
    pub path: PathBuf,
    /// The volume id its header names.
    pub volume_id: [u8; 16],
    /// The instance id its header names (zero: format 1, or a store opened on a device).
    pub instance_id: [u8; 16],
    /// The store's volume file its trailer names, if it has one.
    pub volume_path: Option<PathBuf>,
    /// Bytes of records it holds (writes acknowledged without sync not yet on the device).
    pub held_bytes: u64,
    /// Whether a store holds it now (its lock is taken).
    pub in_use: bool,
}

/// Reads the header and trailer of the tail file at `path` without changing it; `None` when
/// it is not a WAL tail (no magic, too short).
///
/// # Errors
/// [`Error::Io`] naming the path when it cannot be opened or read.
pub fn describe(path: &Path) -> Result<Option<TailFile>> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;
    let failed = |op| move |e| Error::from(shale_io::Error::at_path(op, path, e));
    let file = std::fs::File::open(path).map_err(failed(shale_io::PathOp::Open))?;
    let len = file.metadata().map_err(failed(shale_io::PathOp::Stat))?.len();
    let mut h = [0u8; HEADER_BYTES as usize];
    if len < HEADER_BYTES || file.read_exact_at(&mut h, 0).is_err() || &h[..8] != MAGIC {
        return Ok(None);
    }
    let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
    let ring = u64::from(u32::from_le_bytes(h[12..16].try_into().unwrap()));
    let mut volume_path = None;
    if trailer_bytes(len) > 0 && HEADER_BYTES + ring + TRAILER_BYTES == len {
        let mut t = vec![0u8; TRAILER_BYTES as usize];
        if file.read_exact_at(&mut t, HEADER_BYTES + ring).is_ok() && &t[..8] == TRAILER_MAGIC {
            let n = u32::from_le_bytes(t[8..12].try_into().unwrap()) as usize;
            if n <= t.len() - 12 {
                volume_path = Some(PathBuf::from(std::ffi::OsStr::from_bytes(&t[12..12 + n])));
            }
        }
    }
    let in_use = lock(&file, Mode::Shared).is_err();
    if !in_use {
        // A probe: let go at once, so a store opening the tail meanwhile is not refused.
        unlock(&file);
    }
    Ok(Some(TailFile {
        path: path.to_path_buf(),
        volume_id: h[16..32].try_into().unwrap(),
        instance_id: h[INSTANCE_AT..INSTANCE_AT + 16].try_into().unwrap(),
        volume_path,
        held_bytes: u64_at(END_AT).saturating_sub(u64_at(START_AT)),
        in_use,
    }))
}

/// A tail file mapped for reading only (a read-only open of the store).
struct MappedReadOnly(memmap2::Mmap, #[allow(dead_code)] LockedFile);

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
    let file = match lock_tail(file, path, Mode::Shared) {
        Ok(locked) => locked,
        Err(e) => {
            log::warn!("{}: its records are not replayed", shale_io::Chain(&e));
            return Ok(None);
        }
    };
    // SAFETY: as in `map_file`; the tail's shared lock, held with the mapping, keeps any
    // writer from mapping it for writing meanwhile.
    let map = unsafe { memmap2::Mmap::map(&*file) }.map_err(failed(PathOp::Map))?;
    Ok(Some(MappedReadOnly(map, file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: TailOwner =
        TailOwner { volume_id: *b"0123456789abcdef", instance_id: Some(*b"instance-0000001") };
    const OTHER_VOLUME: TailOwner = TailOwner { volume_id: *b"fedcba9876543210", ..ID };
    const COPY: TailOwner = TailOwner { instance_id: Some(*b"instance-0000002"), ..ID };

    #[test]
    fn a_copy_of_the_store_neither_reads_nor_removes_the_originals_tail() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let (mut t, _) = open(&spec);
        put(&mut t, b"acknowledged without sync");
        drop(t); // the original crashes
        let original = tail_path(dir.path(), &ID);
        let before = std::fs::read(&original).unwrap();
        // The copy (another instance of the same volume) finds nothing of it, reading or
        // opening read-write, and the original's tail stays as it was.
        assert!(TailLog::read_records(&spec, &COPY).unwrap().is_empty());
        let (copy, got) = TailLog::open(&spec, &COPY, None, 1 << 20).unwrap().unwrap();
        assert!(got.is_empty(), "the copy replayed the original's tail");
        copy.remove_file();
        assert_eq!(std::fs::read(&original).unwrap(), before);
        // The original, reopened (a rename keeps its instance), gets its record back.
        let (_, got) = open(&spec);
        assert_eq!(got, vec![b"acknowledged without sync".to_vec()]);
    }

    #[test]
    fn describe_names_the_store_and_whether_it_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let store = Path::new("/stores/a/volume.shale");
        let (mut t, _) = TailLog::open(&spec, &ID, Some(store), 1 << 20).unwrap().unwrap();
        put(&mut t, b"record");
        let path = tail_path(dir.path(), &ID);
        let d = describe(&path).unwrap().unwrap();
        assert_eq!(d.volume_id, ID.volume_id);
        assert_eq!(d.instance_id, ID.instance_bytes());
        assert_eq!(d.volume_path.as_deref(), Some(store));
        assert_eq!(d.held_bytes, TailLog::footprint(6));
        assert!(d.in_use, "the open tail's lock was not seen");
        drop(t);
        assert!(!describe(&path).unwrap().unwrap().in_use);
        // The records are still read back with the trailer in place.
        let (_, got) = TailLog::open(&spec, &ID, Some(store), 1 << 20).unwrap().unwrap();
        assert_eq!(got, vec![b"record".to_vec()]);
        let other = dir.path().join("not-a-tail");
        std::fs::write(&other, b"hello").unwrap();
        assert_eq!(describe(&other).unwrap(), None);
    }

    #[test]
    fn a_tail_of_format_1_is_adopted_by_its_volume() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let (mut t, _) = open(&spec);
        put(&mut t, b"old record");
        drop(t);
        // Make it what a shale before instance ids left: format 1, no instance, old name.
        let path = tail_path(dir.path(), &ID);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&VERSION_WITHOUT_INSTANCE.to_le_bytes());
        bytes[INSTANCE_AT..INSTANCE_AT + 16].fill(0);
        std::fs::remove_file(&path).unwrap();
        let legacy = legacy_tail_path(dir.path(), &ID.volume_id);
        std::fs::write(&legacy, &bytes).unwrap();
        assert_eq!(TailLog::read_records(&spec, &ID).unwrap(), vec![b"old record".to_vec()]);
        let (_, got) = open(&spec);
        assert_eq!(got, vec![b"old record".to_vec()]);
        assert!(!legacy.exists() && path.exists(), "not adopted under the new name");
        let stamped = std::fs::read(&path).unwrap();
        assert_eq!(stamped[8..12], VERSION.to_le_bytes());
        assert_eq!(stamped[INSTANCE_AT..INSTANCE_AT + 16], ID.instance_bytes());
    }

    fn open(spec: &WalTail) -> (TailLog, Vec<Vec<u8>>) {
        TailLog::open(spec, &ID, None, u64::from(DEFAULT_RING_BYTES)).unwrap().unwrap()
    }

    /// Appends after taking room, as the writer does.
    fn put(t: &mut TailLog, payload: &[u8]) -> u64 {
        assert!(t.make_room(TailLog::footprint(payload.len())));
        t.append(payload)
    }

    #[test]
    fn records_survive_a_crash_copy_and_wrap_around_the_ring() {
        let mem = MemoryTail::new();
        let (mut t, got) = open(&WalTail::Memory(mem.clone()));
        assert!(got.is_empty());
        let ring = t.ring_bytes();
        // Fill and trim so that later records wrap around the ring's end.
        let big = vec![7u8; (ring / 3) as usize];
        let after_first = put(&mut t, &big);
        put(&mut t, &big);
        t.trim_to(after_first);
        let recs: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 1000 + i as usize]).collect();
        let end_of_big = t.end;
        t.trim_to(end_of_big);
        for r in &recs {
            put(&mut t, r);
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
        let a = put(&mut t, b"first");
        put(&mut t, b"second");
        t.trim_to(a);
        // The writer is gone (a crash): a read-only open of the store reads what it left. (A
        // read beside this volume's own writer cannot happen: the store lock keeps them
        // apart; beside a copy's writer the tail is skipped, see the test below.)
        drop(t);
        let file = tail_path(dir.path(), &ID);
        let before = std::fs::read(&file).unwrap();
        assert_eq!(TailLog::read_records(&spec, &ID).unwrap(), vec![b"second".to_vec()]);
        // Another volume's tail is neither replayed nor formatted over.
        let other = OTHER_VOLUME;
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
        let a = put(&mut t, b"first");
        put(&mut t, b"second");
        t.trim_to(a);
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, vec![b"second".to_vec()]);
        let other = TailLog::open(&WalTail::Memory(mem.crash_copy()), &OTHER_VOLUME, None, 1 << 20)
            .unwrap()
            .unwrap();
        assert!(other.1.is_empty(), "another volume's tail must not be replayed");
    }

    #[test]
    fn a_record_half_stored_is_not_replayed() {
        let mem = MemoryTail::new();
        let (mut t, _) = open(&WalTail::Memory(mem.clone()));
        put(&mut t, b"whole");
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
        put(&mut t, b"one");
        let second = t.end;
        put(&mut t, b"two");
        put(&mut t, b"three");
        t.write_ring(second + RECORD_HEADER_BYTES as u64, b"X");
        let (_, got) = open(&WalTail::Memory(mem.crash_copy()));
        assert_eq!(got, vec![b"one".to_vec()]);
    }

    #[test]
    fn storage_follows_the_records_not_the_ring() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let (mut t, _) = TailLog::open(&spec, &ID, None, 16 * CHUNK_BYTES).unwrap().unwrap();
        assert_eq!(t.ring_bytes(), 16 * CHUNK_BYTES);
        let path = tail_path(dir.path(), &ID);
        let held = || std::fs::metadata(&path).unwrap().blocks() * 512;
        // Chunks lie 64 bytes (the header) past page boundaries, so a punched chunk keeps
        // the pages it shares with its neighbours: at most one page per chunk, and the header.
        let slack = 17 * 4096;
        assert!(held() < CHUNK_BYTES, "a new tail holds a whole ring: {}", held());
        let rec = vec![5u8; 60 << 10];
        let mut ends = Vec::new();
        while ends.len() < (6 * CHUNK_BYTES / rec.len() as u64) as usize {
            ends.push(put(&mut t, &rec));
        }
        assert!(held() >= 5 * CHUNK_BYTES, "records without storage: {}", held());
        // Keep the last few records: the chunks before theirs go back, not at the trim (a
        // flush's commit, under the WAL lock) but two per later `make_room`, or all at once
        // where nobody waits.
        let keep_from = ends[ends.len() - 4];
        let before_trim = held();
        t.trim_to(keep_from);
        assert_eq!(held(), before_trim, "the trim gave back storage itself");
        assert!(t.make_room(1));
        let given = before_trim - held();
        assert!(
            given >= PUNCHES_PER_ROOM * CHUNK_BYTES - slack && given <= PUNCHES_PER_ROOM * CHUNK_BYTES,
            "make_room gave back {given} bytes, not {PUNCHES_PER_ROOM} chunks"
        );
        t.give_back_all();
        assert!(held() <= 2 * CHUNK_BYTES + slack, "trimmed chunks kept: {}", held());
        // Around the ring several times, records kept across the wrap: storage stays bounded
        // (each round trims under a chunk, and the next put gives back up to two) and the
        // kept records read back after a crash.
        for round in 0..(3 * 16 * CHUNK_BYTES / rec.len() as u64) {
            let end = put(&mut t, &vec![round as u8; rec.len()]);
            t.trim_to(end.saturating_sub(3 * rec.len() as u64 + 3 * RECORD_HEADER_BYTES as u64));
            assert!(held() <= 3 * CHUNK_BYTES + slack, "round {round}: {}", held());
        }
        let (newest, newest_end) = (t.records_between(keep_from.max(t.start), t.end()), t.end());
        drop(t);
        let (t, got) = TailLog::open(&spec, &ID, None, 16 * CHUNK_BYTES).unwrap().unwrap();
        assert_eq!(got, newest.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
        assert_eq!(newest.last().unwrap().1, newest_end);
        assert!(held() <= 2 * CHUNK_BYTES + slack, "reopened: {}", held());
        drop(t);
    }

    #[test]
    fn a_chunk_whose_give_back_is_owed_serves_again_a_lap_later() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        let (mut t, _) = TailLog::open(&spec, &ID, None, 4 * CHUNK_BYTES).unwrap().unwrap();
        let path = tail_path(dir.path(), &ID);
        let held = || std::fs::metadata(&path).unwrap().blocks() * 512;
        // Fill the whole ring, then trim every record: four chunks owed.
        // Each record takes half a chunk exactly, with its header.
        let rec = vec![3u8; (CHUNK_BYTES / 2) as usize - RECORD_HEADER_BYTES];
        let mut end = 0;
        while t.make_room(TailLog::footprint(rec.len())) {
            end = t.append(&rec);
        }
        assert_eq!(end, 4 * CHUNK_BYTES);
        t.trim_to(end);
        let owed = held();
        assert!(owed >= 3 * CHUNK_BYTES, "the filled ring holds {owed} bytes");
        // The next record lands in the first chunk's place a lap later: that chunk's storage
        // serves again (its punch is no longer owed), and two more owed chunks go back.
        let kept = put(&mut t, b"a lap later");
        assert!(
            held() + 2 * CHUNK_BYTES >= owed && held() < owed,
            "{owed} bytes held before, {} after",
            held()
        );
        t.give_back_all();
        // The reused chunk holds the record and was not given back under it.
        drop(t);
        let (_, got) = TailLog::open(&spec, &ID, None, 4 * CHUNK_BYTES).unwrap().unwrap();
        assert_eq!(got, vec![b"a lap later".to_vec()]);
        assert!(kept > 4 * CHUNK_BYTES);
    }

    #[test]
    fn a_ring_without_room_refuses_and_trimming_makes_room() {
        let mem = MemoryTail::new();
        let (mut t, _) = TailLog::open(&WalTail::Memory(mem), &ID, None, 64 << 10).unwrap().unwrap();
        let rec = vec![1u8; 10_000];
        let mut ends = Vec::new();
        while t.make_room(TailLog::footprint(rec.len())) {
            ends.push(t.append(&rec));
        }
        assert_eq!(ends.len(), 6, "64 KiB holds six records of 10 KB");
        t.trim_to(ends[0]);
        assert!(t.make_room(TailLog::footprint(rec.len())));
        let from = ends[2];
        let got = t.records_between(from, ends[5]);
        assert_eq!(got.iter().map(|(_, e)| *e).collect::<Vec<_>>(), ends[3..6].to_vec());
        assert!(got.iter().all(|(r, _)| *r == rec));
    }

    #[test]
    fn a_file_tail_is_read_back_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let spec = WalTail::Dir(dir.path().to_path_buf());
        {
            let (mut t, _) = open(&spec);
            put(&mut t, b"kept by the kernel");
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
        put(&mut first, b"the first copy's record");
        match TailLog::open(&spec, &ID, None, 1 << 20) {
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
            match TailLog::open(&spec, &ID, None, 1 << 20) {
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
