//! A volume: one device's space as shale lays it out (LDS).
//!
//! Opening runs these stages, in order:
//! 1. Read both header copies and classify the device: a volume, blank, foreign, newer or
//!    damaged. Only a blank device is written to.
//! 2. Create (blank only): write the first base and the anchors, then header A, then header B,
//!    each durable before the next. The header goes last so that a crash during creation
//!    leaves a device that still reads as blank (or as an interrupted creation, which is
//!    redone), never a header that names a missing version log.
//! 3. Recover: walk the version log (see `version_log`), then rebuild the slot map from the
//!    live extents of the committed version.
//!
//! A commit runs these stages, in order, under the volume's lock:
//! 1. Check the edit against the slot map (added extents pending, removed ones live).
//! 2. Append it as a delta, or, when the chain would pass half the ring, as a new base holding
//!    the complete state (a trim); either way durable in both mirrors before returning.
//! 3. Only then move added extents to live and removed ones to free, so a freed slot is never
//!    rewritten while a crash could still bring back a version that uses it.
//!
//! A failed version-log write stops the volume: later commits answer `Stopped` until it is
//! reopened, because what reached the media after a failed write cannot be known (P5).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use shale_io::{AlignedBuf, DeviceRef, QueueExt, QueueOptions};

use crate::allocator::{Allocator, SlotUsage};
use crate::counters::{ClassSnapshot, IoClass, IoCounters, VolumeQueue};
use crate::error::{Error, Result};
use crate::header::{FORMAT_VERSION, Header, HeaderCopy};
use crate::layout::{AREA_ALIGN, HEADER_AREA_BYTES, Layout, LayoutOptions};
use crate::version_log::{LogState, VersionLog, Versions};
use crate::version_record::{BaseRecord, DeltaRecord, Extent};

/// How to open a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeOptions {
    /// Layout of a volume created on a blank device.
    pub layout: LayoutOptions,
    /// Whether a blank device may be made into a new volume.
    pub create_if_blank: bool,
    /// When a growable device runs out of slots, grow it by at least this many.
    pub grow_slots_min: u32,
    /// Slots a new volume file is pre-allocated with ([`Volume::open_path`] on a directory).
    pub initial_slots: u32,
}

impl Default for VolumeOptions {
    fn default() -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions::default(),
            create_if_blank: true,
            grow_slots_min: 64,
            initial_slots: 64,
        }
    }
}

impl VolumeOptions {
    /// A layout of a few MiB (64 KiB slots, 256 KiB version log mirrors, 1 MiB WAL area):
    /// for examples and tests, not for data.
    pub fn small_for_tests() -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions {
                slot_bytes: 64 << 10,
                version_log_bytes: 256 << 10,
                wal_bytes: 1 << 20,
            },
            grow_slots_min: 16,
            initial_slots: 16,
            ..VolumeOptions::default()
        }
    }
}

/// One atomic change to the committed version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edit {
    /// Extents no longer live after the commit (freed once it is durable).
    pub removed: Vec<Extent>,
    /// Extents allocated from this volume, written and durable, live after the commit.
    pub added: Vec<Extent>,
    /// The engine's description of the change, returned by recovery in commit order.
    pub engine: Vec<u8>,
    /// Keep the removed extents allocated after the commit (not live, not free) until the
    /// engine gives each back with [`Volume::release`]: readers may still be using the SSTs
    /// in them. A crash frees them, as they are not in the committed version.
    pub hold_removed: bool,
}

/// How a commit was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitKind {
    /// As a delta on the current base.
    Delta,
    /// As a new base (the version log was trimmed).
    Base,
}

/// What the open found: the committed versions for the engine to replay.
#[derive(Debug)]
pub struct Opened {
    /// The volume.
    pub volume: Volume,
    /// The newest base and its deltas (the base's engine bytes are the engine's last full
    /// state; after a trim the deltas list is empty).
    pub versions: Versions,
    /// Whether the volume was created by this open.
    pub created: bool,
}

struct Inner {
    log: VersionLog,
    slots: Allocator,
    stopped: Option<String>,
}

