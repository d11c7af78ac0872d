//! A device in RAM: no volatile cache, every completed write is "durable". For unit tests and
//! tools; crash behaviour is the simulated device's job.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::device::{Device, DeviceInfo, Queue, QueueOptions};
use crate::error::{Error, Result};
use crate::inline::{InlineQueue, SyncBackend};

/// A RAM-backed device.
#[derive(Debug)]
pub struct MemoryDevice {
    inner: Arc<MemoryBackend>,
}

#[derive(Debug)]
struct MemoryBackend {
    bytes: RwLock<Vec<u8>>,
    block_size: u32,
}

impl MemoryDevice {
    /// A zero-filled device of `capacity` bytes with the given block size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the block size is a power of two of at least 512 and the
    /// capacity a multiple of it.
    pub fn new(capacity: u64, block_size: u32) -> Result<MemoryDevice> {
        Self::from_bytes(vec![0; capacity as usize], block_size)
    }

    /// A device holding `bytes` (an image saved earlier, say).
    ///
    /// # Errors
    /// As [`MemoryDevice::new`].
    pub fn from_bytes(bytes: Vec<u8>, block_size: u32) -> Result<MemoryDevice> {
        if !block_size.is_power_of_two()
            || block_size < 512
            || bytes.len() % block_size as usize != 0
        {
            return Err(Error::InvalidArgument(format!(
                "memory device of {} bytes with block size {block_size}",
                bytes.len()
            )));
        }
        Ok(MemoryDevice {
            inner: Arc::new(MemoryBackend { bytes: RwLock::new(bytes), block_size }),
        })
    }

    /// A copy of the device's bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        self.inner.bytes.read().clone()
    }
}

impl SyncBackend for MemoryBackend {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.bytes.read().len() as u64,
            block_size: self.block_size,
            backend: "memory",
            growable: true,
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let bytes = self.bytes.read();
        buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: u64, buf: &[u8], _durable: bool) -> Result<()> {
        let mut bytes = self.bytes.write();
        bytes[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

impl Device for MemoryDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn open_queue(&self, opts: &QueueOptions) -> Result<Box<dyn Queue>> {
        opts.validate()?;
        Ok(Box::new(InlineQueue::new(self.inner.clone(), opts.depth as usize)))
    }

    fn grow(&self, capacity: u64) -> Result<()> {
        if capacity % u64::from(self.inner.block_size) != 0 {
            return Err(Error::InvalidArgument(format!("capacity {capacity} not block-aligned")));
        }
        let mut bytes = self.inner.bytes.write();
        if capacity as usize > bytes.len() {
            bytes.resize(capacity as usize, 0);
        }
        Ok(())
    }

    /// Zeroes the range, as a file system's punched hole reads.
    fn release_range(&self, offset: u64, len: u64) -> Result<()> {
        crate::device::check_range(&self.info(), "release", offset, len)?;
        let mut bytes = self.inner.bytes.write();
        bytes[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::AlignedBuf;
    use crate::device::{Op, QueueExt, Request};

    #[test]
    fn write_then_read_back() {
        let dev = MemoryDevice::new(1 << 20, 4096).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let mut buf = AlignedBuf::zeroed(8192);
        buf[..3].copy_from_slice(b"abc");
        q.write_at(4096, buf, false).unwrap();
        let back = q.read_at(4096, 4096).unwrap();
        assert_eq!(&back[..3], b"abc");
    }

    #[test]
    fn misaligned_and_out_of_range_requests_are_refused() {
        let dev = MemoryDevice::new(1 << 20, 4096).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let err = q.read_at(512, 4096).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let err = q.read_at(1 << 20, 4096).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn full_queue_answers_busy_and_hands_the_request_back() {
        let dev = MemoryDevice::new(1 << 20, 512).unwrap();
        let mut q = dev.open_queue(&QueueOptions { depth: 2, ..Default::default() }).unwrap();
        for tag in 0..2 {
            q.submit(Request { tag, op: Op::Read { offset: 0, buf: AlignedBuf::zeroed(512) } })
                .unwrap();
        }
        let (err, req) = q
            .submit(Request { tag: 9, op: Op::Read { offset: 0, buf: AlignedBuf::zeroed(512) } })
            .unwrap_err();
        assert!(matches!(err, Error::Busy));
        assert_eq!(req.tag, 9);
        let mut out = Vec::new();
        assert_eq!(q.reap(2, &mut out).unwrap(), 2);
        assert_eq!(out.iter().map(|c| c.tag).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn grow_keeps_contents() {
        let dev = MemoryDevice::new(4096, 4096).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(0, AlignedBuf::padded_copy(b"keep", 4096), true).unwrap();
        dev.grow(3 * 4096).unwrap();
        assert_eq!(dev.info().capacity, 3 * 4096);
        assert_eq!(&q.read_at(0, 4096).unwrap()[..4], b"keep");
        q.read_at(2 * 4096, 4096).unwrap();
    }

    #[test]
    fn a_released_range_reads_as_zeros() {
        let dev = MemoryDevice::new(4 * 4096, 4096).unwrap();
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let mut buf = AlignedBuf::zeroed(4 * 4096);
        buf.fill(7);
        q.write_at(0, buf, true).unwrap();
        dev.allocate_range(0, 4 * 4096).unwrap();
        dev.release_range(4096, 2 * 4096).unwrap();
        let back = q.read_at(0, 4 * 4096).unwrap();
        assert!(back[..4096].iter().chain(&back[3 * 4096..]).all(|&b| b == 7));
        assert!(back[4096..3 * 4096].iter().all(|&b| b == 0));
        assert!(matches!(dev.release_range(4096, 4 * 4096), Err(Error::InvalidArgument(_))));
    }
}
