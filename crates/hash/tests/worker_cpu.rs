//! `HashOptions::worker_cpu`: the store's worker thread runs on the CPU it names, and only
//! there (KVSB's `--pin` gives each shard one core for its client and its worker). A test
//! binary of its own, so that its store's worker is the only thread of that name.

mod common;

use shale_hash::{HashOptions, StoreMode};
use shale_io::affinity;

/// The worker thread's name as the kernel keeps it (15 bytes of "shale-hash-worker").
const WORKER: &str = "shale-hash-work";

#[test]
fn the_worker_runs_on_the_cpu_the_options_name() {
    let allowed = affinity::process_cpus();
    let last = allowed.len() - 1;
    let d = common::sim(4, 7);
    let store =
        common::open(&d, &HashOptions { worker_cpu: Some(last), ..common::small_options() });
    // The worker pins itself as it starts. A synchronous call may be served on the caller's
    // thread (run to completion) before the worker's thread has run at all; a submission is
    // the thread's to serve, so once it is answered the thread has started.
    store.submit_store(b"key-0001", b"value", StoreMode::Overwrite).unwrap().wait().unwrap();
    assert_eq!(store.retrieve(b"key-0001").unwrap().as_deref(), Some(&b"value"[..]));
    let cpus = |name: &str| -> Vec<Vec<usize>> {
        affinity::threads_named(name).into_iter().map(|(_, cpus)| cpus).collect()
    };
    assert_eq!(cpus(WORKER), [vec![allowed[last]]]);
    store.close();

    // Unpinned by default: the worker may run wherever the process may.
    let store = common::open(&common::sim(4, 8), &common::small_options());
    store.submit_store(b"key-0002", b"value", StoreMode::Overwrite).unwrap().wait().unwrap();
    assert_eq!(cpus(WORKER), [allowed]);
    store.close();
}
