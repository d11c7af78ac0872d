//! The asynchronous kvs API: submissions return at once with tickets that complete exactly
//! once; a full queue answers Busy and queues nothing; concurrent stores share batches and
//! pages (group commit); tickets are futures under tokio and under a plain executor; sync and
//! async calls mix on one store; closing completes every outstanding ticket.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use shale_hash::{Error, HashOptions, HashStore, HashTicket, StoreMode};

#[test]
fn a_full_queue_answers_busy_and_every_accepted_store_completes_once() {
    let d = sim(4, 31);
    let store = open(&d, &HashOptions { queue_depth: 4, ..small_options() });
    let mut accepted: Vec<(u32, HashTicket<()>)> = Vec::new();
    let mut busy = 0;
    for i in 0..2000u32 {
        match store.submit_store(format!("key-{i:05}").as_bytes(), &[1; 100], StoreMode::Overwrite)
        {
            Ok(t) => accepted.push((i, t)),
            Err(Error::Busy) => busy += 1,
            Err(e) => panic!("submission {i}: {e}"),
        }
        // Take what completed, without waiting, as a caller polling its tickets would.
        accepted.retain_mut(|(_, t)| match t.try_take() {
            Some(r) => {
                r.unwrap();
                assert!(t.try_take().is_none(), "a result is handed out once");
                false
            }
            None => true,
        });
    }
    for (_, t) in accepted {
        t.wait().unwrap();
    }
    let stats = store.stats();
    assert!(busy > 0, "2000 submissions into a queue of 4 met no Busy");
    assert_eq!(stats.busy, busy);
    assert_eq!(stats.stores + busy, 2000, "every submission stored exactly once or refused");
    assert_eq!(stats.keys, stats.stores);
    drop(store);
    let store = open(&d, &small_options());
    assert_eq!(store.stats().keys + busy, 2000, "what was acknowledged survives a reopen");
}

#[test]
fn concurrent_submissions_share_batches_and_pages() {
    let d = sim(4, 32);
    let store = open(&d, &small_options());
    let tickets: Vec<_> = (0..64u32)
        .map(|i| {
            store
                .submit_store(format!("key-{i:03}").as_bytes(), &[7; 100], StoreMode::Overwrite)
                .unwrap()
        })
        .collect();
    for t in tickets {
        t.wait().unwrap();
    }
    let s = store.stats();
    assert_eq!(s.stores, 64);
    assert!(s.batches < 64, "{} batches for 64 queued stores", s.batches);
    // 64 records of about 120 bytes fill two pages when they share them.
    assert!(
        s.log_bytes_written < 64 * 4096 / 4,
        "{} log bytes for 64 small stores",
        s.log_bytes_written
    );
    let keys: Vec<Vec<u8>> = (0..64u32).map(|i| format!("key-{i:03}").into_bytes()).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    assert_eq!(store.submit_exist(&refs).unwrap().wait().unwrap(), vec![0xFF; 8]);
    let gets: Vec<_> = keys.iter().map(|k| store.submit_retrieve(k).unwrap()).collect();
    for g in gets {
        assert_eq!(g.wait().unwrap(), Some(vec![7; 100]));
    }
}

#[test]
fn tickets_are_futures_under_tokio_and_a_plain_executor() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(HashStore::open(dir.path(), HashOptions::default()).unwrap());
    let got = pollster::block_on(async {
        store.submit_store(b"key-a", b"A", StoreMode::Overwrite)?.await?;
        store.submit_retrieve(b"key-a")?.await
    })
    .unwrap();
    assert_eq!(got, Some(b"A".to_vec()));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let s = store.clone();
    let found = rt.block_on(async move {
        let mut tasks = Vec::new();
        for i in 0..16u32 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("task-{i:02}").into_bytes();
                s.submit_store(&key, &key, StoreMode::Overwrite)?.await?;
                let deleted = s.submit_delete(&key)?.await?;
                s.submit_store(&key, b"again", StoreMode::NoOverwrite)?.await?;
                Ok::<bool, Error>(deleted)
            }));
        }
        let mut all = true;
        for t in tasks {
            all &= t.await.unwrap().unwrap();
        }
        all
    });
    assert!(found, "every delete found its key");
    for i in 0..16u32 {
        assert_eq!(
            store.retrieve(format!("task-{i:02}").as_bytes()).unwrap(),
            Some(b"again".to_vec())
        );
    }
}

