//! Where each area of a volume lies.
//!
//! ```text
//! byte 0        4096          8192          +L            +2L         +W
//! | header A    | header B    | version log | version log | WAL area  | slot area ...       |
//! | (1 sector)  | (1 sector)  | mirror A    | mirror B    | 4 KiB pages| slot 0 | slot 1 | ...|
//! ```
//! Every area starts on a 4 KiB boundary (O_DIRECT on files needs it, WAL pages are 4 KiB).
//! The slot count is not stored: it follows from the device's capacity, so a volume file grows
//! by growing the file.

use crate::error::{Error, Result};

/// Alignment of every area and of the slot size.
pub const AREA_ALIGN: u64 = 4096;
/// Bytes reserved for the two header copies.
pub const HEADER_AREA_BYTES: u64 = 2 * AREA_ALIGN;

/// Sizes a new volume is created with. Ignored when opening an existing volume, whose header
/// says how it was laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutOptions {
    /// Size of one slot, the allocation unit of the slot area (a multiple of 4 KiB).
    pub slot_bytes: u64,
    /// Size of each of the two version log mirrors (a multiple of 4 KiB, at least 64 KiB).
    pub version_log_bytes: u64,
    /// Size of the WAL area kept for the lsm engine's WAL (a multiple of 4 KiB; may be 0).
    pub wal_bytes: u64,
}

impl Default for LayoutOptions {
    fn default() -> LayoutOptions {
        LayoutOptions { slot_bytes: 1 << 20, version_log_bytes: 8 << 20, wal_bytes: 256 << 20 }
    }
}

/// Smallest version log mirror: room for a base, its deltas and a second base while trimming.
pub const VERSION_LOG_BYTES_MIN: u64 = 64 << 10;

impl LayoutOptions {
    /// Checks the sizes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad size.
    pub fn validate(&self) -> Result<()> {
        let aligned = |v: u64| v % AREA_ALIGN == 0;
        if self.slot_bytes == 0 || !aligned(self.slot_bytes) {
            return Err(Error::InvalidArgument(format!(
                "slot size {} must be a positive multiple of {AREA_ALIGN}",
                self.slot_bytes
            )));
        }
        if self.version_log_bytes < VERSION_LOG_BYTES_MIN || !aligned(self.version_log_bytes) {
            return Err(Error::InvalidArgument(format!(
                "version log size {} must be a multiple of {AREA_ALIGN} of at least {VERSION_LOG_BYTES_MIN}",
                self.version_log_bytes
            )));
        }
        if !aligned(self.wal_bytes) {
            return Err(Error::InvalidArgument(format!(
                "WAL area size {} must be a multiple of {AREA_ALIGN}",
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
        ];
        for opts in bad {
            assert!(matches!(opts.validate(), Err(Error::InvalidArgument(_))), "{opts:?}");
        }
    }
}
