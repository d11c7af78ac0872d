//! Expired keys leave the store when compaction meets them (`ExpiredKeys`), not only when a
//! read finds them: a key that is never read again stops taking space.

use std::sync::Arc;

use shale_lsm::{Db, Options};
use shale_serve::ExpiredKeys;
use shale_serve::keyspace::{engine_key, now_ms};
use shale_serve::value::Value;

#[test]
fn compaction_drops_expired_keys_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let opts =
        Options { compaction_filter: Some(Arc::new(ExpiredKeys)), ..Options::small_for_tests() };
    let db = Db::open(dir.path(), opts).unwrap();
    let now = now_ms();
    let expired = Value { expires_at_ms: Some(now - 1), data: b"gone".to_vec() };
    let later = Value { expires_at_ms: Some(now + 3_600_000), data: b"later".to_vec() };
    let forever = Value::new(b"forever".to_vec());
    for i in 0..200u32 {
        let v = match i % 3 {
            0 => &expired,
            1 => &later,
            _ => &forever,
        };
        db.put(&engine_key(format!("key{i:03}").as_bytes()), &v.encode()).unwrap();
    }
    db.compact_range().unwrap();
    for i in 0..200u32 {
        let got = db.get(&engine_key(format!("key{i:03}").as_bytes())).unwrap();
        match i % 3 {
            0 => assert_eq!(got, None, "key{i:03} expired"),
            1 => assert_eq!(got, Some(later.encode())),
            _ => assert_eq!(got, Some(forever.encode())),
        }
    }
    assert_eq!(db.stats().compaction_filter_removals, 67);
}
