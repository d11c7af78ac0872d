//! shale's io layer: devices, queues and completions.
//!
//! This layer knows bytes, offsets, alignment, queues and completions, and nothing about keys.
//! Every byte shale writes reaches a device through it, so every test above can swap in the
//! simulated device.
//!
//! ```
//! use shale_io::{AlignedBuf, Device, MemoryDevice, QueueExt, QueueOptions};
//!
//! let dev = MemoryDevice::new(1 << 20, 4096)?;
//! let mut queue = dev.open_queue(&QueueOptions::default())?;
//! queue.write_at(0, AlignedBuf::padded_copy(b"hello", 4096), true)?;
//! assert_eq!(&queue.read_at(0, 4096)?[..5], b"hello");
//! # Ok::<(), shale_io::Error>(())
//! ```

pub mod affinity;
mod buf;
mod buffered;
mod cpu_priority;
mod device;
mod dispatch;
mod error;
mod error_kind;
mod file;
mod inline;
mod io_priority;
mod memory;
mod pread;
mod queue_pairs;
mod sim;
mod sync;
mod throttle;
pub mod ticket;
mod uring;

pub use buf::{AlignedBuf, BUF_ALIGN, SECTOR_SIZE};
pub use buffered::{BufferedReader, BufferedWriter};
pub use cpu_priority::{CpuPriority, set_thread_cpu_priority, thread_cpu_priority};
pub use device::{
    Completion, Device, DeviceInfo, DeviceRef, Op, PollMode, QUEUE_DEPTH_MAX, Queue, QueueExt,
    QueueOptions, Request, SqPoll, check_range, check_request,
};
pub use dispatch::{Dispatcher, Weights};
pub use error::{Chain, Error, OpKind, PathOp, Result};
pub use error_kind::ErrorKind;
pub use file::{
    Backend, FILE_BLOCK_SIZE, FileDevice, FileOptions, file_kind, open_device,
    open_device_read_only,
};
pub use inline::{InlineQueue, SyncBackend};
pub use io_priority::{IdleIo, IoPriority, at_own_io_priority, thread_io_priority};
pub use memory::MemoryDevice;
pub use queue_pairs::{
    Affinity, PairCpus, PairStats, PollerWait, QUEUE_PAIRS_MAX, QueuePairOptions, QueuePairs,
};
pub use sim::{Damage, Fault, FaultPlan, SimDevice, SimStats};
pub use throttle::{Profile, THROTTLE_BURST, ThrottledDevice};
