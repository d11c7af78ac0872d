//! The hash store's handle: opening (recovery), the asynchronous calls that submit requests
//! to the shard's worker, and the synchronous calls built on them.
//!
//! Recovery: the version log names the segments; each is scanned from its first page in
//! generation order and its records replayed into the index in log order (which is sequence
//! order), up to the first page that is not a valid page of that generation. An invalid page
//! that a later valid page says was durable, or one below a sealed segment's page count, is
//! damage ([`Error::Corruption`]), not a torn tail. New writes after an open go to a new
//! segment, so a torn tail is never written over.
//!
//! Reads the caller's thread can answer without the worker are answered there
//! (`caller_reads.rs`): from the value cache, by the index, or by reading the record the
//! index names. Writes and other reads are served by one worker thread per store (`worker.rs`, with the stages
//! of its loop): a store or delete returns (or its ticket completes) once its record is
//! durable and the index points at it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use std::os::fd::RawFd;

use shale_io::ticket::{Ticket, pending};
use shale_io::{BufferedReader, DeviceRef, FileOptions};
use shale_space::Volume;
use shale_space::contention::Site;
use shale_space::page_log::driver::{Driver, DriverStats};

use crate::caller_reads::{self, Wait};
use crate::completion::{Completion, CompletionQueue, Output, Reply};
use crate::error::{Error, Result};
use crate::index::SEGMENTS_MAX;
use crate::iterator::{IterKind, KvIterator};
use crate::log::{LogWriter, Segment};
use crate::meta;
use crate::options::{HashOptions, HashStats, RecordReads, StoreMode};
use crate::record;
use crate::shard::Shard;
use crate::worker::{Request, Submissions, Worker};

/// The contention profile's site of a synchronous call's hand-off to the worker: the caller
/// waiting for its request to be answered (a read answered on the caller's thread passes).
static WORKER_HANDOFF: Site = Site::new("hash: worker hand-off");

/// A ticket of the hash engine: poll it, wait on it, or `.await` it.
pub type HashTicket<T> = Ticket<T, Error>;

/// A hash-indexed, log-structured key-value store on one volume (one shard), with a worker
/// thread of its own.
pub struct HashStore {
    /// One handle per store (`shale_space::StoreLock`); `None` on a device opened directly.
    _lock: Option<shale_space::StoreLock>,
    shard: Arc<Shard>,
    submissions: Arc<Submissions>,
    /// The worker, and who runs its turns: its thread, or a synchronous caller.
    driver: Arc<Driver<Worker>>,
    completions: Arc<CompletionQueue>,
    worker: Option<JoinHandle<()>>,
}

/// A request for [`HashStore::submit_tagged`], whose result goes to the completion queue.
#[derive(Clone, Copy, Debug)]
pub enum KvRequest<'a> {
    /// Store `value` under `key` (its [`Output`] is `Stored`).
    Store {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// Overwrite, no-overwrite or update-only.
        mode: StoreMode,
    },
    /// Delete `key` (`Deleted(present)`).
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Retrieve `key`'s value (`Retrieved(value)`).
    Retrieve {
        /// The key.
        key: &'a [u8],
    },
    /// Which of `keys` exist (`Exist(bits)`).
    Exist {
        /// The keys.
        keys: &'a [&'a [u8]],
    },
}

impl std::fmt::Debug for HashStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashStore").field("keys", &self.shard.index.read().len()).finish()
    }
}

