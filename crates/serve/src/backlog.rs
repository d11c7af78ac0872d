//! The replication backlog (issue #46, part 1): the last `repl-backlog-size` bytes of a
//! master's command stream, by replication offset, so that a replica that lost its link for
//! a moment resumes with the bytes it missed (`PSYNC <replid> <offset>` answered
//! `+CONTINUE`) instead of a full resync. Redis keeps the same: a ring of the stream's bytes
//! and the offset of its first byte.
//!
//! Offsets are Redis's: the replication offset counts every byte of the stream since the
//! replication id began, and a replica asking for offset `o` has applied the bytes before `o`
//! and wants those from `o` on.

use std::collections::VecDeque;

/// The last bytes of the command stream.
#[derive(Debug)]
pub struct Backlog {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// The offset just past the stream's last byte: the master's replication offset.
    end: u64,
}

impl Backlog {
    /// A backlog of `capacity` bytes (Redis's `repl-backlog-size`, 1 MiB by default) for a
    /// stream at offset `start`.
    pub fn new(capacity: usize, start: u64) -> Backlog {
        Backlog {
            bytes: VecDeque::with_capacity(capacity.min(1 << 20)),
            capacity: capacity.max(1),
            end: start,
        }
    }

    /// Appends stream bytes (whole encoded commands); returns the offset past them.
    pub fn append(&mut self, data: &[u8]) -> u64 {
        self.end += data.len() as u64;
        if data.len() >= self.capacity {
            self.bytes.clear();
            self.bytes.extend(&data[data.len() - self.capacity..]);
        } else {
            let over = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
            self.bytes.drain(..over);
            self.bytes.extend(data);
        }
        self.end
    }

    /// The offset past the last byte: the master's replication offset.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The offset of the first byte held.
    pub fn start(&self) -> u64 {
        self.end - self.bytes.len() as u64
    }

    /// The bytes from `offset` to the end, if the backlog still holds them all (a replica
    /// asking for the end gets nothing to send, which is still a partial resync); `None`
    /// when `offset` is before the first byte held or past the end: a full resync then.
    pub fn since(&self, offset: u64) -> Option<Vec<u8>> {
        if offset < self.start() || offset > self.end {
            return None;
        }
        let skip = (offset - self.start()) as usize;
        Some(self.bytes.iter().skip(skip).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_resumes_from_any_offset_still_held() {
        let mut b = Backlog::new(10, 100);
        assert_eq!(b.since(100), Some(vec![]), "nothing missed at the end");
        assert_eq!(b.append(b"abcd"), 104);
        assert_eq!(b.since(101), Some(b"bcd".to_vec()));
        assert_eq!(b.append(b"efghij"), 110);
        assert_eq!((b.start(), b.end()), (100, 110));
        assert_eq!(b.since(100), Some(b"abcdefghij".to_vec()));
        // Past capacity, the oldest bytes go: asking for them means a full resync.
        b.append(b"kl");
        assert_eq!(b.start(), 102);
        assert_eq!(b.since(101), None);
        assert_eq!(b.since(102), Some(b"cdefghijkl".to_vec()));
        assert_eq!(b.since(113), None, "an offset the master never reached");
    }

    #[test]
    fn an_append_larger_than_the_backlog_keeps_its_tail() {
        let mut b = Backlog::new(4, 0);
        b.append(b"xy");
        assert_eq!(b.append(b"0123456789"), 12);
        assert_eq!(b.since(8), Some(b"6789".to_vec()));
        assert_eq!(b.since(7), None);
    }

    #[test]
    fn the_bytes_held_are_always_the_streams_last_ones() {
        // Against a model: the whole stream kept.
        let mut stream = Vec::new();
        let mut b = Backlog::new(37, 5);
        for i in 0..500u32 {
            let chunk: Vec<u8> = (0..(i * 7 % 23)).map(|k| (i + k) as u8).collect();
            b.append(&chunk);
            stream.extend_from_slice(&chunk);
            let end = 5 + stream.len() as u64;
            assert_eq!(b.end(), end);
            for back in 0..40u64 {
                let Some(offset) = end.checked_sub(back) else { continue };
                let want = (back <= 37.min(stream.len() as u64))
                    .then(|| stream[(offset - 5) as usize..].to_vec());
                assert_eq!(b.since(offset), want, "i {i}, back {back}");
            }
        }
    }
}
