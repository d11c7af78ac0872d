//! Where each area of a volume lies.
//!
//! ```text
//! byte 0        4096          8192          +L            +2L         +W
//! | header A    | header B    | version log | version log | WAL area  | slot area ...       |
//! | (1 sector)  | (1 sector)  | mirror A    | mirror B    | 4 KiB pages| slot 0 | slot 1 | ...|
//! ```
//! Every area starts on a 4 KiB boundary (O_DIRECT on files needs it, WAL pages are 4 KiB).
//! The slot count is not stored: it follows from the device's capacity, so a volume file grows
//! by growing the file. A new volume file has storage for its header and slots; the version
//! log and the WAL area are holes that the volume (`version_log`) and the engine allocate as
//! they write and release as they free
//! ([`shale_io::Device::allocate_range`], [`shale_io::Device::release_range`]).

use crate::error::{Error, Result};

/// Alignment of every area and of the slot size.
pub const AREA_ALIGN: u64 = 4096;
/// Bytes reserved for the two header copies.
pub const HEADER_AREA_BYTES: u64 = 2 * AREA_ALIGN;

/// Sizes a new volume is created with. Ignored when opening an existing volume, whose header
/// says how it was laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutOptions {
    /// Size of one slot, the allocation unit of the slot area: a multiple of 4 KiB within
    /// `SLOT_BYTES_MAX`. It need not be a power of two: nothing divides by it with shifts.
    pub slot_bytes: u64,
    /// Size of each of the two version log mirrors (a multiple of 4 KiB within
    /// `VERSION_LOG_BYTES_MIN..=VERSION_LOG_BYTES_MAX`).
    pub version_log_bytes: u64,
    /// Size of the WAL area kept for an engine's WAL (a multiple of 4 KiB): address space,
    /// not disk space, in a volume file (see the module doc). 0, the default,
    /// leaves no WAL area to the space layer; the lsm engine reads 0 as "size it from my
    /// options" and fills in the size before it creates a volume (`Options::volume_options`).
    pub wal_bytes: u64,
}

impl Default for LayoutOptions {
    fn default() -> LayoutOptions {
        LayoutOptions { slot_bytes: 1 << 20, version_log_bytes: 8 << 20, wal_bytes: 0 }
    }
}

/// Smallest version log mirror: room for a base, its deltas and a second base while trimming.
pub const VERSION_LOG_BYTES_MIN: u64 = 64 << 10;
/// Largest version log mirror. Opening a volume reads both mirrors whole into memory, and a
/// base may use at most a quarter of a mirror: 1 GiB mirrors already hold bases of 256 MiB,
/// millions of SSTs, while costing 2 GiB of memory at every open.
pub const VERSION_LOG_BYTES_MAX: u64 = 1 << 30;
/// Largest slot. Every SST image is built in memory padded to whole slots, so even an SST of
/// two keys costs a slot of memory and of disk; and with slot numbers being u32 on disk, a
/// volume of 1 GiB slots (4 EiB) already reaches the limit of a file's offsets (`VOLUME_BYTES_MAX`).
pub const SLOT_BYTES_MAX: u64 = 1 << 30;
/// Largest volume: file offsets are `off_t`, a signed 64-bit integer.
pub const VOLUME_BYTES_MAX: u64 = i64::MAX as u64;

impl LayoutOptions {
    /// Checks the sizes: each within its range, and the areas of a volume with the most
    /// slots a volume can have (u32 slot numbers) still within `VOLUME_BYTES_MAX`, so no
    /// offset computed from the layout can overflow.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad size, its value and the accepted range.
    pub fn validate(&self) -> Result<()> {
        let aligned = |v: u64| v % AREA_ALIGN == 0;
        if !(AREA_ALIGN..=SLOT_BYTES_MAX).contains(&self.slot_bytes) || !aligned(self.slot_bytes) {
            return Err(Error::InvalidArgument(format!(
                "slot_bytes {} must be a multiple of {AREA_ALIGN} in {AREA_ALIGN}..={SLOT_BYTES_MAX}",
                self.slot_bytes
            )));
        }
        if !(VERSION_LOG_BYTES_MIN..=VERSION_LOG_BYTES_MAX).contains(&self.version_log_bytes)
            || !aligned(self.version_log_bytes)
        {
            return Err(Error::InvalidArgument(format!(
                "version_log_bytes {} must be a multiple of {AREA_ALIGN} in \
                 {VERSION_LOG_BYTES_MIN}..={VERSION_LOG_BYTES_MAX}",
                self.version_log_bytes
            )));
        }
        let slot_area_max = self.slot_bytes * u64::from(u32::MAX);
        let wal_bytes_max =
            VOLUME_BYTES_MAX - (HEADER_AREA_BYTES + 2 * self.version_log_bytes + slot_area_max);
        if self.wal_bytes > wal_bytes_max || !aligned(self.wal_bytes) {
            return Err(Error::InvalidArgument(format!(
                "wal_bytes {} must be a multiple of {AREA_ALIGN} in 0..={wal_bytes_max} (the \
                 volume, with its most slots, must fit in {VOLUME_BYTES_MAX} bytes)",
                self.wal_bytes
            )));
        }
        Ok(())
    }
}

