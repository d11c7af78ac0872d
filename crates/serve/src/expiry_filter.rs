//! Expired keys dropped by compaction: the store's [`CompactionFilter`] for `shale serve`.
//!
//! A key's expiry lives in its value ([`crate::value`]); reads treat a key past it as missing
//! and delete it when they meet it. A key that is never read again would keep its bytes for
//! ever: compaction asks this filter about each newest value it rewrites, and an expired one
//! becomes a tombstone (the engine's rule, at `shale_lsm::CompactionFilter`: never a value a
//! snapshot reads below, never an older version brought back).

use shale_lsm::CompactionFilter;

use crate::keyspace::{DB0, now_ms};
use crate::value;

/// Removes database-0 values whose expiry has passed. Values that do not decode (a store
/// written by another tool) and keys outside database 0 are kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExpiredKeys;

impl CompactionFilter for ExpiredKeys {
    fn name(&self) -> &str {
        "shale-serve-expired-keys"
    }

    fn remove(&self, key: &[u8], value: &[u8]) -> bool {
        key.first() == Some(&DB0)
            && matches!(value::decode_parts(value), Ok((Some(at), _)) if at <= now_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::engine_key;
    use crate::value::Value;

    #[test]
    fn only_expired_values_of_database_zero_are_removed() {
        let now = now_ms();
        let past = Value { expires_at_ms: Some(now - 1), data: b"x".to_vec() }.encode();
        let future = Value { expires_at_ms: Some(now + 60_000), data: b"x".to_vec() }.encode();
        let forever = Value::new(b"x".to_vec()).encode();
        let k = engine_key(b"k");
        assert!(ExpiredKeys.remove(&k, &past));
        assert!(!ExpiredKeys.remove(&k, &future));
        assert!(!ExpiredKeys.remove(&k, &forever));
        assert!(!ExpiredKeys.remove(b"\xffother", &past), "not database 0");
        assert!(!ExpiredKeys.remove(&k, b""), "not serve's format");
    }
}
