//! Tiers: a store's space over a fast volume and, optionally, a capacity volume (SpanDB).
//!
//! The fast volume holds the version log, the WAL area and slots; the capacity volume holds
//! slots only (its version log area is left a hole and never written). One version log, on
//! the fast volume, names the extents of both, each with its tier, so a commit stays one
//! atomic write however many volumes it touches.
//!
//! Byte addresses. An engine reads and writes SSTs by byte address ([`crate::Volume::extent_range`],
//! queues from [`crate::Volume::queue`]); an address names a tier in its top bit and the byte
//! on that tier's device in the rest:
//!
//! ```text
//! bit 63      bits 62..0
//! | tier    | byte offset on the tier's device (a volume is at most i64::MAX bytes) |
//!   0 = fast (so a store without a capacity volume sees plain device offsets)
//!   1 = capacity
//! ```
//! Addresses live only in memory: nothing on disk holds one.

/// Which volume of a store an extent is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Tier {
    /// The volume holding the version log and the WAL (a store's only volume when it has no
    /// capacity volume).
    #[default]
    Fast = 0,
    /// The capacity volume: slots only.
    Capacity = 1,
}

/// The address bit that names the capacity tier.
pub const CAPACITY_ADDRESS_BIT: u64 = 1 << 63;

impl Tier {
    /// Both tiers, in index order.
    pub const ALL: [Tier; 2] = [Tier::Fast, Tier::Capacity];

    /// Index of the tier in per-tier arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Fast => "fast",
            Tier::Capacity => "capacity",
        }
    }

    /// The address of byte `offset` of this tier's device.
    pub fn address(self, offset: u64) -> u64 {
        debug_assert!(offset < CAPACITY_ADDRESS_BIT, "device offset {offset} overflows an address");
        match self {
            Tier::Fast => offset,
            Tier::Capacity => offset | CAPACITY_ADDRESS_BIT,
        }
    }

    /// The tier an address names, and the byte offset on that tier's device.
    pub fn split(address: u64) -> (Tier, u64) {
        if address & CAPACITY_ADDRESS_BIT == 0 {
            (Tier::Fast, address)
        } else {
            (Tier::Capacity, address & !CAPACITY_ADDRESS_BIT)
        }
    }
}

/// What a volume is, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A store's only volume (every volume made before tiers existed).
    Single,
    /// The fast volume of a tiered store; the header names its capacity volume.
    Fast,
    /// The capacity volume of a tiered store; the header names its fast volume.
    Capacity,
}

impl Role {
    /// The header's code for the role.
    pub fn code(self) -> u32 {
        match self {
            Role::Single => 0,
            Role::Fast => 1,
            Role::Capacity => 2,
        }
    }

    /// The role of a header code, if it is one.
    pub fn from_code(code: u32) -> Option<Role> {
        match code {
            0 => Some(Role::Single),
            1 => Some(Role::Fast),
            2 => Some(Role::Capacity),
            _ => None,
        }
    }

    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Single => "single",
            Role::Fast => "fast",
            Role::Capacity => "capacity",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_fast_ones_are_offsets() {
        for offset in [0, 4096, (1 << 40) + 7, i64::MAX as u64] {
            assert_eq!(Tier::split(Tier::Fast.address(offset)), (Tier::Fast, offset));
            assert_eq!(Tier::split(Tier::Capacity.address(offset)), (Tier::Capacity, offset));
            assert_eq!(Tier::Fast.address(offset), offset);
        }
        for role in [Role::Single, Role::Fast, Role::Capacity] {
            assert_eq!(Role::from_code(role.code()), Some(role));
        }
        assert_eq!(Role::from_code(3), None);
    }
}
