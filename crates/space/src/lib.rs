//! shale's space layer, after LDS: a volume of fixed slots and a self-describing version log
//! on a raw device, with no file system underneath.
//!
//! It knows slots, extents, log objects and version records, and carries the engines'
//! metadata as opaque bytes; it knows nothing about keys. See `docs/space.md` for the design.
//!
//! ```
//! use std::sync::Arc;
//! use shale_io::MemoryDevice;
//! use shale_space::{Edit, EngineKind, LayoutOptions, Volume, VolumeOptions};
//!
//! let device = Arc::new(MemoryDevice::new(16 << 20, 4096)?);
//! let opts = VolumeOptions {
//!     layout: LayoutOptions { slot_bytes: 1 << 20, version_log_bytes: 256 << 10, wal_bytes: 1 << 20 },
//!     engine: Some(EngineKind::Lsm), // whose store a new volume is (its header says so)
//!     ..VolumeOptions::default()
//! };
//! let volume = Volume::open(device.clone(), &opts)?.volume;
//! let extent = volume.allocate(2)?;            // an SST would be written here
//! let edit = Edit { added: vec![extent], engine: b"L0 +sst".to_vec(), ..Edit::default() };
//! volume.commit(&edit, &mut || b"full engine state".to_vec())?;
//! drop(volume);
//!
//! let reopened = Volume::open(device, &opts)?;
//! assert_eq!(reopened.volume.live_extents(), vec![extent]);
//! assert_eq!(reopened.versions.deltas[0].engine, b"L0 +sst");
//! # Ok::<(), shale_space::Error>(())
//! ```

mod allocator;
mod checkpoint_dir;
pub mod clock_cache;
pub mod codec;
pub mod contention;
mod counters;
mod engine_kind;
mod error;
pub mod header;
pub mod index_page;
mod instance;
mod layout;
pub mod log_object;
pub mod log_page;
pub mod page_log;
pub mod queues;
pub mod store_lock;
pub mod tier;
mod version_log;
pub mod version_record;
mod volume;
mod volume_path;

pub use allocator::SlotUsage;
pub use checkpoint_dir::CheckpointDir;
pub use counters::{ClassSnapshot, IoClass, VolumeQueue};
pub use engine_kind::EngineKind;
pub use error::{Error, Result};
pub use instance::instance_id;
pub use layout::{AREA_ALIGN, HEADER_AREA_BYTES, Layout, LayoutOptions, VERSION_LOG_BYTES_MIN};
pub use queues::{PoolSpec, PooledQueue, QueueStats, Queues};
pub use shale_io::ErrorKind;
pub use store_lock::StoreLock;
pub use tier::{CAPACITY_ADDRESS_BIT, Role, Tier};
pub use version_log::{LogState, Versions};
pub use version_record::{BaseRecord, DeltaRecord, Extent};
pub use volume::{CommitKind, DamagedCopy, Edit, Opened, Volume, VolumeOptions, hex};
pub use volume_path::{VOLUME_FILE_NAME, volume_file};