impl HashStore {
    /// Opens the store at `path` (a directory, which gets a volume file inside it, a volume
    /// file or a block device), creating it where nothing is stored and the options allow.
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// store.store(b"key-1", b"value", StoreMode::Overwrite)?;
    /// assert_eq!(store.retrieve(b"key-1")?, Some(b"value".to_vec()));
    /// drop(store);
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// assert_eq!(store.retrieve(b"key-1")?, Some(b"value".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// One handle at a time: the store lock of the space layer (an OFD lock on the volume
    /// file or device, whatever name reached it) refuses a second open, in this process or
    /// another, with `shale_space::Error::InUse`.
    ///
    /// # Errors
    /// Bad options ([`Error::InvalidArgument`]), a volume of another engine
    /// ([`Error::NotHashStore`]), damage ([`Error::Corruption`]), a store in use, or the space
    /// layer's error.
    pub fn open(path: impl AsRef<Path>, opts: HashOptions) -> Result<HashStore> {
        HashStore::open_with_reads(path, opts, RecordReads::default())
    }

    /// Opens the store at `path` as [`HashStore::open`] does, reading records that miss the
    /// value cache as `reads` says: through the page cache (what [`HashStore::open`] does)
    /// or with O_DIRECT only.
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, RecordReads, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let opts = HashOptions { value_cache_bytes: 0, ..HashOptions::default() };
    /// let store = HashStore::open_with_reads(dir.path(), opts, RecordReads::Direct)?;
    /// store.store(b"key-1", b"value", StoreMode::Overwrite)?;
    /// assert_eq!(store.retrieve(b"key-1")?, Some(b"value".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`HashStore::open`]; with [`RecordReads::PageCache`], also the error of opening a
    /// second, buffered descriptor of the volume file or device (naming its path).
    pub fn open_with_reads(
        path: impl AsRef<Path>,
        opts: HashOptions,
        reads: RecordReads,
    ) -> Result<HashStore> {
        opts.validate()?;
        let (opened, lock) = Volume::open_path_locked(
            path.as_ref(),
            &opts.volume_options(),
            &FileOptions::default(),
        )?;
        // After the volume: a directory has its volume file by now.
        let reader = match reads {
            RecordReads::PageCache => {
                Some(BufferedReader::open(&shale_space::volume_file(path.as_ref()))?)
            }
            RecordReads::Direct => None,
        };
        let mut store = HashStore::recover(opened, opts, reader)?;
        store._lock = Some(lock);
        Ok(store)
    }

    /// Opens the store on `device` (a simulated device in tests, say), as [`HashStore::open`].
    ///
    /// # Errors
    /// As [`HashStore::open`].
    pub fn open_device(device: DeviceRef, opts: HashOptions) -> Result<HashStore> {
        opts.validate()?;
        let opened = Volume::open(device, &opts.volume_options())?;
        HashStore::recover(opened, opts, None)
    }

    /// Recovers the store on `opened`; `reader`, where given, is a buffered descriptor of
    /// the same volume, for record reads through the page cache.
    fn recover(
        opened: shale_space::Opened,
        opts: HashOptions,
        reader: Option<BufferedReader>,
    ) -> Result<HashStore> {
        let started = std::time::Instant::now();
        let volume = opened.volume;
        let state = meta::decode(&opened.versions)?;
        crate::bounded::check_mode(&state, opts.index)?;
        let metas = state.segments.clone();
        if metas.len() as u64 >= u64::from(SEGMENTS_MAX) {
            return Err(Error::InvalidArgument("more segments than the index can name".into()));
        }
        let segments: Vec<Segment> = metas
            .iter()
            .map(|m| Segment {
                generation: m.generation,
                extent: m.extent,
                start: volume.extent_range(m.extent).start,
                sealed_pages: m.sealed_pages,
            })
            .collect();
        let next_generation = segments
            .last()
            .map(|s| s.generation)
            .max(state.checkpoint.map(|c| c.generation))
            // A store that has written nothing: its own starting point (`first_generation`).
            .map_or_else(
                || shale_space::log_page::first_generation(&volume.header().volume_id),
                |g| g + 1,
            );
        let mut shard = Shard::new(volume, opts, segments);
        shard.advice = reader.as_ref().and_then(crate::page_advice::PageAdvice::start);
        shard.reader = reader;
        let shard = Arc::new(shard);
        *shard.checkpoint.lock() = state.checkpoint;
        *shard.membership.lock() = state.membership;
        if let crate::options::IndexMode::Bounded { .. } = shard.opts.index {
            crate::bounded::open_index(&shard, &state, next_generation)?;
        }
        let replayed = shard.replay()?;
        shard.recovered_records.store(replayed.records, Ordering::Relaxed);
        shard.recovery_micros.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        let log = LogWriter::new(replayed.max_seq + 1, next_generation, replayed.last_end);
        let submissions = Arc::new(Submissions::new(shard.opts.queue_depth));
        let driver = Arc::new(Driver::new(Worker::new(shard.clone(), submissions.clone(), log)?));
        let cpu = shard.opts.worker_cpu;
        let thread_driver = driver.clone();
        let handle = std::thread::Builder::new()
            .name("shale-hash-worker".into())
            .spawn(move || {
                if let Some(cpu) = cpu {
                    // A refusal (a CPU set the kernel will not give) leaves it unpinned.
                    shale_io::affinity::pin_current_thread(cpu);
                }
                thread_driver.run()
            })
            .map_err(|e| Error::InvalidArgument(format!("cannot start the worker thread: {e}")))?;
        let completions = Arc::new(CompletionQueue::new()?);
        Ok(HashStore { _lock: None, shard, submissions, driver, completions, worker: Some(handle) })
    }

