//! SSTs: immutable sorted runs of internal keys, built and streamed into an extent of slots
//! (LDS's chunks), read back through the block cache.
//!
//! - `format`: the image layout, block trailers and handles, compression, properties.
//! - `block`: data and index blocks (prefix-compressed entries, restart points).
//! - `bloom`: the filter over user keys.
//! - `footer`: the fixed footer at the very end of the image.
//! - `range_del_block`: the range tombstones (format version 2 on).
//! - `builder` / `reader`: making and reading an image.
//! - `prepopulate`: caching a new image's blocks as it is written.
//! - `release`, `release_queue`, `release_thread`: giving back a dropped SST's extent off the
//!   callers' threads.
//! - `volume_io`: the pool of queues and page-cache descriptors SSTs are read and written
//!   through, and reading an SST in an extent.
//! - `writer`: streaming an SST into an extent while it is built.
//!
//! ```
//! use std::sync::Arc;
//! use shale_lsm::cache::BlockCache;
//! use shale_lsm::iter::InternalIterator;
//! use shale_lsm::key::{self, Kind};
//! use shale_lsm::sst::{IndexAndFilter, SstBuilder, SstOptions, SstReader, bloom_hash};
//!
//! let mut builder = SstBuilder::new(&SstOptions::default());
//! builder.add(&key::encode(b"apple", 7, Kind::Put), b"red");
//! builder.add(&key::encode(b"pear", 3, Kind::Put), b"green");
//! let image = builder.finish(4096); // whole 4 KiB slots, the footer in the last bytes
//! assert_eq!(image.bytes.len(), 4096);
//!
//! // Any BlockSource will do; an extent on a volume is `VolumeSource`.
//! let cache = Arc::new(BlockCache::new(8 << 20));
//! let reader = SstReader::open(Arc::new(image.bytes.to_vec()), cache, 1, IndexAndFilter::Held)?;
//! let lookup = key::encode(b"apple", 9, Kind::SEEK); // what a read at sequence 9 sees
//! let (found, value) = reader.get(&lookup, bloom_hash(b"apple"))?.expect("present");
//! assert_eq!((key::parse(&found).unwrap().seq, &value[..]), (7, &b"red"[..]));
//! assert_eq!(reader.get(&key::encode(b"apple", 5, Kind::SEEK), bloom_hash(b"apple"))?, None);
//!
//! let mut it = reader.iter();
//! it.seek_to_last();
//! assert_eq!(key::user_key(it.key()), b"pear");
//! # Ok::<(), shale_lsm::Error>(())
//! ```

pub mod block;
pub mod bloom;
pub mod builder;
pub mod footer;
pub mod format;
pub(crate) mod held_room;
pub mod prepopulate;
pub mod range_del_block;
pub mod reader;
pub(crate) mod release;
pub(crate) mod release_queue;
pub(crate) mod release_thread;
pub mod volume_io;
pub mod writer;

pub use bloom::bloom_hash;
pub use builder::{BlockSink, SstBuilder, SstImage, SstOptions};
pub use format::{Compression, SstProperties};
pub use prepopulate::{data_block_sink, prepopulate_meta_blocks};
pub use reader::{
    BlockSource, IndexAndFilter, PendingRead, Probe, SourceBytes, SstIter, SstReader,
};
pub use volume_io::{PageCacheFiles, QueuePool, SstBytesRead, SstBytesWritten, VolumeSource};
pub use writer::SstWriter;

use crate::error::Error;
// `release_queue` names its primitives as `super::sync`, so that lsm-model can hand it shuttle's.
use crate::sync;

/// A copy of an error an iterator keeps, for [`crate::iter::InternalIterator::status`], which
/// may be asked any number of times while [`Error`] cannot be cloned (it carries
/// `std::io::Error`). The copy keeps the variant, fields and message.
pub(crate) fn duplicate_error(e: &Error) -> Error {
    match e {
        Error::Io(io) => Error::Io(duplicate_io_error(io)),
        Error::Corruption { what, offset } => {
            Error::Corruption { what: what.clone(), offset: *offset }
        }
        Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
        Error::NoSpace(s) => Error::NoSpace(s.clone()),
        Error::Busy => Error::Busy,
        Error::Stopped(s) => Error::Stopped(s.clone()),
        Error::InUse(s) => Error::InUse(s.clone()),
        Error::ReadOnly(s) => Error::ReadOnly(s.clone()),
        Error::NotLsmStore(s) => Error::NotLsmStore(s.clone()),
        // The space layer's leftover variants (foreign or newer volumes) never come out of
        // block reads; keep the message if one ever does.
        Error::Space(s) => Error::Io(shale_io::Error::Unsupported(s.to_string())),
    }
}

fn duplicate_io_error(e: &shale_io::Error) -> shale_io::Error {
    use shale_io::Error as E;
    match e {
        E::Io { op, offset, source } => E::Io {
            op: *op,
            offset: *offset,
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        E::NoSpace { offset } => E::NoSpace { offset: *offset },
        E::Busy => E::Busy,
        E::InvalidArgument(s) => E::InvalidArgument(s.clone()),
        E::Unsupported(s) => E::Unsupported(s.clone()),
        other => E::Unsupported(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
