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
//!
//! A tiered store ([`Volume::open_tiered`]) is one `Volume` over two devices: the fast one
//! holds the version log, the WAL area and slots, the capacity one slots only (`tier`'s
//! module comment). Creation writes the fast volume whole (naming the capacity volume's id in
//! its header), then the capacity volume's header (naming the fast one's): a crash between
//! leaves a fast volume whose capacity volume is still blank, and since its committed version
//! then holds no capacity extent, the next open finishes the creation. Any other mismatch (no
//! capacity volume given, a blank one where extents live, another store's, the two swapped)
//! is refused with [`Error::Tiers`] before anything is written.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use shale_io::{AlignedBuf, DeviceRef, QueueExt, QueueOptions};

use crate::allocator::{Allocator, SlotUsage};
use crate::counters::{ClassSnapshot, IoClass, IoCounters, VolumeQueue};
use crate::engine_kind::EngineKind;
use crate::error::{Error, Result};
use crate::header::{FORMAT_VERSION, Header, HeaderCopy};
use crate::layout::{AREA_ALIGN, HEADER_AREA_BYTES, Layout, LayoutOptions, VERSION_LOG_BYTES_MIN};
use crate::queues::{QueueSource, Queues, TierSource};
use crate::tier::{Role, Tier};
use crate::version_log::{LogState, Repair, VersionLog, Versions};
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
    /// The engine opening the volume: a new volume is created as its store, and a volume
    /// whose header names another engine is refused with [`Error::OtherEngine`] before
    /// anything is written. `None` opens a volume of any engine (tools that inspect) and
    /// creates none.
    pub engine: Option<EngineKind>,
}

impl Default for VolumeOptions {
    fn default() -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions::default(),
            create_if_blank: true,
            grow_slots_min: 64,
            initial_slots: 64,
            engine: None,
        }
    }
}

impl VolumeOptions {
    /// A layout of a few MiB (64 KiB slots, 256 KiB version log mirrors, 1 MiB WAL area),
    /// creating lsm volumes: for examples and tests, not for data.
    pub fn small_for_tests() -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions {
                slot_bytes: 64 << 10,
                version_log_bytes: 256 << 10,
                wal_bytes: 1 << 20,
            },
            grow_slots_min: 16,
            initial_slots: 16,
            engine: Some(EngineKind::Lsm),
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

/// A redundant copy (a format header copy, a version log anchor or object in one mirror)
/// that the open found damaged while its twin was valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedCopy {
    /// Which copy: "format header copy B", "version log mirror A anchor", ...
    pub what: String,
    /// Device offset of the damaged copy (on the fast device; a capacity volume's header
    /// copies say "capacity" in `what`).
    pub offset: u64,
    /// Whether the open rewrote it from the valid copy (read-write opens do; read-only
    /// opens only report).
    pub repaired: bool,
}

/// What reading both header copies found.
pub(crate) struct HeaderRead {
    /// The valid header, `None` for a blank device.
    pub(crate) header: Option<Header>,
    /// The copies to rewrite from the valid one (by copy index, 0 or 1).
    pub(crate) damaged: Vec<usize>,
}

struct Inner {
    log: VersionLog,
    /// The slot map of each tier, by tier index.
    slots: Vec<Allocator>,
    stopped: Option<String>,
}

/// One tier's device, as the volume holds it.
struct TierDevice {
    device: DeviceRef,
    header: Header,
    counters: Arc<IoCounters>,
}

/// An open volume: a store's space, on one device or, tiered, on a fast and a capacity
/// device. Cheap to share behind an `Arc`; commits and allocations serialise on one lock,
/// data I/O goes through queues from [`Volume::queue`] without it.
pub struct Volume {
    /// By tier index: the fast device, and the capacity device of a tiered store.
    tiers: Vec<TierDevice>,
    /// Opened by [`Volume::open_read_only`]: allocations and commits are refused.
    read_only: bool,
    grow_slots_min: u32,
    inner: Mutex<Inner>,
    /// Redundant copies found damaged at open (repaired, unless read-only).
    damaged: Vec<DamagedCopy>,
    /// The identity of the fast volume's file or block device (`instance`), for a volume
    /// opened by path; `None` for a device given directly.
    instance: Option<[u8; 16]>,
    /// The fast volume's file or block device, as opened (canonical), for a volume opened
    /// by path.
    path: Option<std::path::PathBuf>,
    /// Where every data queue on the volume comes from (`queues.rs`).
    queues: Queues,
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Volume");
        d.field("device", &self.tiers[0].device).field("header", &self.tiers[0].header);
        if let Some(c) = self.tiers.get(1) {
            d.field("capacity_device", &c.device).field("capacity_header", &c.header);
        }
        d.finish()
    }
}

/// What the capacity device of a tiered open turned out to be.
enum CapacityCopy {
    /// A valid header, and its damaged copies (indexes) to repair.
    Valid(Header, Vec<usize>),
    Blank,
}