/// The byte ranges of a volume's areas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Sector size: the device's logical block size, the unit of version log objects.
    pub sector_bytes: u32,
    /// Offset of version log mirror A; mirror B follows it directly.
    pub version_log_offset: u64,
    /// Size of each mirror.
    pub version_log_bytes: u64,
    /// Offset of the WAL area.
    pub wal_offset: u64,
    /// Size of the WAL area.
    pub wal_bytes: u64,
    /// Offset of slot 0.
    pub slot_offset: u64,
    /// Size of a slot.
    pub slot_bytes: u64,
}

impl Layout {
    /// The layout a new volume gets with these options on a device of this sector size.
    pub fn new(opts: &LayoutOptions, sector_bytes: u32) -> Layout {
        let version_log_offset = HEADER_AREA_BYTES;
        let wal_offset = version_log_offset + 2 * opts.version_log_bytes;
        Layout {
            sector_bytes,
            version_log_offset,
            version_log_bytes: opts.version_log_bytes,
            wal_offset,
            wal_bytes: opts.wal_bytes,
            slot_offset: wal_offset + opts.wal_bytes,
            slot_bytes: opts.slot_bytes,
        }
    }

    /// Offset of mirror `m` (0 = A, 1 = B).
    pub fn mirror_offset(&self, m: usize) -> u64 {
        self.version_log_offset + m as u64 * self.version_log_bytes
    }

    /// How many whole slots a device of `capacity` bytes holds.
    pub fn slot_count(&self, capacity: u64) -> u32 {
        let slots = capacity.saturating_sub(self.slot_offset) / self.slot_bytes;
        u32::try_from(slots).unwrap_or(u32::MAX)
    }

    /// Byte offset of a slot.
    pub fn slot_to_offset(&self, slot: u32) -> u64 {
        self.slot_offset + u64::from(slot) * self.slot_bytes
    }

    /// Device capacity needed to hold `slots` slots.
    pub fn capacity_for(&self, slots: u32) -> u64 {
        self.slot_offset + u64::from(slots) * self.slot_bytes
    }

    /// Checks a layout read from a header against itself and the device.
    pub(crate) fn is_consistent(&self) -> bool {
        let a = AREA_ALIGN;
        self.sector_bytes.is_power_of_two()
            && (512..=4096).contains(&self.sector_bytes)
            && self.version_log_offset == HEADER_AREA_BYTES
            && self.version_log_bytes >= VERSION_LOG_BYTES_MIN
            && self.version_log_bytes % a == 0
            // Checked sums: the sizes come from disk and may be anything.
            && self.version_log_bytes.checked_mul(2).and_then(|b| b.checked_add(self.version_log_offset))
                == Some(self.wal_offset)
            && self.wal_bytes % a == 0
            && self.wal_offset.checked_add(self.wal_bytes) == Some(self.slot_offset)
            && self.slot_bytes > 0
            && self.slot_bytes % a == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_follow_each_other() {
        let l = Layout::new(&LayoutOptions::default(), 4096);
        assert!(l.is_consistent());
        assert_eq!(l.mirror_offset(1), l.version_log_offset + l.version_log_bytes);
        assert_eq!(l.slot_count(l.capacity_for(10)), 10);
        assert_eq!(l.slot_count(l.capacity_for(10) + 4096), 10);
        assert_eq!(l.slot_to_offset(2), l.slot_offset + 2 * l.slot_bytes);
    }

    #[test]
    fn bad_sizes_are_refused() {
        let bad = [
            LayoutOptions { slot_bytes: 1000, ..Default::default() },
            LayoutOptions { slot_bytes: 0, ..Default::default() },
            LayoutOptions { version_log_bytes: 4096, ..Default::default() },
            LayoutOptions { wal_bytes: 5, ..Default::default() },
            LayoutOptions { slot_bytes: SLOT_BYTES_MAX + AREA_ALIGN, ..Default::default() },
            LayoutOptions { slot_bytes: u64::MAX, ..Default::default() },
            LayoutOptions {
                version_log_bytes: VERSION_LOG_BYTES_MAX + AREA_ALIGN,
                ..Default::default()
            },
            LayoutOptions { version_log_bytes: u64::MAX, ..Default::default() },
            LayoutOptions { wal_bytes: u64::MAX - 4095, ..Default::default() },
        ];
        for opts in bad {
            assert!(matches!(opts.validate(), Err(Error::InvalidArgument(_))), "{opts:?}");
        }
    }

    #[test]
    fn the_largest_sizes_lay_out_without_overflow() {
        let biggest = LayoutOptions {
            slot_bytes: SLOT_BYTES_MAX,
            version_log_bytes: VERSION_LOG_BYTES_MAX,
            wal_bytes: 1 << 40,
        };
        biggest.validate().unwrap();
        let l = Layout::new(&biggest, 4096);
        assert!(l.is_consistent());
        assert!(l.capacity_for(u32::MAX) <= VOLUME_BYTES_MAX);
        // A slot size need not be a power of two.
        LayoutOptions { slot_bytes: 3 * AREA_ALIGN, ..Default::default() }.validate().unwrap();
    }
}
