//! Which engine a volume belongs to, recorded in its format header (format 3 on).
//!
//! Why in the header: a volume is one engine's store, and a tool or an engine given the wrong
//! one must refuse it before writing a byte. Before format 3 an engine could tell only by
//! reading the version log and sniffing the other engines' payloads, so every entry point had
//! to know every engine's private framing, and a blank-looking payload (a store that never
//! committed) told nothing. The header is read first, by everyone, and is written once.
//!
//! Volumes written before format 3 carry no kind ([`crate::header::Header::engine`] is `None`):
//! the engines keep recognising those by their payloads, and a volume none of them claims is
//! an lsm store, the only engine shale had when those formats were written.

/// The engine whose store a volume is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The LSM-tree key-value engine (`shale-lsm`).
    Lsm,
    /// The hash-indexed log-structured engine (`shale-hash`).
    Hash,
    /// The table engine (`shale-table`).
    Table,
}

impl EngineKind {
    /// Every kind, in code order.
    pub const ALL: [EngineKind; 3] = [EngineKind::Lsm, EngineKind::Hash, EngineKind::Table];

    /// The header's code for the kind (0 is never written: it reads as damage).
    pub fn code(self) -> u32 {
        match self {
            EngineKind::Lsm => 1,
            EngineKind::Hash => 2,
            EngineKind::Table => 3,
        }
    }

    /// The kind of a header code, `None` for an unknown one.
    pub fn from_code(code: u32) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The store's name with its article, for messages ("an lsm store", "a hash store").
    pub fn a_store(self) -> &'static str {
        match self {
            EngineKind::Lsm => "an lsm store",
            EngineKind::Hash => "a hash store",
            EngineKind::Table => "a table store",
        }
    }

    /// The engine's name as users see it ("lsm", "hash", "table").
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Lsm => "lsm",
            EngineKind::Hash => "hash",
            EngineKind::Table => "table",
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_zero_is_no_kind() {
        for k in EngineKind::ALL {
            assert_eq!(EngineKind::from_code(k.code()), Some(k));
        }
        assert_eq!(EngineKind::from_code(0), None);
        assert_eq!(EngineKind::from_code(4), None);
    }
}