#[test]
fn sync_and_async_clients_mix_against_a_model() {
    let d = sim(6, 33);
    let store = Arc::new(open(&d, &HashOptions { digest_bits: 6, ..small_options() }));
    // Each thread owns its keys, so a per-thread model is exact.
    let threads: Vec<_> = (0..3u32)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
                for round in 0..40u32 {
                    let mut tickets = Vec::new();
                    for i in 0..8u32 {
                        let key = format!("t{t}-k{}", (round * 3 + i) % 30).into_bytes();
                        let v =
                            value(&key, u64::from(round * 8 + i), ((round + i) % 7 * 900) as usize);
                        if t == 0 {
                            // The synchronous calls.
                            if i % 4 == 3 {
                                assert_eq!(
                                    store.delete(&key).unwrap(),
                                    model.remove(&key).is_some()
                                );
                            } else {
                                store.store(&key, &v, StoreMode::Overwrite).unwrap();
                                model.insert(key, v);
                            }
                        } else {
                            // Submitted together: they apply in submission order.
                            if i % 4 == 3 {
                                let was = model.remove(&key).is_some();
                                tickets.push((
                                    store.submit_delete(&key).unwrap().wait().unwrap(),
                                    was,
                                ));
                            } else {
                                let t = loop {
                                    match store.submit_store(&key, &v, StoreMode::Overwrite) {
                                        Ok(t) => break t,
                                        Err(Error::Busy) => std::thread::yield_now(),
                                        Err(e) => panic!("{e}"),
                                    }
                                };
                                model.insert(key, v);
                                t.wait().unwrap();
                            }
                        }
                    }
                    for (got, want) in tickets {
                        assert_eq!(got, want);
                    }
                }
                for (k, v) in &model {
                    assert_eq!(store.retrieve(k).unwrap().as_ref(), Some(v));
                }
                model.len()
            })
        })
        .collect();
    let live: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(store.stats().keys as usize, live);
}

#[test]
fn closing_completes_every_outstanding_ticket() {
    let d = sim(4, 34);
    let store = open(&d, &HashOptions { queue_depth: 256, ..small_options() });
    let tickets: Vec<_> = (0..200u32)
        .map(|i| {
            store
                .submit_store(format!("key-{i:03}").as_bytes(), &[3; 500], StoreMode::Overwrite)
                .unwrap()
        })
        .collect();
    let gets: Vec<_> = (0..50u32)
        .map(|i| store.submit_retrieve(format!("key-{i:03}").as_bytes()).unwrap())
        .collect();
    store.close();
    for t in tickets {
        t.wait().unwrap();
    }
    for g in gets {
        // Submitted after the stores: each sees its store, or none if it ran before it.
        assert!(matches!(g.wait(), Ok(Some(_)) | Ok(None)));
    }
    assert_eq!(open(&d, &small_options()).stats().keys, 200);
}

#[test]
fn tagged_requests_complete_once_into_the_queue_and_signal_its_eventfd() {
    use shale_hash::{KvRequest, Output};
    let d = sim(4, 35);
    let store = open(&d, &HashOptions { queue_depth: 512, ..small_options() });
    let fd = store.completion_fd();
    let key = |i: u64| format!("tag-{i:04}").into_bytes();
    for i in 0..100u64 {
        let k = key(i);
        store
            .submit_tagged(KvRequest::Store { key: &k, value: &k, mode: StoreMode::Overwrite }, i)
            .unwrap();
    }
    let mut done = Vec::new();
    let wait_and_drain = |done: &mut Vec<shale_hash::Completion>, want: usize| {
        let mut rounds = 0;
        while done.len() < want {
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
            assert!(n == 1 && pfd.revents & libc::POLLIN != 0, "the eventfd signals completions");
            store.poll_completions(done, 1000);
            rounds += 1;
            assert!(rounds < 10_000);
        }
    };
    wait_and_drain(&mut done, 100);
    let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..100).collect::<Vec<_>>(), "each tag completes exactly once");
    assert!(done.iter().all(|c| matches!(c.result, Ok(Output::Stored))));
    // Nothing left: the eventfd was reset, and poll(2) times out.
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
    done.clear();
    store.submit_tagged(KvRequest::Retrieve { key: &key(5) }, 1000).unwrap();
    store.submit_tagged(KvRequest::Retrieve { key: b"absent" }, 1001).unwrap();
    store.submit_tagged(KvRequest::Delete { key: &key(6) }, 1002).unwrap();
    let (k7, k8) = (key(7), key(8));
    let keys: [&[u8]; 3] = [&k7, b"nope", &k8];
    store.submit_tagged(KvRequest::Exist { keys: &keys }, 1003).unwrap();
    store
        .submit_tagged(
            KvRequest::Store { key: &key(9), value: b"x", mode: StoreMode::NoOverwrite },
            1004,
        )
        .unwrap();
    assert!(matches!(
        store.submit_tagged(KvRequest::Retrieve { key: b"abc" }, 1005),
        Err(Error::KeyLength { .. })
    ));
    wait_and_drain(&mut done, 5);
    done.sort_by_key(|c| c.tag);
    assert_eq!(done[0].result.as_ref().unwrap(), &Output::Retrieved(Some(key(5))));
    assert_eq!(done[1].result.as_ref().unwrap(), &Output::Retrieved(None));
    assert_eq!(done[2].result.as_ref().unwrap(), &Output::Deleted(true));
    assert_eq!(done[3].result.as_ref().unwrap(), &Output::Exist(vec![0b101]));
    assert!(matches!(done[4].result, Err(Error::KeyExists)));
    assert_eq!(done.len(), 5, "a request refused at submission completes nowhere");
}