/// How an allocation may fit the free runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// Exactly the slots asked for, or nothing.
    Exact,
    /// The slots asked for, or the longest free run on a device that cannot grow.
    UpTo,
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
    /// [`Error::Tiers`] for the fast or capacity volume of a tiered store,
    /// [`Error::Io`] for device errors. Nothing is written to the device in any error case
    /// except a failed creation of a blank device.
    pub fn open(device: DeviceRef, opts: &VolumeOptions) -> Result<Opened> {
        Self::open_as(device, None, opts, false)
    }

    /// Opens a tiered store over `fast` (version log, WAL area, slots) and `capacity`
    /// (slots), creating both when both are blank and the options allow it. The capacity
    /// volume gets the fast volume's slot size.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shale_io::MemoryDevice;
    /// use shale_space::{Edit, Error, Tier, Volume, VolumeOptions};
    ///
    /// let fast = Arc::new(MemoryDevice::new(8 << 20, 4096)?);
    /// let capacity = Arc::new(MemoryDevice::new(16 << 20, 4096)?);
    /// let opts = VolumeOptions::small_for_tests();
    /// let volume = Volume::open_tiered(fast.clone(), capacity.clone(), &opts)?.volume;
    /// let e = volume.allocate_on(Tier::Capacity, 2)?;
    /// volume.commit(&Edit { added: vec![e], ..Edit::default() }, &mut Vec::new)?;
    /// drop(volume);
    ///
    /// let reopened = Volume::open_tiered(fast.clone(), capacity, &opts)?.volume;
    /// assert_eq!(reopened.live_extents(), vec![e]);
    /// drop(reopened);
    /// // Without its capacity volume, the store is refused.
    /// assert!(matches!(Volume::open(fast, &opts), Err(Error::Tiers(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Volume::open`]; [`Error::Tiers`] when the two devices are not one store's fast
    /// and capacity volumes (a single volume, another store's capacity volume, the two
    /// swapped, a blank capacity device where the store has extents, a capacity device that
    /// holds data while the fast one is blank).
    pub fn open_tiered(
        fast: DeviceRef,
        capacity: DeviceRef,
        opts: &VolumeOptions,
    ) -> Result<Opened> {
        Self::open_as(fast, Some(capacity), opts, false)
    }

    /// Opens the volume on `device` without writing to it: a blank device is refused rather
    /// than created on, recovery only reads (as it always does), and [`Volume::allocate`] and
    /// [`Volume::commit`] answer [`Error::ReadOnly`]. Open the device read-only too
    /// ([`Volume::open_path_read_only`] does), so a stray write fails in the OS as well.
    ///
    /// # Errors
    /// As [`Volume::open`]; [`Error::Foreign`] for a blank device.
    pub fn open_read_only(device: DeviceRef, opts: &VolumeOptions) -> Result<Opened> {
        Self::open_as(device, None, opts, true)
    }

    /// [`Volume::open_tiered`] without writing anything, as [`Volume::open_read_only`].
    ///
    /// # Errors
    /// As [`Volume::open_tiered`]; [`Error::Foreign`] for a blank fast device, and
    /// [`Error::Tiers`] for a blank capacity device.
    pub fn open_tiered_read_only(
        fast: DeviceRef,
        capacity: DeviceRef,
        opts: &VolumeOptions,
    ) -> Result<Opened> {
        Self::open_as(fast, Some(capacity), opts, true)
    }

    /// Reads both header copies of `device`: the valid header, or `None` for a blank device
    /// (or one whose creation was torn before either copy was complete), and which copy is
    /// damaged while the other is valid.
    pub(crate) fn read_header(
        device: &DeviceRef,
        read_only: bool,
        opts: &VolumeOptions,
    ) -> Result<HeaderRead> {
        let info = device.info();
        if info.capacity < HEADER_AREA_BYTES {
            return Err(Error::InvalidArgument(format!(
                "device of {} bytes (whole {}-byte blocks) is smaller than a volume header \
                 ({HEADER_AREA_BYTES} bytes)",
                info.capacity, info.block_size
            )));
        }
        let counters = Arc::new(IoCounters::default());
        let mut q = Self::raw_queue(device, IoClass::Header, 0..HEADER_AREA_BYTES, &counters)?;
        let area = q.read_at(0, HEADER_AREA_BYTES as usize)?;
        let half = AREA_ALIGN as usize;
        let copies = [Header::decode(&area[..half]), Header::decode(&area[half..])];
        match copies {
            [HeaderCopy::Valid(a), HeaderCopy::Valid(b)] => {
                // Two valid copies that differ: only damage (or forgery) gives that, as
                // both are written from one header. Copy A wins, as it always has.
                let damaged = if a == b { Vec::new() } else { vec![1] };
                Ok(HeaderRead { header: Some(a), damaged })
            }
            // One valid copy: the other was damaged, or creation was cut between the two
            // copies (the version log was complete before copy A was written).
            [HeaderCopy::Valid(h), _] => Ok(HeaderRead { header: Some(h), damaged: vec![1] }),
            [_, HeaderCopy::Valid(h)] => Ok(HeaderRead { header: Some(h), damaged: vec![0] }),
            [HeaderCopy::Newer(found), _] | [_, HeaderCopy::Newer(found)] => {
                Err(Error::NewerFormat { found, supported: FORMAT_VERSION })
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
                Ok(HeaderRead { header: None, damaged: Vec::new() })
            }
            [HeaderCopy::Damaged, HeaderCopy::Damaged] => {
                Err(Error::corruption("format header, both copies", 0))
            }
            _ => Err(Error::Foreign {
                why: "its first 8 KiB hold data that is not a shale header; nothing was written"
                    .into(),
            }),
        }
    }

    /// Reads the format header of `device` without opening the volume: `None` for a blank
    /// device. Tools use it to learn a store's engine before choosing how to open it.
    ///
    /// # Errors
    /// As [`Volume::open_read_only`] for the header alone: [`Error::Foreign`],
    /// [`Error::NewerFormat`], [`Error::Corruption`] (both copies damaged), [`Error::Io`].
    pub fn peek_header(device: &DeviceRef) -> Result<Option<Header>> {
        let any = VolumeOptions { create_if_blank: true, ..VolumeOptions::default() };
        Ok(Self::read_header(device, false, &any)?.header)
    }

    /// Refuses a volume whose header names another engine than the one opening it.
    fn check_engine(header: &Header, opts: &VolumeOptions) -> Result<()> {
        match (header.engine, opts.engine) {
            (Some(found), Some(expected)) if found != expected => {
                Err(Error::OtherEngine { found, expected })
            }
            _ => Ok(()),
        }
    }

    /// Rewrites the header copies `damaged` (indexes) of `device` from `header`, each
    /// durable before the next; the valid copy is never written.
    fn repair_header(
        device: &DeviceRef,
        header: &Header,
        damaged: &[usize],
        what: &str,
        counters: &Arc<IoCounters>,
    ) -> Result<Vec<DamagedCopy>> {
        let mut found = Vec::new();
        if damaged.is_empty() {
            return Ok(found);
        }
        let mut q = Self::raw_queue(device, IoClass::Header, 0..HEADER_AREA_BYTES, counters)?;
        let bytes = header.encode();
        for &copy in damaged {
            let offset = copy as u64 * AREA_ALIGN;
            let buf = AlignedBuf::padded_copy(&bytes, header.layout.sector_bytes as usize);
            q.write_at(offset, buf, true)?;
            let name = if copy == 0 { "A" } else { "B" };
            log::warn!(
                "repaired {what}format header copy {name} of volume {}",
                hex(&header.volume_id)
            );
            found.push(DamagedCopy {
                what: format!("{what}format header copy {name}"),
                offset,
                repaired: true,
            });
        }
        Ok(found)
    }

    fn open_as(
        device: DeviceRef,
        capacity: Option<DeviceRef>,
        opts: &VolumeOptions,
        read_only: bool,
    ) -> Result<Opened> {
        // The capacity device's header is read as if creation were allowed: a blank one is
        // judged below, against what the fast volume says.
        let lenient = VolumeOptions { create_if_blank: true, ..opts.clone() };
        let capacity = match capacity {
            Some(c) => {
                let read = Self::read_header(&c, false, &lenient)?;
                let copy = match read.header {
                    Some(h) => CapacityCopy::Valid(h, read.damaged),
                    None => CapacityCopy::Blank,
                };
                Some((c, copy))
            }
            None => None,
        };
        let read = Self::read_header(&device, read_only, opts)?;
        let Some(header) = read.header else {
            if let Some((_, CapacityCopy::Valid(h, _))) = &capacity {
                return Err(Error::Tiers(format!(
                    "the fast device is blank but the capacity device holds the {} volume {} \
                     (of store {}): a new store needs a blank capacity device",
                    h.role.name(),
                    hex(&h.volume_id),
                    hex(&h.partner_id)
                )));
            }
            return Self::create(device, capacity.map(|(c, _)| c), opts);
        };
        Self::check_engine(&header, opts)?;
        match (header.role, &capacity) {
            (Role::Capacity, _) => Err(Error::Tiers(format!(
                "volume {} is the capacity volume of store {}: open the store by its fast volume",
                hex(&header.volume_id),
                hex(&header.partner_id)
            ))),
            (Role::Single, Some(_)) => Err(Error::Tiers(format!(
                "store {} was created without a capacity volume (tiers are chosen when a store \
                 is created)",
                hex(&header.volume_id)
            ))),
            (Role::Fast, None) => Err(Error::Tiers(format!(
                "store {} keeps SSTs on its capacity volume {}: open it with that volume too",
                hex(&header.volume_id),
                hex(&header.partner_id)
            ))),
            _ => Self::recover(device, header, read.damaged, capacity, opts, read_only),
        }
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

    /// Creates a volume on the blank `device`, and a tiered store's capacity volume on the
    /// blank `capacity` after it (see the module comment for the order).
    fn create(
        device: DeviceRef,
        capacity: Option<DeviceRef>,
        opts: &VolumeOptions,
    ) -> Result<Opened> {
        let Some(engine) = opts.engine else {
            return Err(Error::InvalidArgument(
                "a new volume needs the engine whose store it is (VolumeOptions::engine); \
                 nothing was written"
                    .into(),
            ));
        };
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
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let fast_id = new_volume_id();
        // Everything about the capacity volume is checked before the fast one is written.
        let capacity_header = match &capacity {
            Some(c) => {
                let cap_layout = capacity_layout(layout.slot_bytes, c.info().block_size);
                if cap_layout.slot_count(c.info().capacity) == 0 {
                    return Err(Error::InvalidArgument(format!(
                        "capacity device of {} bytes has no room for a slot of {} bytes",
                        c.info().capacity,
                        layout.slot_bytes
                    )));
                }
                Some(Header {
                    format_version: FORMAT_VERSION,
                    volume_id: new_volume_id(),
                    layout: cap_layout,
                    created_unix_secs: now,
                    role: Role::Capacity,
                    partner_id: fast_id,
                    engine: Some(engine),
                })
            }
            None => None,
        };
        let role = if capacity.is_some() { Role::Fast } else { Role::Single };
        let header = Header {
            format_version: FORMAT_VERSION,
            volume_id: fast_id,
            layout,
            created_unix_secs: now,
            role,
            partner_id: capacity_header.as_ref().map_or([0; 16], |h| h.volume_id),
            engine: Some(engine),
        };
        let counters = Arc::new(IoCounters::default());
        let log_area = layout.version_log_offset..layout.wal_offset;
        let log_queue = Self::raw_queue(&device, IoClass::VersionLog, log_area, &counters)?;
        let log = VersionLog::create(
            layout,
            Box::new(log_queue),
            device.clone(),
            &BaseRecord::default(),
        )?;
        Self::write_header(&device, &header, &counters)?;
        let slots = Allocator::rebuild(Tier::Fast, layout.slot_count(info.capacity), &[])
            .map_err(|e| Error::corruption(e, layout.slot_offset))?;
        log::info!(
            "created volume {} on a {} device of {} bytes: {} slots of {} bytes",
            hex(&header.volume_id),
            info.backend,
            info.capacity,
            slots.usage().total,
            layout.slot_bytes
        );
        let mut tiers = vec![TierDevice { device, header, counters }];
        let mut maps = vec![slots];
        if let (Some(c), Some(h)) = (capacity, capacity_header) {
            let (tier, map) = Self::finish_capacity(c, h, &[])?;
            tiers.push(tier);
            maps.push(map);
        }
        let volume = Volume::assemble(tiers, opts, log, maps, false, Vec::new());
        Ok(Opened { volume, versions: Versions::default(), created: true })
    }

    /// Writes both copies of `header` at the start of `device`, each durable before the next.
    fn write_header(device: &DeviceRef, header: &Header, counters: &Arc<IoCounters>) -> Result<()> {
        let mut q = Self::raw_queue(device, IoClass::Header, 0..HEADER_AREA_BYTES, counters)?;
        let bytes = header.encode();
        for copy in 0..2u64 {
            let buf = AlignedBuf::padded_copy(&bytes, header.layout.sector_bytes as usize);
            q.write_at(copy * AREA_ALIGN, buf, true)?;
        }
        Ok(())
    }

    /// Writes the header of a new capacity volume (its last step of creation), and its slot
    /// map holding the committed version's capacity extents `live` (none, for a new store).
    fn finish_capacity(
        device: DeviceRef,
        header: Header,
        live: &[Extent],
    ) -> Result<(TierDevice, Allocator)> {
        let counters = Arc::new(IoCounters::default());
        Self::write_header(&device, &header, &counters)?;
        let info = device.info();
        let map = Allocator::rebuild(Tier::Capacity, header.layout.slot_count(info.capacity), live)
            .map_err(|e| Error::corruption(e, header.layout.slot_offset))?;
        log::info!(
            "created capacity volume {} of store {} on a {} device of {} bytes: {} slots",
            hex(&header.volume_id),
            hex(&header.partner_id),
            info.backend,
            info.capacity,
            map.usage().total
        );
        Ok((TierDevice { device, header, counters }, map))
    }

    fn recover(
        device: DeviceRef,
        header: Header,
        header_damaged: Vec<usize>,
        capacity: Option<(DeviceRef, CapacityCopy)>,
        opts: &VolumeOptions,
        read_only: bool,
    ) -> Result<Opened> {
        let layout = header.layout;
        let info = device.info();
        check_device_fits(&device, &header, "")?;
        let started = std::time::Instant::now();
        let counters = Arc::new(IoCounters::default());
        let log_area = layout.version_log_offset..layout.wal_offset;
        let log_queue = Self::raw_queue(&device, IoClass::VersionLog, log_area, &counters)?;
        let (mut log, versions) = VersionLog::recover(layout, Box::new(log_queue), device.clone())?;
        let live = replay_extents(&versions, layout.slot_offset)?;
        let (fast_live, capacity_live): (Vec<Extent>, Vec<Extent>) =
            live.iter().partition(|e| e.tier == Tier::Fast);
        if capacity.is_none() && !capacity_live.is_empty() {
            return Err(Error::corruption(
                format!(
                    "the committed version of single volume {} names {} extents on a capacity tier",
                    hex(&header.volume_id),
                    capacity_live.len()
                ),
                layout.version_log_offset,
            ));
        }
        let slots = Allocator::rebuild(Tier::Fast, layout.slot_count(info.capacity), &fast_live)
            .map_err(|e| {
                Error::corruption(format!("committed version: {e}"), layout.slot_offset)
            })?;
        let mut tiers = vec![TierDevice { device, header: header.clone(), counters }];
        let mut maps = vec![slots];
        let mut capacity_damaged = Vec::new();
        if let Some((c, copy)) = capacity {
            if let CapacityCopy::Valid(_, damaged) = &copy {
                capacity_damaged = damaged.clone();
            }
            let (tier, map) = Self::recover_capacity(c, copy, &header, &capacity_live, read_only)?;
            tiers.push(tier);
            maps.push(map);
        }
        // Every check passed: only now is anything written, and only to rewrite a damaged
        // copy from its valid twin (P7: a damaged redundant copy is repaired, never carried).
        let damaged =
            Self::handle_damage(&tiers, &mut log, &header_damaged, &capacity_damaged, read_only)?;
        let s = log.state();
        log::info!(
            "opened volume {}: base SN {} + {} deltas, {} repaired copies, {} live slots, \
             recovery {:?}",
            hex(&header.volume_id),
            s.base_sn,
            s.deltas,
            s.repaired,
            maps.iter().map(|m| m.usage().live).sum::<u32>(),
            started.elapsed()
        );
        let volume = Volume::assemble(tiers, opts, log, maps, read_only, damaged);
        Ok(Opened { volume, versions, created: false })
    }

    /// Reports the damaged copies the open found (header copies of each tier, version log
    /// anchors and objects) and, on a read-write open, rewrites each from its valid copy.
    fn handle_damage(
        tiers: &[TierDevice],
        log: &mut VersionLog,
        header_damaged: &[usize],
        capacity_damaged: &[usize],
        read_only: bool,
    ) -> Result<Vec<DamagedCopy>> {
        let copy_name = |i: usize| if i == 0 { "A" } else { "B" };
        if read_only {
            let mut found: Vec<DamagedCopy> = Vec::new();
            for (tier, damaged, what) in
                [(0, header_damaged, ""), (1, capacity_damaged, "capacity ")]
            {
                if tier < tiers.len() {
                    found.extend(damaged.iter().map(|&i| DamagedCopy {
                        what: format!("{what}format header copy {}", copy_name(i)),
                        offset: i as u64 * AREA_ALIGN,
                        repaired: false,
                    }));
                }
            }
            found.extend(log.damaged().iter().map(|r: &Repair| DamagedCopy {
                what: r.what.clone(),
                offset: r.offset,
                repaired: false,
            }));
            return Ok(found);
        }
        let mut found = Vec::new();
        let fast = &tiers[0];
        found.extend(Self::repair_header(
            &fast.device,
            &fast.header,
            header_damaged,
            "",
            &fast.counters,
        )?);
        if let Some(cap) = tiers.get(1) {
            found.extend(Self::repair_header(
                &cap.device,
                &cap.header,
                capacity_damaged,
                "capacity ",
                &cap.counters,
            )?);
        }
        let log_copies: Vec<DamagedCopy> = log
            .damaged()
            .iter()
            .map(|r| DamagedCopy { what: r.what.clone(), offset: r.offset, repaired: true })
            .collect();
        log.repair()?;
        found.extend(log_copies);
        Ok(found)
    }

    /// Checks the capacity device against the fast volume's header and rebuilds its slot map
    /// from the committed version's capacity extents `live`; finishes an interrupted creation
    /// (a blank capacity device while no extent lives there).
    fn recover_capacity(
        device: DeviceRef,
        copy: CapacityCopy,
        fast: &Header,
        live: &[Extent],
        read_only: bool,
    ) -> Result<(TierDevice, Allocator)> {
        let header = match copy {
            CapacityCopy::Blank if live.is_empty() && !read_only => {
                // The crash came between the fast volume's creation and the capacity
                // volume's header: nothing can be on it yet.
                let h = Header {
                    format_version: fast.format_version,
                    volume_id: fast.partner_id,
                    layout: capacity_layout(fast.layout.slot_bytes, device.info().block_size),
                    created_unix_secs: fast.created_unix_secs,
                    role: Role::Capacity,
                    partner_id: fast.volume_id,
                    engine: fast.engine,
                };
                return Self::finish_capacity(device, h, live);
            }
            CapacityCopy::Blank => {
                return Err(Error::Tiers(format!(
                    "the capacity device is blank, but store {} keeps {} extents on its capacity \
                     volume {}: that volume is missing (replaced or wiped?)",
                    hex(&fast.volume_id),
                    live.len(),
                    hex(&fast.partner_id)
                )));
            }
            CapacityCopy::Valid(h, _) => h,
        };
        if header.role != Role::Capacity {
            return Err(Error::Tiers(format!(
                "the capacity device holds the {} volume {}, not a capacity volume (the two \
                 swapped?)",
                header.role.name(),
                hex(&header.volume_id)
            )));
        }
        if header.volume_id != fast.partner_id || header.partner_id != fast.volume_id {
            return Err(Error::Tiers(format!(
                "the capacity device holds capacity volume {} of store {}, but store {} keeps \
                 its SSTs on capacity volume {}",
                hex(&header.volume_id),
                hex(&header.partner_id),
                hex(&fast.volume_id),
                hex(&fast.partner_id)
            )));
        }
        if header.layout.slot_bytes != fast.layout.slot_bytes {
            return Err(Error::corruption(
                format!(
                    "capacity volume's slots are {} bytes, the fast volume's {}",
                    header.layout.slot_bytes, fast.layout.slot_bytes
                ),
                0,
            ));
        }
        check_device_fits(&device, &header, "capacity ")?;
        let map = Allocator::rebuild(
            Tier::Capacity,
            header.layout.slot_count(device.info().capacity),
            live,
        )
        .map_err(|e| Error::corruption(format!("committed version, capacity tier: {e}"), 0))?;
        Ok((TierDevice { device, header, counters: Arc::new(IoCounters::default()) }, map))
    }

    fn assemble(
        tiers: Vec<TierDevice>,
        opts: &VolumeOptions,
        log: VersionLog,
        slots: Vec<Allocator>,
        read_only: bool,
        damaged: Vec<DamagedCopy>,
    ) -> Volume {
        let source = |t: &TierDevice| {
            let l = t.header.layout;
            TierSource {
                device: t.device.clone(),
                wal_area: l.wal_offset..l.wal_offset + l.wal_bytes,
                slot_offset: l.slot_offset,
                counters: t.counters.clone(),
            }
        };
        let queues = Queues::new(QueueSource {
            fast: source(&tiers[0]),
            capacity: tiers.get(1).map(source),
        });
        Volume {
            queues,
            tiers,
            read_only,
            grow_slots_min: opts.grow_slots_min.max(1),
            inner: Mutex::new(Inner { log, slots, stopped: None }),
            damaged,
            instance: None,
            path: None,
        }
    }

    /// The identity of this copy of the store ([`crate::instance_id`] of its fast volume's
    /// file or block device), for state kept outside the volume: `None` for a volume opened
    /// on a device directly rather than by path.
    pub fn instance_id(&self) -> Option<[u8; 16]> {
        self.instance
    }

    /// The fast volume's file or block device (canonical), for a volume opened by path.
    pub fn volume_path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    pub(crate) fn set_instance(&mut self, id: [u8; 16], path: std::path::PathBuf) {
        self.instance = Some(id);
        self.path = Some(path);
    }

    /// The redundant copies the open found damaged while their twins were valid: format
    /// header copies and version log anchors and objects of either mirror. A read-write open
    /// has rewritten each from its valid copy (`repaired`); a read-only open only reports,
    /// so `shale check` can say what a store lost of its redundancy.
    pub fn damaged_copies(&self) -> &[DamagedCopy] {
        &self.damaged
    }

    /// The engine the volume's header names, `None` for a volume written before format 3.
    pub fn engine(&self) -> Option<EngineKind> {
        self.tiers[0].header.engine
    }

    /// Gives back the storage of every free run (slots freed before a crash cut in after
    /// their commit, and volumes of versions that kept free slots allocated), on each tier,
    /// and of the version log's ring outside its live chain. The engine calls
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
                inner.stopped =
                    Some(format!("giving back version log storage: {}", shale_io::Chain(&err)));
            }
            return Err(err);
        }
        let free: Vec<Extent> = inner.slots.iter().flat_map(Allocator::free_extents).collect();
        for e in free {
            let (device, r) = self.device_range(e);
            if let Err(err) = device.release_range(r.start, r.end - r.start) {
                if inner.stopped.is_none() {
                    inner.stopped = Some(format!(
                        "giving back the storage of free slots: {}",
                        shale_io::Chain(&err)
                    ));
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

    /// The fast volume's header (a store's only volume when it has no capacity volume).
    pub fn header(&self) -> &Header {
        &self.tiers[0].header
    }

    /// Where the fast volume's areas lie.
    pub fn layout(&self) -> Layout {
        self.tiers[0].header.layout
    }

    /// The fast volume's device.
    pub fn device(&self) -> &DeviceRef {
        &self.tiers[0].device
    }

    /// Whether the store has a capacity volume.
    pub fn is_tiered(&self) -> bool {
        self.tiers.len() > 1
    }

    /// The tiers the store has: `[Fast]` or `[Fast, Capacity]`.
    pub fn tiers(&self) -> &'static [Tier] {
        &Tier::ALL[..self.tiers.len()]
    }

    fn tier_device(&self, tier: Tier) -> &TierDevice {
        match self.tiers.get(tier.index()) {
            Some(t) => t,
            None => panic!("an extent on the {} tier of a store without one", tier.name()),
        }
    }

    /// The header of `tier`'s volume, if the store has that tier.
    pub fn tier_header(&self, tier: Tier) -> Option<&Header> {
        self.tiers.get(tier.index()).map(|t| &t.header)
    }

    /// The device of `tier`, if the store has that tier.
    pub fn tier_device_ref(&self, tier: Tier) -> Option<&DeviceRef> {
        self.tiers.get(tier.index()).map(|t| &t.device)
    }

    /// The largest block size of the store's devices: reads aligned to it are aligned on
    /// every tier.
    pub fn block_bytes(&self) -> u32 {
        self.tiers.iter().map(|t| t.device.info().block_size).max().unwrap_or(4096)
    }

    /// Byte range of an extent, as addresses ([`Tier::split`]; on a store without a capacity
    /// volume, offsets on its device).
    pub fn extent_range(&self, e: Extent) -> std::ops::Range<u64> {
        let (_, r) = self.device_range(e);
        e.tier.address(r.start)..e.tier.address(r.start) + (r.end - r.start)
    }

    /// The device of an extent's tier, and the extent's byte range on it.
    fn device_range(&self, e: Extent) -> (&DeviceRef, std::ops::Range<u64>) {
        let t = self.tier_device(e.tier);
        let l = t.header.layout;
        let start = l.slot_to_offset(e.first);
        (&t.device, start..start + u64::from(e.count) * l.slot_bytes)
    }

    /// Opens a queue for data I/O of one class (WAL pages or slots), confined to its area and
    /// counted, for an owner that keeps it: [`Queues::open`] of [`Volume::queues`].
    ///
    /// # Errors
    /// As [`Queues::open`].
    pub fn queue(&self, class: IoClass, opts: &QueueOptions) -> Result<VolumeQueue> {
        self.queues.open(class, opts)
    }

    /// The volume's queue provisioner: owned queues, pooled ones and queue pairs, one way
    /// for every engine (`queues.rs`).
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// Allocates `slots` contiguous slots on the fast tier (a store's only volume when it
    /// has no capacity volume); see [`Volume::allocate_on`].
    ///
    /// # Errors
    /// As [`Volume::allocate_on`].
    pub fn allocate(&self, slots: u32) -> Result<Extent> {
        self.allocate_on(Tier::Fast, slots)
    }

    /// Allocates `slots` contiguous slots on `tier` for an SST about to be written. The
    /// extent stays pending until a commit adds it or [`Volume::release`] gives it back; a
    /// crash forgets it.
    ///
    /// # Errors
    /// [`Error::NoSpace`] when no free run is long enough after a full pass and the device
    /// cannot grow; [`Error::InvalidArgument`] for zero slots or a tier the store lacks.
    pub fn allocate_on(&self, tier: Tier, slots: u32) -> Result<Extent> {
        self.allocate_within(tier, slots, Fit::Exact)
    }

    /// Allocates `slots` contiguous slots on `tier` as [`Volume::allocate_on`] does, or fewer:
    /// on a device that cannot grow and has no free run that long, the whole of its longest
    /// free run. For an output that can be cut into several SSTs, so that a fragmented device
    /// with free slots left never stops the store.
    ///
    /// # Errors
    /// [`Error::NoSpace`] when the tier has no free slot and cannot grow; as
    /// [`Volume::allocate_on`] otherwise.
    pub fn allocate_up_to_on(&self, tier: Tier, slots: u32) -> Result<Extent> {
        self.allocate_within(tier, slots, Fit::UpTo)
    }

    /// [`Volume::allocate_on`] and [`Volume::allocate_up_to_on`].
    fn allocate_within(&self, tier: Tier, slots: u32, fit: Fit) -> Result<Extent> {
        self.refuse_if_read_only("allocation")?;
        if slots == 0 {
            return Err(Error::InvalidArgument("allocation of zero slots".into()));
        }
        if tier.index() >= self.tiers.len() {
            return Err(Error::InvalidArgument(format!(
                "allocation on the {} tier of a store without one",
                tier.name()
            )));
        }
        let e = self.allocate_slots(tier, slots, fit)?;
        let slots = e.count;
        // The slots of a released extent are holes in a volume file (`release`): give them
        // storage before the SST is written, so a full file system is a typed error here
        // rather than a failed write-back later.
        let (device, r) = self.device_range(e);
        if let Err(err) = device.allocate_range(r.start, r.end - r.start) {
            self.inner.lock().slots[tier.index()].release(e);
            return Err(match err {
                shale_io::Error::Io { source, .. }
                    if source.raw_os_error() == Some(libc::ENOSPC) =>
                {
                    Error::NoSpace(format!(
                        "no storage for {slots} slots at {} of the {} tier: {source}",
                        r.start,
                        tier.name()
                    ))
                }
                other => other.into(),
            });
        }
        Ok(e)
    }

    /// The allocator's part of [`Volume::allocate_on`]: a free run, growing the device if
    /// needed.
    fn allocate_slots(&self, tier: Tier, slots: u32, fit: Fit) -> Result<Extent> {
        let mut inner = self.inner.lock();
        let map = &mut inner.slots[tier.index()];
        if let Some(e) = map.allocate(slots) {
            return Ok(e);
        }
        let t = self.tier_device(tier);
        let info = t.device.info();
        if !info.growable {
            if fit == Fit::UpTo {
                if let Some(e) = map.allocate_up_to(slots) {
                    log::debug!(
                        "{} of {slots} slots allocated on the {} tier: no longer free run",
                        e.count,
                        tier.name()
                    );
                    return Ok(e);
                }
            }
            let u = map.usage();
            return Err(Error::NoSpace(format!(
                "no run of {slots} free slots on the {} tier ({} free in {} runs, longest {})",
                tier.name(),
                u.free,
                u.free_runs,
                u.largest_free_run
            )));
        }
        let l = t.header.layout;
        let total = map.usage().total;
        let grown = total.saturating_add(slots.max(self.grow_slots_min).max(total / 4));
        t.device.grow(l.capacity_for(grown))?;
        let now = l.slot_count(t.device.info().capacity);
        log::info!("grew the {} tier from {total} to {now} slots", tier.name());
        map.grow(now);
        map.allocate(slots).ok_or_else(|| {
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
        let (device, r) = self.device_range(e);
        let given_back = device.release_range(r.start, r.end - r.start);
        let mut inner = self.inner.lock();
        inner.slots[e.tier.index()].release(e);
        if let Err(err) = given_back {
            log::error!(
                "could not give back the storage of free slots {e:?}: {}",
                shale_io::Chain(&err)
            );
            if inner.stopped.is_none() {
                inner.stopped = Some(format!(
                    "giving back the storage of free slots: {}",
                    shale_io::Chain(&err)
                ));
            }
        }
    }

    /// Gives back the storage behind bytes `range` (addresses, as [`Volume::extent_range`]
    /// gives them) of a pending extent whose slots stay allocated: bytes its writer will
    /// never write and nothing will read (the zero padding between an SST's last block and
    /// its footer). In a volume file they become a hole and read as zeros; a block device
    /// keeps them as they are.
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
        let (device, _) = self.device_range(e);
        let (_, start) = Tier::split(range.start);
        Ok(device.release_range(start, range.end - range.start)?)
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
        let (device, tail) =
            self.device_range(Extent::on(e.tier, e.first + slots, e.count - slots));
        let given_back = device.release_range(tail.start, tail.end - tail.start);
        let mut inner = self.inner.lock();
        let kept = inner.slots[e.tier.index()].shrink(e, slots);
        if let Err(err) = given_back {
            log::error!(
                "could not give back the storage of free slots {tail:?}: {}",
                shale_io::Chain(&err)
            );
            if inner.stopped.is_none() {
                inner.stopped = Some(format!(
                    "giving back the storage of free slots: {}",
                    shale_io::Chain(&err)
                ));
            }
        }
        kept
    }

    /// Commits an edit durably, as a delta or, when the version log needs room, as a new base
    /// whose engine bytes come from `engine_state` (the engine's complete state *after* this
    /// edit). Removed extents are freed only once the commit is durable. One commit may name
    /// extents of both tiers: it is one version log write either way.
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
        for e in edit.removed.iter().chain(&edit.added) {
            if e.tier.index() >= self.tiers.len() {
                return Err(Error::InvalidArgument(format!(
                    "edit names {e:?} on the {} tier of a store without one",
                    e.tier.name()
                )));
            }
        }
        for tier in self.tiers() {
            let (removed, added) = split_edit(edit, *tier);
            inner.slots[tier.index()]
                .validate_edit(&removed, &added)
                .map_err(Error::InvalidArgument)?;
        }
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
            let mut extents = Vec::new();
            for tier in self.tiers() {
                let (removed, added) = split_edit(edit, *tier);
                let mut after = inner.slots[tier.index()].clone();
                after.apply_edit(&removed, &added);
                extents.extend(after.live_extents());
            }
            let base = BaseRecord { extents, engine: engine_state() };
            let base_len = base.encode().len();
            inner.log.check_base_fits(base_len)?;
            inner.log.hold_room(base_len)?;
            inner.log.append_base(&base).map(|()| CommitKind::Base)
        };
        match written {
            Ok(kind) => {
                for tier in self.tiers() {
                    let (removed, added) = split_edit(edit, *tier);
                    let map = &mut inner.slots[tier.index()];
                    map.apply_edit(&removed, &added);
                    if edit.hold_removed {
                        map.hold(&removed);
                    }
                }
                // The trim moved both anchors to the new base: the ring before it is dead.
                // The commit is durable whatever happens here; a failed release loses
                // nothing, but the device failed an operation, so the volume stops (P5) as
                // for a failed release of slots.
                if kind == CommitKind::Base {
                    if let Err(err) = inner.log.release_dead() {
                        log::error!(
                            "could not give back version log storage: {}",
                            shale_io::Chain(&err)
                        );
                        inner.stopped = Some(format!(
                            "giving back version log storage: {}",
                            shale_io::Chain(&err)
                        ));
                    }
                }
                Ok(kind)
            }
            Err(e) => {
                inner.stopped = Some(shale_io::Chain(&e).to_string());
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

    /// Slot counts of the fast tier (a store's only volume when it has no capacity volume).
    pub fn slot_usage(&self) -> SlotUsage {
        self.tier_slot_usage(Tier::Fast)
    }

    /// Slot counts of `tier` (all zero for a tier the store lacks).
    pub fn tier_slot_usage(&self, tier: Tier) -> SlotUsage {
        self.inner.lock().slots.get(tier.index()).map(Allocator::usage).unwrap_or_default()
    }

    /// Bytes new extents on `tier` can still take: its free slots on a device that cannot
    /// grow; on one that can, what the device can still give (a volume file: its file
    /// system's free space, which both its holes and its growth draw on); `None` where that
    /// has no known bound (a growable memory device), or for a tier the store lacks.
    pub fn tier_room(&self, tier: Tier) -> Option<u64> {
        let t = self.tiers.get(tier.index())?;
        if t.device.info().growable {
            t.device.free_storage()
        } else {
            let free = self.tier_slot_usage(tier).free;
            Some(u64::from(free) * t.header.layout.slot_bytes)
        }
    }

    /// The extents of the committed version, on every tier (fast ones first).
    pub fn live_extents(&self) -> Vec<Extent> {
        self.inner.lock().slots.iter().flat_map(Allocator::live_extents).collect()
    }

    /// I/O counters of one class, summed over the tiers.
    pub fn io(&self, class: IoClass) -> ClassSnapshot {
        let mut sum = ClassSnapshot::default();
        for t in &self.tiers {
            let c = t.counters.snapshot(class);
            sum.reads += c.reads;
            sum.read_bytes += c.read_bytes;
            sum.writes += c.writes;
            sum.write_bytes += c.write_bytes;
            sum.flushes += c.flushes;
        }
        sum
    }

    /// I/O counters of one class on one tier (all zero for a tier the store lacks).
    pub fn tier_io(&self, tier: Tier, class: IoClass) -> ClassSnapshot {
        self.tiers.get(tier.index()).map(|t| t.counters.snapshot(class)).unwrap_or_default()
    }

    /// Checks each tier's slot map: every slot free, live or pending exactly once.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the first violation.
    pub fn check_slots(&self) -> Result<()> {
        let inner = self.inner.lock();
        for (t, map) in self.tiers.iter().zip(&inner.slots) {
            map.check().map_err(|e| Error::corruption(e, t.header.layout.slot_offset))?;
        }
        Ok(())
    }
}

/// The removed and added extents of `edit` on `tier`.
fn split_edit(edit: &Edit, tier: Tier) -> (Vec<Extent>, Vec<Extent>) {
    let on = |v: &[Extent]| v.iter().copied().filter(|e| e.tier == tier).collect::<Vec<_>>();
    (on(&edit.removed), on(&edit.added))
}

/// The layout of a capacity volume: slots of the fast volume's size after the headers and an
/// unused version log area of the smallest size (a hole in a volume file), no WAL area.
pub(crate) fn capacity_layout(slot_bytes: u64, sector_bytes: u32) -> Layout {
    let opts = LayoutOptions { slot_bytes, version_log_bytes: VERSION_LOG_BYTES_MIN, wal_bytes: 0 };
    Layout::new(&opts, sector_bytes)
}

/// Refuses a device whose blocks are larger than the volume's sectors or that is shorter than
/// its layout (`what` names the tier in the message).
fn check_device_fits(device: &DeviceRef, header: &Header, what: &str) -> Result<()> {
    let layout = header.layout;
    let info = device.info();
    if info.block_size > layout.sector_bytes {
        return Err(Error::InvalidArgument(format!(
            "{what}volume made with {}-byte sectors is on a device of {}-byte blocks",
            layout.sector_bytes, info.block_size
        )));
    }
    if info.capacity < layout.slot_offset {
        return Err(Error::corruption(
            format!("{what}device of {} bytes is shorter than the volume's layout", info.capacity),
            0,
        ));
    }
    Ok(())
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
