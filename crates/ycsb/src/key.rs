//! Record keys: `"user"` followed by the decimal FNV-1a hash of the record number, as YCSB's
//! `CoreWorkload.buildKeyName` builds them with its default `insertorder=hashed`.
//!
//! Hashing the number scatters consecutive inserts over the key space, so a load phase is a
//! random-order fill and "latest" records are not clustered at the end of the key order.

/// FNV-1 64-bit offset basis (YCSB's `Utils.FNV_OFFSET_BASIS_64`).
const FNV_OFFSET_BASIS_64: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
/// FNV-1 64-bit prime (YCSB's `Utils.FNV_PRIME_64`).
const FNV_PRIME_64: i64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of `val`, then the
/// absolute value as a Java `long`.
///
/// Java's `Math.abs(Long.MIN_VALUE)` is `Long.MIN_VALUE`; [`i64::wrapping_abs`] keeps that,
/// so the one hash that stays negative prints as YCSB prints it.
///
/// ```
/// assert_eq!(ycsb::key::fnvhash64(0), 6_284_781_860_667_377_211);
/// ```
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        // Java's `>>` is arithmetic, as i64's.
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    hash.wrapping_abs()
}

/// How record numbers become keys (YCSB's `insertorder` and `zeropadding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFormat {
    /// `true` for YCSB's `insertorder=ordered` (keys are the numbers themselves, so inserts
    /// arrive in key order); `false`, the default, hashes the number first.
    pub ordered_inserts: bool,
    /// Pad the decimal number with zeros on the left to at least this many digits (YCSB's
    /// `zeropadding`, default 1: no padding).
    pub zero_padding: usize,
}

impl Default for KeyFormat {
    fn default() -> KeyFormat {
        KeyFormat { ordered_inserts: false, zero_padding: 1 }
    }
}

impl KeyFormat {
    /// The key of record `keynum` (YCSB's `CoreWorkload.buildKeyName`).
    ///
    /// ```
    /// use ycsb::key::KeyFormat;
    ///
    /// assert_eq!(KeyFormat::default().key(0), "user6284781860667377211");
    /// let ordered = KeyFormat { ordered_inserts: true, zero_padding: 8 };
    /// assert_eq!(ordered.key(5), "user00000005");
    /// ```
    pub fn key(&self, keynum: u64) -> String {
        let mut out = String::with_capacity(24);
        self.write_key(keynum, &mut out);
        out
    }

    /// Writes the key of record `keynum` into `out` (cleared first), reusing its allocation.
    pub fn write_key(&self, keynum: u64, out: &mut String) {
        use std::fmt::Write;
        out.clear();
        // YCSB numbers records with Java longs; record numbers stay far below 2^63.
        let n = if self.ordered_inserts { keynum as i64 } else { fnvhash64(keynum as i64) };
        out.push_str("user");
        let width = self.zero_padding;
        // As Java's loop: zeros between "user" and the number up to `zero_padding` characters.
        write!(out, "{n:0width$}").expect("writing to a String cannot fail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_ycsb() {
        // The first keys of every YCSB load with default settings.
        let f = KeyFormat::default();
        assert_eq!(f.key(0), "user6284781860667377211");
        assert_eq!(f.key(1), "user8517097267634966620");
        assert_eq!(f.key(2), "user1820151046732198393");
        assert_eq!(f.key(3), "user4052466453699787802");
    }

    #[test]
    fn hashes_are_never_negative_but_for_min() {
        for v in 0..10_000 {
            assert!(fnvhash64(v) >= 0);
        }
        assert_eq!(i64::MIN.wrapping_abs(), i64::MIN);
    }

    #[test]
    fn padding_applies_to_short_numbers_only() {
        let f = KeyFormat { ordered_inserts: true, zero_padding: 3 };
        assert_eq!(f.key(7), "user007");
        assert_eq!(f.key(12345), "user12345");
        let mut s = String::from("junk");
        KeyFormat { ordered_inserts: true, zero_padding: 1 }.write_key(42, &mut s);
        assert_eq!(s, "user42");
    }
}