    /// Queues a request whose answer goes to a ticket, and wakes the worker's thread to serve
    /// it.
    fn submit<T>(
        &self,
        wait: bool,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<HashTicket<T>> {
        let ticket = self.submit_quietly(wait, make)?;
        self.driver.wake();
        Ok(ticket)
    }

    /// Queues a request whose answer goes to a ticket, waking nobody: the caller drives it.
    fn submit_quietly<T>(
        &self,
        wait: bool,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<HashTicket<T>> {
        let (ticket, done) = pending();
        self.queue(make(Reply::Ticket(done)), wait)?;
        Ok(ticket)
    }

    /// A synchronous call's request: queued, then served on this thread when nobody is running
    /// the worker (run to completion: no hand-off either way), else by whoever is; waits for
    /// its answer.
    fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T> {
        let ticket = self.submit_quietly(true, make)?;
        if self.driver.drive_until(|| ticket.is_done()) {
            WORKER_HANDOFF.pass();
            return ticket.wait();
        }
        WORKER_HANDOFF.wait(|| ticket.wait())
    }

    /// Queues `req`, waking nobody.
    fn queue(&self, req: Request, wait: bool) -> Result<()> {
        match self.submissions.submit(req, wait) {
            Ok(()) => Ok(()),
            Err(req) => {
                // Its reply is forgotten unanswered: the caller is told why at once.
                forget_reply(req);
                // A worker that broke down admits nothing, and stopped the store first.
                self.shard.refuse_if_stopped()?;
                self.shard.counters.busy.fetch_add(1, Ordering::Relaxed);
                Err(Error::Busy)
            }
        }
    }

    /// Submits `req`; its result goes to the completion queue with `tag`
    /// ([`HashStore::poll_completions`], signalled on [`HashStore::completion_fd`]). The
    /// SNIA KV API's model, and the C ABI's.
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, KvRequest, Output, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// store.submit_tagged(KvRequest::Store { key: b"key-1", value: b"v", mode: StoreMode::Overwrite }, 7)?;
    /// let mut done = Vec::new();
    /// while store.poll_completions(&mut done, 16) == 0 {
    ///     std::thread::yield_now(); // or wait for completion_fd() in epoll
    /// }
    /// assert_eq!(done[0].tag, 7);
    /// assert_eq!(done[0].result.as_ref().unwrap(), &Output::Stored);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// At once: bad keys or values and [`Error::Busy`], as [`HashStore::submit_store`];
    /// nothing is queued then and no completion will come. Later, in the completion: the
    /// request's error.
    pub fn submit_tagged(&self, req: KvRequest<'_>, tag: u64) -> Result<()> {
        let cq = &self.completions;
        let req = match req {
            KvRequest::Store { key, value, mode } => {
                record::check_key(key)?;
                record::check_value(value, self.shard.opts.value_bytes_max())?;
                let done = Reply::tagged(tag, cq.clone(), |()| Output::Stored);
                Request::Store { key: key.to_vec(), value: value.to_vec(), mode, done }
            }
            KvRequest::Delete { key } => {
                record::check_key(key)?;
                Request::Delete {
                    key: key.to_vec(),
                    done: Reply::tagged(tag, cq.clone(), Output::Deleted),
                }
            }
            KvRequest::Retrieve { key } => {
                record::check_key(key)?;
                if let Some(answer) = caller_reads::retrieve(&self.shard, key, Wait::Never) {
                    // Answered here: straight into the completion queue, as the worker would.
                    Reply::tagged(tag, cq.clone(), Output::Retrieved).complete(Ok(answer));
                    return Ok(());
                }
                Request::Retrieve {
                    key: key.to_vec(),
                    done: Reply::tagged(tag, cq.clone(), Output::Retrieved),
                }
            }
            KvRequest::Exist { keys } => {
                for k in keys {
                    record::check_key(k)?;
                }
                if let Some(bits) = caller_reads::exist(&self.shard, keys, Wait::Never) {
                    Reply::tagged(tag, cq.clone(), Output::Exist).complete(Ok(bits));
                    return Ok(());
                }
                let keys = keys.iter().map(|k| k.to_vec()).collect();
                Request::Exist { keys, done: Reply::tagged(tag, cq.clone(), Output::Exist) }
            }
        };
        self.queue(req, false)?;
        self.driver.wake();
        Ok(())
    }

    /// Moves up to `max` completions of [`HashStore::submit_tagged`] requests into `out`,
    /// oldest first; returns how many. Never blocks.
    pub fn poll_completions(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        self.completions.poll(out, max)
    }

    /// An eventfd that is readable while completions wait in the queue: put it in epoll (or
    /// poll(2)) and call [`HashStore::poll_completions`] when it fires. Owned by the store:
    /// valid until the store is dropped.
    pub fn completion_fd(&self) -> RawFd {
        self.completions.fd()
    }

    /// Submits a store and returns at once with its ticket, which completes once the pair is
    /// durable and visible (or with the store's error).
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// let tickets: Vec<_> = (0..32u32)
    ///     .map(|i| store.submit_store(format!("key-{i}").as_bytes(), b"v", StoreMode::Overwrite))
    ///     .collect::<Result<_, _>>()?;
    /// for t in tickets {
    ///     t.wait()?; // or poll with is_done / try_take, or .await
    /// }
    /// assert_eq!(store.stats().keys, 32);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// At once: [`Error::KeyLength`], [`Error::ValueTooLarge`], [`Error::Busy`] when
    /// `queue_depth` requests are outstanding (nothing was queued: submit again later). In the
    /// ticket: as [`HashStore::store`].
    pub fn submit_store(
        &self,
        key: &[u8],
        value: &[u8],
        mode: StoreMode,
    ) -> Result<HashTicket<()>> {
        record::check_key(key)?;
        record::check_value(value, self.shard.opts.value_bytes_max())?;
        self.submit(false, |done| Request::Store {
            key: key.to_vec(),
            value: value.to_vec(),
            mode,
            done,
        })
    }

    /// Submits a delete; its ticket says whether the key was present.
    ///
    /// # Errors
    /// As [`HashStore::submit_store`].
    pub fn submit_delete(&self, key: &[u8]) -> Result<HashTicket<bool>> {
        record::check_key(key)?;
        self.submit(false, |done| Request::Delete { key: key.to_vec(), done })
    }

    /// Submits a retrieve of the whole value.
    ///
    /// # Errors
    /// As [`HashStore::submit_store`].
    pub fn submit_retrieve(&self, key: &[u8]) -> Result<HashTicket<Option<Vec<u8>>>> {
        record::check_key(key)?;
        if let Some(answer) = caller_reads::retrieve(&self.shard, key, Wait::Never) {
            return Ok(Ticket::ready(Ok(answer)));
        }
        self.submit(false, |done| Request::Retrieve { key: key.to_vec(), done })
    }

    /// Submits an exist for many keys; its ticket holds one bit per key (bit `i % 8` of byte
    /// `i / 8` for `keys[i]`).
    ///
    /// # Errors
    /// As [`HashStore::submit_store`], for the first bad key.
    pub fn submit_exist(&self, keys: &[&[u8]]) -> Result<HashTicket<Vec<u8>>> {
        for k in keys {
            record::check_key(k)?;
        }
        if let Some(bits) = caller_reads::exist(&self.shard, keys, Wait::Never) {
            return Ok(Ticket::ready(Ok(bits)));
        }
        let keys = keys.iter().map(|k| k.to_vec()).collect();
        self.submit(false, |done| Request::Exist { keys, done })
    }

    /// Stores `value` under `key`, durably: once this returns the pair survives a crash or
    /// a power loss (P1), whole or not at all. Built on the asynchronous call; waits for room
    /// in a full queue instead of answering Busy.
    ///
    /// # Errors
    /// [`Error::KeyLength`], [`Error::ValueTooLarge`], [`Error::KeyExists`] or
    /// [`Error::KeyNotFound`] (by `mode`), [`Error::Stopped`] after an earlier failed write,
    /// or the device's error (which stops the store).
    pub fn store(&self, key: &[u8], value: &[u8], mode: StoreMode) -> Result<()> {
        record::check_key(key)?;
        record::check_value(value, self.shard.opts.value_bytes_max())?;
        self.call(|done| Request::Store { key: key.to_vec(), value: value.to_vec(), mode, done })
    }

    /// Deletes `key`, durably; returns whether it was present (nothing is written if not).
    ///
    /// # Errors
    /// As [`HashStore::store`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        record::check_key(key)?;
        self.call(|done| Request::Delete { key: key.to_vec(), done })
    }

    /// The value stored under `key`, or `None`. Answered on this thread where it can be
    /// (`caller_reads.rs`): a value in the value cache, a key the index proves absent from
    /// memory, or a key whose index entry is in memory, whose record this thread reads
    /// (through the page cache or directly, [`RecordReads`]); otherwise the worker reads it.
    ///
    /// # Errors
    /// [`Error::KeyLength`]; [`Error::Corruption`] when the record fails its checks (never a
    /// wrong value); the device's error.
    pub fn retrieve(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        record::check_key(key)?;
        if let Some(answer) = caller_reads::retrieve(&self.shard, key, Wait::Device) {
            WORKER_HANDOFF.pass();
            return Ok(answer);
        }
        self.call(|done| Request::Retrieve { key: key.to_vec(), done })
    }

    /// Copies the value of `key` from byte `offset` on into `buf`; returns how many bytes it
    /// copied (the value's length less `offset`), or `None` when the key is absent.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] carrying the size needed when `buf` is shorter than that
    /// (nothing is copied); [`Error::InvalidArgument`] for an offset past the value's end;
    /// otherwise as [`HashStore::retrieve`].
    pub fn retrieve_into(
        &self,
        key: &[u8],
        offset: usize,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        let Some(value) = self.retrieve(key)? else {
            return Ok(None);
        };
        if offset > value.len() {
            return Err(Error::InvalidArgument(format!(
                "offset {offset} past the value's {} bytes",
                value.len()
            )));
        }
        let needed = value.len() - offset;
        if buf.len() < needed {
            return Err(Error::BufferTooSmall { needed });
        }
        buf[..needed].copy_from_slice(&value[offset..]);
        Ok(Some(needed))
    }

    /// Which of `keys` are present: bit `i % 8` of byte `i / 8` for `keys[i]` (the SNIA KV
    /// API's exist, for many keys at once).
    ///
    /// # Errors
    /// As [`HashStore::retrieve`], for the first key that fails.
    pub fn exist(&self, keys: &[&[u8]]) -> Result<Vec<u8>> {
        for k in keys {
            record::check_key(k)?;
        }
        if let Some(bits) = caller_reads::exist(&self.shard, keys, Wait::Device) {
            return Ok(bits);
        }
        let keys = keys.iter().map(|k| k.to_vec()).collect();
        self.call(|done| Request::Exist { keys, done })
    }

    /// Opens an iterator over the keys whose first four bytes match `prefix` under `mask`
    /// (`key[i] & mask[i] == prefix[i] & mask[i]`), returning keys or keys and values in
    /// batches ([`KvIterator::next_batch`]). See `iterator.rs` for what it promises.
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, IterKind, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// for k in [&b"user1"[..], b"user2", b"item1"] {
    ///     store.store(k, b"v", StoreMode::Overwrite)?;
    /// }
    /// let mut it = store.open_iterator(*b"user", [0xFF; 4], IterKind::Keys)?;
    /// let mut keys: Vec<Vec<u8>> = it.next_batch(100)?.into_iter().map(|(k, _)| k).collect();
    /// keys.sort();
    /// assert_eq!(keys, vec![b"user1".to_vec(), b"user2".to_vec()]);
    /// assert!(it.next_batch(100)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::TooManyIterators`] when `max_iterators` are open.
    pub fn open_iterator(
        &self,
        prefix: [u8; 4],
        mask: [u8; 4],
        kind: IterKind,
    ) -> Result<KvIterator> {
        KvIterator::open(self.shard.clone(), prefix, mask, kind)
    }

    /// The shard the store serves (its checkpoint reads it: `store_checkpoint.rs`).
    pub(crate) fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// The set this store is a shard of, if it is one.
    pub(crate) fn membership(&self) -> Option<crate::meta::Membership> {
        *self.shard.membership.lock()
    }

    /// Makes this store shard `m.index` of the set `m` (committed to its version log).
    pub(crate) fn join_set(&self, m: crate::meta::Membership) -> Result<()> {
        let shard = &self.shard;
        let edit = shale_space::Edit {
            engine: meta::encode_membership(&m),
            ..shale_space::Edit::default()
        };
        let mut full = || {
            let metas: Vec<meta::SegmentMeta> = shard
                .segments()
                .iter()
                .map(|(_, s)| meta::SegmentMeta {
                    generation: s.generation,
                    extent: s.extent,
                    sealed_pages: s.sealed_pages,
                })
                .collect();
            meta::encode_base(&metas, *shard.checkpoint.lock(), Some(m), *shard.bounded.lock())
        };
        shard.volume().commit(&edit, &mut full)?;
        *shard.membership.lock() = Some(m);
        Ok(())
    }

    /// Turns of the worker run since the open, by synchronous callers on their own threads
    /// (run to completion) and by the worker's thread.
    pub fn driver_stats(&self) -> DriverStats {
        self.driver.stats()
    }

    /// Counters since the open.
    pub fn stats(&self) -> HashStats {
        self.shard.stats()
    }

    /// The volume under the store (for its I/O counters and checks).
    pub fn volume(&self) -> &Volume {
        self.shard.volume()
    }

    /// Completes every outstanding request and stops the worker; dropping the store does the
    /// same.
    pub fn close(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.submissions.close();
            self.driver.wake();
            if worker.join().is_err() {
                log::error!("the hash store's worker panicked");
            }
        }
    }
}

