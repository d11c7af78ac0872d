//! Scenario: write, flush and read back through each file backend over O_DIRECT.

mod common;

use shale_io::{QueueExt, QueueOptions};

#[test]
fn write_flush_read_round_trip_on_each_backend() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let dev = common::new_device(dir.path(), backend.name(), 1 << 20, backend);
        assert_eq!(dev.info().backend, backend.name());
        assert_eq!(dev.info().capacity, 1 << 20);
        assert_eq!(dev.info().block_size, 4096);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        for (i, len) in [4096usize, 8192, 65536].into_iter().enumerate() {
            let offset = (i as u64) * 131072;
            let data = common::pattern(len, i as u64);
            let back = q.write_at(offset, data.clone(), false).unwrap();
            assert_eq!(&back[..], &data[..], "write hands its buffer back unchanged");
            q.flush().unwrap();
            assert_eq!(&q.read_at(offset, len).unwrap()[..], &data[..], "{backend:?} len {len}");
        }
        // Bytes never written read as zeros: the file was pre-allocated, not left with garbage.
        assert!(q.read_at(900 * 1024, 4096).unwrap().iter().all(|&b| b == 0));
    }
}

#[test]
fn data_survives_reopening_the_device() {
    let dir = common::scratch_dir();
    let data = common::pattern(16384, 9);
    {
        let dev = common::new_device(dir.path(), "f", 1 << 20, shale_io::Backend::Uring);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(4096, data.clone(), true).unwrap();
    }
    let dev = common::new_device(dir.path(), "f", 1 << 20, shale_io::Backend::Pread);
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    assert_eq!(&q.read_at(4096, 16384).unwrap()[..], &data[..]);
}