/// An open volume. Cheap to share behind an `Arc`; commits and allocations serialise on one
/// lock, data I/O goes through queues from [`Volume::queue`] without it.
pub struct Volume {
    device: DeviceRef,
    header: Header,
    /// Opened by [`Volume::open_read_only`]: allocations and commits are refused.
    read_only: bool,
    counters: Arc<IoCounters>,
    grow_slots_min: u32,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volume")
            .field("device", &self.device)
            .field("header", &self.header)
            .finish()
    }
}

/// Queue depth of the volume's own version-log queue: two mirror writes in flight.
const VERSION_LOG_QUEUE_DEPTH: u32 = 2;

impl Volume {
    /// Opens the volume on `device`, creating one if the device is blank and the options
    /// allow it.
    ///
    /// # Errors
    /// [`Error::Foreign`] for a device holding something else, [`Error::NewerFormat`] for a
    /// volume of a newer shale, [`Error::Corruption`] for a damaged header or version log,
    /// [`Error::InvalidArgument`] for bad options or a device too small for the layout,
    /// [`Error::Io`] for device errors. Nothing is written to the device in any error case
    /// except a failed creation of a blank device.
    pub fn open(device: DeviceRef, opts: &VolumeOptions) -> Result<Opened> {
        Self::open_as(device, opts, false)
    }

    /// Opens the volume on `device` without writing to it: a blank device is refused rather
    /// than created on, recovery only reads (as it always does), and [`Volume::allocate`] and
    /// [`Volume::commit`] answer [`Error::ReadOnly`]. Open the device read-only too
    /// ([`Volume::open_path_read_only`] does), so a stray write fails in the OS as well.
    ///
    /// # Errors
    /// As [`Volume::open`]; [`Error::Foreign`] for a blank device.
    pub fn open_read_only(device: DeviceRef, opts: &VolumeOptions) -> Result<Opened> {
        Self::open_as(device, opts, true)
    }

    fn open_as(device: DeviceRef, opts: &VolumeOptions, read_only: bool) -> Result<Opened> {
        let info = device.info();
        if info.capacity < HEADER_AREA_BYTES {
            return Err(Error::InvalidArgument(format!(
                "device of {} bytes (whole {}-byte blocks) is smaller than a volume header \
                 ({HEADER_AREA_BYTES} bytes)",
                info.capacity, info.block_size
            )));
        }
        let counters = Arc::new(IoCounters::default());
        let mut q = Self::raw_queue(&device, IoClass::Header, 0..HEADER_AREA_BYTES, &counters)?;
        let area = q.read_at(0, HEADER_AREA_BYTES as usize)?;
        let half = AREA_ALIGN as usize;
        let copies = [Header::decode(&area[..half]), Header::decode(&area[half..])];
        let header = match copies {
            [HeaderCopy::Valid(h), _] | [_, HeaderCopy::Valid(h)] => h,
            [HeaderCopy::Newer(found), _] | [_, HeaderCopy::Newer(found)] => {
                return Err(Error::NewerFormat { found, supported: FORMAT_VERSION });
            }
            // Both blank, or one torn by a crash during creation while the other was still
            // blank: a finished volume always has two valid copies, so either way no volume
            // was ever completed here.
            [HeaderCopy::Blank | HeaderCopy::Damaged, HeaderCopy::Blank]
            | [HeaderCopy::Blank, HeaderCopy::Damaged] => {
                if read_only {
                    return Err(Error::Foreign {
                        why: "the device is blank (a read-only open creates nothing)".into(),
                    });
                }
                if !opts.create_if_blank {
                    return Err(Error::Foreign {
                        why: "the device is blank and creating a volume was not allowed".into(),
                    });
                }
                return Self::create(device, opts, counters);
            }
            [HeaderCopy::Damaged, HeaderCopy::Damaged] => {
                return Err(Error::corruption("format header, both copies", 0));
            }
            _ => {
                return Err(Error::Foreign {
                    why:
                        "its first 8 KiB hold data that is not a shale header; nothing was written"
                            .into(),
                });
            }
        };
        Self::recover(device, header, opts, counters, read_only)
    }

    fn raw_queue(
        device: &DeviceRef,
        class: IoClass,
        area: std::ops::Range<u64>,
        counters: &Arc<IoCounters>,
    ) -> Result<VolumeQueue> {
        let opts = QueueOptions { depth: VERSION_LOG_QUEUE_DEPTH, ..QueueOptions::default() };
        let inner = device.open_queue(&opts)?;
        Ok(VolumeQueue::new(inner, class, area, counters.clone()))
    }

