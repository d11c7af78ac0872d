//! Scenario: odd requests. A file that shrinks under an open device makes the kernel return
//! short reads: the backend must resubmit the rest and then report the end of the file, not
//! spin or hand back a half-filled buffer as success. Also: one big request, the last block,
//! reaping nothing.

mod common;

use std::io::ErrorKind;

use shale_io::{Error, QueueExt, QueueOptions};

#[test]
fn a_read_past_a_shrunken_file_fails_with_eof() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let path = dir.path().join(backend.name());
        let dev = common::new_device(dir.path(), backend.name(), 1 << 20, backend);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        q.write_at(0, common::pattern(65536, 4), true).unwrap();
        // Someone truncates the file behind the device's back; its capacity is now stale.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(8192).unwrap();
        // The first transfer moves 8 KiB, the resubmitted rest moves nothing.
        match q.read_at(4096, 16384) {
            Err(Error::Io { source, offset, .. }) => {
                assert_eq!(source.kind(), ErrorKind::UnexpectedEof, "{backend:?}");
                assert_eq!(offset, 8192, "{backend:?}: error names where the file ended");
            }
            other => panic!("{backend:?}: expected EOF, got {other:?}"),
        }
        assert_eq!(&q.read_at(4096, 4096).unwrap()[..], &common::pattern(65536, 4)[4096..8192]);
    }
}

#[test]
fn big_requests_last_block_and_empty_reaps() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let dev = common::new_device(dir.path(), backend.name(), 32 << 20, backend);
        let mut q = dev.open_queue(&QueueOptions { depth: 1, ..Default::default() }).unwrap();
        let mut out = Vec::new();
        assert_eq!(q.reap(0, &mut out).unwrap(), 0);
        q.write_at(4 << 20, common::pattern(16 << 20, 6), false).unwrap();
        assert_eq!(&q.read_at(4 << 20, 16 << 20).unwrap()[..], &common::pattern(16 << 20, 6)[..]);
        q.write_at((32 << 20) - 4096, common::pattern(4096, 8), false).unwrap();
        assert_eq!(&q.read_at((32 << 20) - 4096, 4096).unwrap()[..], &common::pattern(4096, 8)[..]);
    }
}