/// Drops a request refused as Busy without answering it: the caller was told at once.
fn forget_reply(req: Request) {
    match req {
        Request::Store { done, .. } => done.silence(),
        Request::Delete { done, .. } => done.silence(),
        Request::Retrieve { done, .. } => done.silence(),
        Request::Exist { done, .. } => done.silence(),
    }
}

impl Drop for HashStore {
    fn drop(&mut self) {
        self.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;
    use std::time::Duration;

    use shale_io::SimDevice;

    use super::*;
    use crate::options::{SEGMENT_BYTES_MIN, StoreMode};

    fn options() -> HashOptions {
        HashOptions {
            segment_bytes: SEGMENT_BYTES_MIN,
            version_log_bytes: 64 << 10,
            ..HashOptions::default()
        }
    }

    /// A panic in the worker's turn (a bug) must not leave callers asleep forever: each is
    /// answered (acknowledged before the panic, or told the store stopped), later calls are
    /// refused at once, the store closes, and a reopen has every acknowledged write.
    #[test]
    fn a_panicking_turn_answers_every_caller_and_stops_the_store() {
        // Fails the test (the whole process) rather than hanging it, should a caller never
        // be answered.
        let (done, watched) = mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if watched.recv_timeout(Duration::from_secs(120)).is_err() {
                eprintln!("a caller was never answered after the worker panicked");
                std::process::abort();
            }
        });
        let device = Arc::new(SimDevice::new(16 << 20, 4096, 11).unwrap());
        let store = HashStore::open_device(device.clone(), options()).unwrap();
        let key = |t: u32, i: u32| format!("t{t}-key-{i:03}").into_bytes();
        for i in 0..20 {
            store.store(&key(9, i), b"before", StoreMode::Overwrite).unwrap();
        }
        store.shard.panic_next_turn.store(true, Ordering::Relaxed);
        let acknowledged: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4u32)
                .map(|t| {
                    let store = &store;
                    scope.spawn(move || {
                        let mut acked = Vec::new();
                        for i in 0..50 {
                            match store.store(&key(t, i), b"during", StoreMode::Overwrite) {
                                Ok(()) => acked.push(i),
                                Err(Error::Stopped(why)) => {
                                    assert!(
                                        why.contains("panicked") || why.contains("failed"),
                                        "{why}"
                                    );
                                }
                                Err(e) => panic!("thread {t} store {i}: {e}"),
                            }
                        }
                        acked
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(!store.shard.panic_next_turn.load(Ordering::Relaxed), "no turn ran after the flag");
        match store.store(b"after-the-panic", b"x", StoreMode::Overwrite) {
            Err(Error::Stopped(why)) => assert!(why.contains("panicked"), "{why}"),
            other => panic!("a store after the panic: {other:?}"),
        }
        let ticket = store.submit_store(b"submitted-after", b"x", StoreMode::Overwrite);
        assert!(matches!(ticket, Err(Error::Stopped(_))), "{ticket:?}");
        let tagged = store.submit_tagged(
            KvRequest::Store { key: b"tagged-after", value: b"x", mode: StoreMode::Overwrite },
            1,
        );
        assert!(matches!(tagged, Err(Error::Stopped(_))), "{tagged:?}");
        drop(store);
        done.send(()).unwrap();
        watchdog.join().unwrap();
        let store = HashStore::open_device(device, options()).unwrap();
        for i in 0..20 {
            assert_eq!(store.retrieve(&key(9, i)).unwrap().as_deref(), Some(&b"before"[..]));
        }
        for (t, acked) in acknowledged.iter().enumerate() {
            for &i in acked {
                assert_eq!(
                    store.retrieve(&key(t as u32, i)).unwrap().as_deref(),
                    Some(&b"during"[..]),
                    "thread {t} store {i} was acknowledged"
                );
            }
        }
        store.store(b"after-reopen", b"x", StoreMode::Overwrite).unwrap();
    }
}