    fn create(
        device: DeviceRef,
        opts: &VolumeOptions,
        counters: Arc<IoCounters>,
    ) -> Result<Opened> {
        opts.layout.validate()?;
        let info = device.info();
        let layout = Layout::new(&opts.layout, info.block_size);
        if layout.slot_count(info.capacity) == 0 {
            return Err(Error::InvalidArgument(format!(
                "device of {} bytes has no room for a slot after the {}-byte header, version log \
                 and WAL areas",
                info.capacity, layout.slot_offset
            )));
        }
        let header = Header {
            format_version: FORMAT_VERSION,
            volume_id: new_volume_id(),
            layout,
            created_unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        let log_area = layout.version_log_offset..layout.wal_offset;
        let log_queue = Self::raw_queue(&device, IoClass::VersionLog, log_area, &counters)?;
        let log = VersionLog::create(
            layout,
            Box::new(log_queue),
            device.clone(),
            &BaseRecord::default(),
        )?;
        let mut q = Self::raw_queue(&device, IoClass::Header, 0..HEADER_AREA_BYTES, &counters)?;
        let bytes = header.encode();
        for copy in 0..2u64 {
            let buf = AlignedBuf::padded_copy(&bytes, layout.sector_bytes as usize);
            q.write_at(copy * AREA_ALIGN, buf, true)?;
        }
        let slots = Allocator::rebuild(layout.slot_count(info.capacity), &[])
            .map_err(|e| Error::corruption(e, layout.slot_offset))?;
        log::info!(
            "created volume {} on a {} device of {} bytes: {} slots of {} bytes",
            hex(&header.volume_id),
            info.backend,
            info.capacity,
            slots.usage().total,
            layout.slot_bytes
        );
        let volume = Volume::assemble(device, header, counters, opts, log, slots, false);
        Ok(Opened { volume, versions: Versions::default(), created: true })
    }

    fn recover(
        device: DeviceRef,
        header: Header,
        opts: &VolumeOptions,
        counters: Arc<IoCounters>,
        read_only: bool,
    ) -> Result<Opened> {
        let layout = header.layout;
        let info = device.info();
        if info.block_size > layout.sector_bytes {
            return Err(Error::InvalidArgument(format!(
                "volume made with {}-byte sectors is on a device of {}-byte blocks",
                layout.sector_bytes, info.block_size
            )));
        }
        if info.capacity < layout.slot_offset {
            return Err(Error::corruption(
                format!("device of {} bytes is shorter than the volume's layout", info.capacity),
                0,
            ));
        }
        let started = std::time::Instant::now();
        let log_area = layout.version_log_offset..layout.wal_offset;
        let log_queue = Self::raw_queue(&device, IoClass::VersionLog, log_area, &counters)?;
        let (log, versions) = VersionLog::recover(layout, Box::new(log_queue), device.clone())?;
        let live = replay_extents(&versions, layout.slot_offset)?;
        let slots = Allocator::rebuild(layout.slot_count(info.capacity), &live).map_err(|e| {
            Error::corruption(format!("committed version: {e}"), layout.slot_offset)
        })?;
        let s = log.state();
        log::info!(
            "opened volume {}: base SN {} + {} deltas, {} repaired copies, {} live slots, \
             recovery {:?}",
            hex(&header.volume_id),
            s.base_sn,
            s.deltas,
            s.repaired,
            slots.usage().live,
            started.elapsed()
        );
        let volume = Volume::assemble(device, header, counters, opts, log, slots, read_only);
        Ok(Opened { volume, versions, created: false })
    }

    fn assemble(
        device: DeviceRef,
        header: Header,
        counters: Arc<IoCounters>,
        opts: &VolumeOptions,
        log: VersionLog,
        slots: Allocator,
        read_only: bool,
    ) -> Volume {
        Volume {
            device,
            header,
            read_only,
            counters,
            grow_slots_min: opts.grow_slots_min.max(1),
            inner: Mutex::new(Inner { log, slots, stopped: None }),
        }
    }

    /// Gives back the storage of every free run (slots freed before a crash cut in after
    /// their commit, and volumes of versions that kept free slots allocated) and of the
    /// version log's ring outside its live chain. The engine calls
    /// it once its recovery is done; recovery itself writes nothing.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] on a read-only volume; the device's error for a release, after
    /// which the volume is stopped (as for a failed release in [`Volume::release`]).
    pub fn release_free_storage(&self) -> Result<()> {
        self.refuse_if_read_only("giving back free slots")?;
        // Under the lock, so that no slot is allocated and written while its run is released.
        let mut inner = self.inner.lock();
        if let Err(err) = inner.log.release_dead() {
            if inner.stopped.is_none() {
                inner.stopped = Some(format!("giving back version log storage: {err}"));
            }
            return Err(err);
        }
        for e in inner.slots.free_extents() {
            let r = self.extent_range(e);
            if let Err(err) = self.device.release_range(r.start, r.end - r.start) {
                if inner.stopped.is_none() {
                    inner.stopped = Some(format!("giving back the storage of free slots: {err}"));
                }
                return Err(err.into());
            }
        }
        Ok(())
    }

    /// Whether the volume was opened read-only ([`Volume::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn refuse_if_read_only(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(format!("{what} refused")));
        }
        Ok(())
    }

    /// The volume's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where the areas lie.
    pub fn layout(&self) -> Layout {
        self.header.layout
    }

    /// The device under the volume.
    pub fn device(&self) -> &DeviceRef {
        &self.device
    }

    /// Byte range of an extent on the device.
    pub fn extent_range(&self, e: Extent) -> std::ops::Range<u64> {
        let l = self.layout();
        let start = l.slot_to_offset(e.first);
        start..start + u64::from(e.count) * l.slot_bytes
    }

    /// Opens a queue for data I/O of one class (WAL pages or slots), confined to its area and
    /// counted.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the header and version-log classes, which only the
    /// volume itself writes; otherwise the device's error.
    pub fn queue(&self, class: IoClass, opts: &QueueOptions) -> Result<VolumeQueue> {
        let l = self.layout();
        let area = match class {
            IoClass::Wal => l.wal_offset..l.wal_offset + l.wal_bytes,
            IoClass::Slot => l.slot_offset..u64::MAX,
            IoClass::Header | IoClass::VersionLog => {
                return Err(Error::InvalidArgument(format!(
                    "{} I/O belongs to the volume itself",
                    class.name()
                )));
            }
        };
        let inner = self.device.open_queue(opts)?;
        Ok(VolumeQueue::new(inner, class, area, self.counters.clone()))
    }

    /// Allocates `slots` contiguous slots for an SST about to be written. The extent stays
    /// pending until a commit adds it or [`Volume::release`] gives it back; a crash forgets it.
    ///
    /// # Errors
    /// [`Error::NoSpace`] when no free run is long enough after a full pass and the device
    /// cannot grow; [`Error::InvalidArgument`] for zero slots.
    pub fn allocate(&self, slots: u32) -> Result<Extent> {
        self.refuse_if_read_only("allocation")?;
        if slots == 0 {
            return Err(Error::InvalidArgument("allocation of zero slots".into()));
        }
        let e = self.allocate_slots(slots)?;
        // The slots of a released extent are holes in a volume file (`release`): give them
        // storage before the SST is written, so a full file system is a typed error here
        // rather than a failed write-back later.
        let r = self.extent_range(e);
        if let Err(err) = self.device.allocate_range(r.start, r.end - r.start) {
            self.inner.lock().slots.release(e);
            return Err(match err {
                shale_io::Error::Io { source, .. }
                    if source.raw_os_error() == Some(libc::ENOSPC) =>
                {
                    Error::NoSpace(format!("no storage for {slots} slots at {}: {source}", r.start))
                }
                other => other.into(),
            });
        }
        Ok(e)
    }

    /// The allocator's part of [`Volume::allocate`]: a free run, growing the device if needed.
    fn allocate_slots(&self, slots: u32) -> Result<Extent> {
        let mut inner = self.inner.lock();
        if let Some(e) = inner.slots.allocate(slots) {
            return Ok(e);
        }
        let info = self.device.info();
        if !info.growable {
            let u = inner.slots.usage();
            return Err(Error::NoSpace(format!(
                "no run of {slots} free slots ({} free in {} runs, longest {})",
                u.free, u.free_runs, u.largest_free_run
            )));
        }
        let l = self.layout();
        let total = inner.slots.usage().total;
        let grown = total.saturating_add(slots.max(self.grow_slots_min).max(total / 4));
        self.device.grow(l.capacity_for(grown))?;
        let now = l.slot_count(self.device.info().capacity);
        log::info!("grew the volume from {total} to {now} slots");
        inner.slots.grow(now);
        inner.slots.allocate(slots).ok_or_else(|| {
            Error::NoSpace(format!("no run of {slots} free slots after growing to {now}"))
        })
    }

    /// Gives back an extent from [`Volume::allocate`] that will not be committed, or one held
    /// after a commit removed it ([`Edit::hold_removed`]) once nothing reads it any more.
    ///
    /// # Panics
    /// If the extent is not pending (a bug in the caller).
    pub fn release(&self, e: Extent) {
        // Free slots take no disk space: a volume file gives their storage back (a hole, as
        // deleting an SST file would), a block device keeps it. The hole is made while the
        // extent is still the caller's, before the allocator frees it: after that another
        // thread may allocate the slots and write an SST there, which a late release would
        // zero. Nothing reads the extent any more, and a crash cannot bring it back to life:
        // it is released only after the commit that dropped it is durable, or it was never
        // committed. A failed release loses nothing, but the device failed an operation: the
        // volume stops as for a failed write (P5), and the next commit says why.
        let r = self.extent_range(e);
        let given_back = self.device.release_range(r.start, r.end - r.start);
        let mut inner = self.inner.lock();
        inner.slots.release(e);
        if let Err(err) = given_back {
            log::error!("could not give back the storage of free slots {e:?}: {err}");
            if inner.stopped.is_none() {
                inner.stopped = Some(format!("giving back the storage of free slots: {err}"));
            }
        }
    }

    /// Gives back the storage behind device bytes `range` of a pending extent whose slots stay
    /// allocated: bytes its writer will never write and nothing will read (the zero padding
    /// between an SST's last block and its footer). In a volume file they become a hole and
    /// read as zeros; a block device keeps them as they are.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a range outside the extent or not aligned to the
    /// device's blocks; the device's error for the release.
    pub fn release_within(&self, e: Extent, range: std::ops::Range<u64>) -> Result<()> {
        let whole = self.extent_range(e);
        if range.start < whole.start || range.end > whole.end || range.start > range.end {
            return Err(Error::InvalidArgument(format!(
                "bytes {range:?} are not inside extent {e:?} ({whole:?})"
            )));
        }
        if range.is_empty() {
            return Ok(());
        }
        Ok(self.device.release_range(range.start, range.end - range.start)?)
    }

    /// Gives back the slots of a pending extent from [`Volume::allocate`] past its first
    /// `slots`, and returns the extent of those it keeps (still pending). An SST streamed into
    /// an extent reserved for the largest size it could reach gives back what it did not use.
    ///
    /// # Panics
    /// If the extent is not pending, or `slots` is not in `1..=e.count` (bugs in the caller).
    pub fn shrink(&self, e: Extent, slots: u32) -> Extent {
        assert!((1..=e.count).contains(&slots), "shrink of {e:?} to {slots} slots");
        if slots == e.count {
            return e;
        }
        // As in `release`: the hole is made while the tail is still the caller's.
        let tail = self.extent_range(Extent { first: e.first + slots, count: e.count - slots });
        let given_back = self.device.release_range(tail.start, tail.end - tail.start);
        let mut inner = self.inner.lock();
        let kept = inner.slots.shrink(e, slots);
        if let Err(err) = given_back {
            log::error!("could not give back the storage of free slots {tail:?}: {err}");
            if inner.stopped.is_none() {
                inner.stopped = Some(format!("giving back the storage of free slots: {err}"));
            }
        }
        kept
    }

    /// Commits an edit durably, as a delta or, when the version log needs room, as a new base
    /// whose engine bytes come from `engine_state` (the engine's complete state *after* this
    /// edit). Removed extents are freed only once the commit is durable.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an edit that names extents wrongly (nothing written);
    /// [`Error::Stopped`] after an earlier failed write; [`Error::Io`] / [`Error::NoSpace`]
    /// when the write fails, after which the volume is stopped.
    pub fn commit(
        &self,
        edit: &Edit,
        engine_state: &mut dyn FnMut() -> Vec<u8>,
    ) -> Result<CommitKind> {
        self.refuse_if_read_only("commit")?;
        let mut inner = self.inner.lock();
        if let Some(why) = &inner.stopped {
            return Err(Error::Stopped(why.clone()));
        }
        inner.slots.validate_edit(&edit.removed, &edit.added).map_err(Error::InvalidArgument)?;
        let delta = DeltaRecord {
            removed: edit.removed.clone(),
            added: edit.added.clone(),
            engine: edit.engine.clone(),
        };
        let delta_len = delta.encode().len();
        // Refusals before anything is written (no room in the ring, no storage for it)
        // leave the volume usable.
        let written = if inner.log.delta_fits(delta_len) {
            inner.log.hold_room(delta_len)?;
            inner.log.append_delta(&delta).map(|()| CommitKind::Delta)
        } else {
            let mut after = inner.slots.clone();
            after.apply_edit(&edit.removed, &edit.added);
            let base = BaseRecord { extents: after.live_extents(), engine: engine_state() };
            let base_len = base.encode().len();
            inner.log.check_base_fits(base_len)?;
            inner.log.hold_room(base_len)?;
            inner.log.append_base(&base).map(|()| CommitKind::Base)
        };
        match written {
            Ok(kind) => {
                inner.slots.apply_edit(&edit.removed, &edit.added);
                if edit.hold_removed {
                    inner.slots.hold(&edit.removed);
                }
                // The trim moved both anchors to the new base: the ring before it is dead.
                // The commit is durable whatever happens here; a failed release loses
                // nothing, but the device failed an operation, so the volume stops (P5) as
                // for a failed release of slots.
                if kind == CommitKind::Base {
                    if let Err(err) = inner.log.release_dead() {
                        log::error!("could not give back version log storage: {err}");
                        inner.stopped = Some(format!("giving back version log storage: {err}"));
                    }
                }
                Ok(kind)
            }
            Err(e) => {
                inner.stopped = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Whether an earlier failure stopped the volume, and why.
    pub fn stopped(&self) -> Option<String> {
        self.inner.lock().stopped.clone()
    }

    /// The version log's state.
    pub fn log_state(&self) -> LogState {
        self.inner.lock().log.state().clone()
    }

    /// Bytes of each version log mirror that may hold storage: the chunks of the ring the
    /// live chain touches, plus, after a reopen and before [`Volume::release_free_storage`],
    /// every chunk (what an earlier writer left is not known).
    pub fn version_log_held_bytes(&self) -> u64 {
        self.inner.lock().log.held_bytes()
    }

    /// Slot counts.
    pub fn slot_usage(&self) -> SlotUsage {
        self.inner.lock().slots.usage()
    }

    /// The extents of the committed version.
    pub fn live_extents(&self) -> Vec<Extent> {
        self.inner.lock().slots.live_extents()
    }

    /// I/O counters of one class.
    pub fn io(&self, class: IoClass) -> ClassSnapshot {
        self.counters.snapshot(class)
    }

    /// Checks the slot map's invariants: every slot free, live or pending exactly once.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the first violation.
    pub fn check_slots(&self) -> Result<()> {
        let l = self.layout();
        self.inner.lock().slots.check().map_err(|e| Error::corruption(e, l.slot_offset))
    }
}

/// The live extents after replaying the deltas on the base.
fn replay_extents(v: &Versions, slot_offset: u64) -> Result<Vec<Extent>> {
    let mut live: std::collections::BTreeSet<Extent> = v.base.extents.iter().copied().collect();
    for (i, d) in v.deltas.iter().enumerate() {
        for e in &d.removed {
            if !live.remove(e) {
                return Err(Error::corruption(
                    format!("delta {} removes extent {e:?}, which is not live", i + 1),
                    slot_offset,
                ));
            }
        }
        for e in &d.added {
            if !live.insert(*e) {
                return Err(Error::corruption(
                    format!("delta {} adds extent {e:?} twice", i + 1),
                    slot_offset,
                ));
            }
        }
    }
    Ok(live.into_iter().collect())
}

fn new_volume_id() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    // Not cryptographic: the id only has to tell volumes apart in logs and tools. Each
    // RandomState is seeded from the operating system's randomness.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut id = [0u8; 16];
    for half in id.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    id
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
