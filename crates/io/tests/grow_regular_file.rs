//! Scenario: a device over a regular file grows; the new size is on disk and usable at once,
//! and old contents stay.

mod common;

use shale_io::{Error, FileOptions, QueueExt, QueueOptions, open_device};

#[test]
fn grow_extends_the_file_durably() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let path = dir.path().join(backend.name());
        let dev = common::new_device(dir.path(), backend.name(), 64 * 1024, backend);
        assert!(dev.info().growable);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(0, common::pattern(4096, 1), true).unwrap();
        assert!(matches!(q.read_at(64 * 1024, 4096), Err(Error::InvalidArgument(_))));

        assert!(matches!(dev.grow(100_000), Err(Error::InvalidArgument(_))));
        dev.grow(1 << 20).unwrap();
        assert_eq!(dev.info().capacity, 1 << 20);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        // Sparse: the new range takes no storage until it is allocated.
        use std::os::unix::fs::MetadataExt;
        let on_disk = std::fs::metadata(&path).unwrap().blocks() * 512;
        assert!(on_disk < 512 * 1024, "{on_disk} bytes on disk after growing to 1 MiB");
        // Shrinking is not growing: a smaller capacity leaves the device as it is.
        dev.grow(4096).unwrap();
        assert_eq!(dev.info().capacity, 1 << 20);

        q.write_at((1 << 20) - 4096, common::pattern(4096, 2), false).unwrap();
        assert_eq!(&q.read_at(0, 4096).unwrap()[..], &common::pattern(4096, 1)[..]);
        drop(q);
        drop(dev);
        let dev = open_device(&path, &FileOptions { backend, ..FileOptions::default() }).unwrap();
        assert_eq!(dev.info().capacity, 1 << 20);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        assert_eq!(&q.read_at((1 << 20) - 4096, 4096).unwrap()[..], &common::pattern(4096, 2)[..]);
    }
}
