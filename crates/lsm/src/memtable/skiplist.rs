//! The skiplist: a concurrent sorted list of internal keys whose nodes live in an arena.
//!
//! ```text
//! node (8-aligned, in the arena):
//! offset          size        field
//! 0               4           key length (u32, the internal key: user key | 8-byte trailer)
//! 4               4           value length (u32)
//! 8               1           height (u8, 0..=HEIGHT_MAX; 0 for a version node)
//! 9               1           flags (AtomicU8: what is known of the key's other versions)
//! 10              2           unused
//! 12              4           point tag (u32: the high half of the user key's `point_hash`)
//! 16              8           key prefix (u64: the user key's first 8 bytes, big-endian,
//!                             zero-padded; see `key_prefix`)
//! 24              8           point next: the next (older) node of this node's point-index
//!                             bucket (AtomicPtr, null = end)
//! 32              8 * height  tower: the next node at each level (AtomicPtr, null = end)
//! 32 + 8*height   key length  internal key bytes
//! ...             value len   value bytes
//! ```
//!
//! Every node is in one chain of the point index: an array of buckets, chosen by a hash of
//! the user key, each a list of nodes from the highest sequence number down. A point read
//! walks its key's bucket and takes the first node of its key at or below its snapshot: the
//! newest one it may see, without the O(log n) key comparisons of a seek. Keys that share
//! their first 8 bytes (`key:000000001234` and its neighbours) made every comparison of a
//! seek a `memcmp`: in `shale serve` under pipelined GETs, seeks took 43% of the server's CPU
//! (docs/lsm.md, "The memtable's point index"). Chains are linked as the levels are: a node is
//! filled, pointed at its successor, and swung in with a CAS; nodes are never removed, so a
//! failed CAS walks on from the same predecessor.
//!
//! The levels hold one node per user key, ordered by user key: its *key node*, the first of
//! its versions to reach level 0. Every other version is a *version node*, with no tower, in
//! the point index alone; a key's versions, newest first, are the nodes of its user key in its
//! bucket's chain, key node included. So a new version of a key already in the list costs a
//! walk of one short chain instead of a search of the levels: in `shale serve` under
//! pipelined SETs over 100,000 keys, that search (`find_splice` and its `memcmp`) was 49% of
//! the server's CPU, each of its dozens of hops a cache miss in a list of a million versions
//! (docs/lsm.md, "Versions off the levels"). A first version pays one chain walk more, to
//! find that its key is new. Two first versions of one key racing to level 0 are told apart
//! there: the CAS that links a key node succeeds only if nothing was linked between its
//! predecessor and successor, so the loser's search again finds the winner, a node of its
//! own user key, and its node becomes a version node (its tower unused).
//!
//! The list's order is the internal keys' (user key, then sequence descending): a cursor
//! stands on a key node and one of its versions, and steps through the versions in chain
//! order before it moves to the next key node at level 0.
//!
//! Finding a key's versions in its chain costs a hash, the bucket and the chain's nodes, where
//! a walk of level 0 costs one node: a scan of a memtable of distinct keys ran a quarter
//! slower (readseq after fillrandom of 1M keys). So each node records, in its flags, whether
//! its key has versions older and newer than it ([`OLDER_NONE`], [`OLDER_SOME`],
//! [`NEWER_NONE`], [`NEWER_SOME`]), and a cursor skips the chain where a flag says there is
//! nothing there: a key node without newer versions is its key's newest, a version without
//! older ones its key's last. After a node is linked into its chain, its insert walks the
//! chain: it marks every newer node of its key as having an older one, and the first older
//! one as having a newer one, and it records what it found for itself; an `_SOME` bit, once
//! set, outweighs the `_NONE` bit. Two versions of a key inserted at once each walk after
//! linking, behind a SeqCst fence, so at least one of them sees the other; and a version is
//! published (its sequence) only after its insert and every earlier one finished, so a reader
//! that may see a version finds the flags that lead to it. Nodes above the reader's sequence
//! may still have stale flags; the cursor may then skip or show them, and the reader
//! discards them anyway.
//!
//! Nodes are only ever added, never removed or moved, and everything but the tower is written
//! once, before the node is published. That is what makes the list simple to share:
//! 1. A writer fills a node (header, null tower, key, value) while no other thread can see it.
//! 2. It links the node level by level from the bottom: at each level it points the node at its
//!    successor, then swings the predecessor's link from that successor to the node with a
//!    compare-and-swap (Release). A failed CAS means another writer linked a node between the
//!    two; the writer searches that level again from the same predecessor, which is still before
//!    the new key because nodes never move.
//! 3. Readers load links with Acquire, so a node they reach has its bytes visible. A node linked
//!    at level 0 is in the list; upper levels only make searches shorter, so a reader that sees
//!    a node at some levels and not yet at others still finds everything in order.
//!
//! Because no node is ever freed while the list lives, there is no ABA problem and no need for
//! hazard pointers or epochs: a pointer read from a link stays valid until the list drops.

use super::arena::Arena;
use super::sync::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering as Mem, fence};
use crate::key;
use std::alloc::Layout;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

/// The most levels a node can have. With [`BRANCHING`] 4, towers of 12 keep searches at
/// O(log n) up to 4^12 (about 16.7 million) entries, more than a memtable holds.
pub(crate) const HEIGHT_MAX: usize = 12;
/// One node in `BRANCHING` at a level also appears on the level above (p = 1/4).
const BRANCHING: u32 = 4;
/// The longest internal key or value a node can record (lengths are stored as u32).
pub(crate) const PART_BYTES_MAX: usize = u32::MAX as usize;

/// The fixed start of a node; the tower, key and value follow it in the arena.
#[repr(C)]
struct Node {
    key_len: u32,
    value_len: u32,
    height: u8,
    /// `OLDER_*` and `NEWER_*` bits (module comment); 0 until the node's insert has walked
    /// its chain.
    flags: AtomicU8,
    tag: u32,
    prefix: u64,
    point_next: Link,
}

/// A link: the next node on one level, or null at the end of that level.
type Link = AtomicPtr<Node>;

/// Flags: the node's insert found no older version of its key in its chain.
const OLDER_NONE: u8 = 1;
/// Flags: the key has a version older than this node.
const OLDER_SOME: u8 = 2;
/// Flags: the node's insert found no newer version of its key in its chain.
const NEWER_NONE: u8 = 4;
/// Flags: the key has a version newer than this node.
const NEWER_SOME: u8 = 8;

/// Where the tower starts within a node.
const TOWER_OFFSET: usize = size_of::<Node>();
const _: () = assert!(TOWER_OFFSET % align_of::<Link>() == 0);

/// The bytes a node of `height` with a `key_len`-byte key and `value_len`-byte value takes.
fn node_bytes(height: usize, key_len: usize, value_len: usize) -> usize {
    TOWER_OFFSET + height * size_of::<Link>() + key_len + value_len
}

/// The first 8 bytes of `user_key` as a big-endian number, zero-padded when shorter.
///
/// Why: a search compares its key with a dozen nodes, and a random one decides nearly every
/// comparison in the first 8 bytes. Comparing two numbers, the node's read from its header
/// beside the tower link that reached it, skips a call to `memcmp` and the key bytes' cache
/// line. Unequal prefixes order the user keys as the bytes do: the first differing position
/// either holds a real byte in both keys, or ends the shorter key, which is then a proper
/// prefix of the longer one (whose byte there is non-zero) and so sorts first. Equal prefixes
/// decide nothing and fall back to [`key::compare`].
#[inline(always)]
fn key_prefix(user_key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = user_key.len().min(8);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(bytes)
}

/// A search target among key nodes: a user key and its [`key_prefix`].
#[derive(Clone, Copy)]
struct Target<'k> {
    user_key: &'k [u8],
    prefix: u64,
}

impl<'k> Target<'k> {
    fn new(user_key: &'k [u8]) -> Target<'k> {
        Target { user_key, prefix: key_prefix(user_key) }
    }
}

/// Hints the CPU to start loading the cache line at `p` (nothing for null). Only a hint: a
/// prefetch never faults and changes no state a program can observe.
#[inline(always)]
fn prefetch(p: *const Node) {
    #[cfg(target_arch = "x86_64")]
    if !p.is_null() {
        // SAFETY: `_mm_prefetch` reads nothing the program sees and cannot fault on any
        // address; the pointer is only a hint.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A fully written node of a list that outlives `'a`.
///
/// Holding one is the proof that the pointer reached a fully written node: [`NodeRef::new`]
/// is the only way to make one, and its callers show that.
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    ptr: NonNull<Node>,
    list: PhantomData<&'a SkipList>,
}

impl<'a> NodeRef<'a> {
    /// # Safety
    /// `ptr` must point at a node whose header, tower, key and value are all written and
    /// visible to this thread (published through a link this thread loaded with Acquire, or
    /// filled by this thread), in an arena that outlives `'a`.
    unsafe fn new(ptr: NonNull<Node>) -> NodeRef<'a> {
        NodeRef { ptr, list: PhantomData }
    }

    fn height(self) -> usize {
        // SAFETY: a NodeRef points at a node whose header was written before it was published
        // (or, for the writer, before the NodeRef was made), in arena memory alive for 'a; the
        // header is never written again, so reading it races with nothing.
        unsafe { (*self.ptr.as_ptr()).height as usize }
    }

    /// The link at `level` of this node's tower.
    fn link(self, level: usize) -> &'a Link {
        assert!(level < self.height(), "level {level} above the tower");
        // SAFETY: `level < height`, so the slot lies in the tower this node was allocated with,
        // at an 8-aligned offset of an 8-aligned node; it was initialized to a valid AtomicPtr
        // before publication, and all later writes to it are atomic.
        unsafe { &*self.ptr.as_ptr().byte_add(TOWER_OFFSET + level * size_of::<Link>()).cast() }
    }

    fn prefix(self) -> u64 {
        // SAFETY: as in `height`.
        unsafe { (*self.ptr.as_ptr()).prefix }
    }

    fn tag(self) -> u32 {
        // SAFETY: as in `height`.
        unsafe { (*self.ptr.as_ptr()).tag }
    }

    fn flags(self) -> &'a AtomicU8 {
        // SAFETY: the field lies in the node's header, initialized before publication; all
        // later writes to it are atomic.
        unsafe { &(*self.ptr.as_ptr()).flags }
    }

    /// Sets `bits` in the flags (Release: a reader that loads them sees what came before),
    /// skipping the write to a shared line when they are set already.
    fn mark(self, bits: u8) {
        let flags = self.flags();
        if flags.load(Mem::Relaxed) & bits != bits {
            flags.fetch_or(bits, Mem::Release);
        }
    }

    /// Whether the flags say the key has no version older than this node (module comment).
    fn surely_oldest(self) -> bool {
        self.flags().load(Mem::Acquire) & (OLDER_NONE | OLDER_SOME) == OLDER_NONE
    }

    /// Whether the flags say the key has no version newer than this node.
    fn surely_newest(self) -> bool {
        self.flags().load(Mem::Acquire) & (NEWER_NONE | NEWER_SOME) == NEWER_NONE
    }

    /// The link to the next (older) node of this node's point-index bucket.
    fn point_next(self) -> &'a Link {
        // SAFETY: the field lies in the node's header, initialized before publication; all
        // later writes to it are atomic.
        unsafe { &(*self.ptr.as_ptr()).point_next }
    }

    /// The entry's sequence number (from its internal key's trailer).
    fn seq(self) -> u64 {
        key::trailer_of(self.key()) >> 8
    }

    /// How this node's user key compares with `target`'s, by prefix first.
    #[inline(always)]
    fn compare(self, target: Target<'_>) -> Ordering {
        match self.prefix().cmp(&target.prefix) {
            Ordering::Equal => self.user_key().cmp(target.user_key),
            order => order,
        }
    }

    fn user_key(self) -> &'a [u8] {
        key::user_key(self.key())
    }

    /// The internal key's trailer: sequence number and kind. A key's versions sort by it,
    /// highest first.
    fn trailer(self) -> u64 {
        key::trailer_of(self.key())
    }

    /// Whether this node is a version of the user key whose point tag is `tag`.
    fn is_version_of(self, tag: u32, user_key: &[u8]) -> bool {
        self.tag() == tag && self.user_key() == user_key
    }

    fn key_len(self) -> usize {
        // SAFETY: as in `height`.
        unsafe { (*self.ptr.as_ptr()).key_len as usize }
    }

    fn value_len(self) -> usize {
        // SAFETY: as in `height`.
        unsafe { (*self.ptr.as_ptr()).value_len as usize }
    }

    /// The `len` bytes at `offset` from the node's start.
    ///
    /// # Safety
    /// They must lie within the node's key and value bytes, which are written before the node
    /// is published and never again.
    unsafe fn bytes(self, offset: usize, len: usize) -> &'a [u8] {
        // The pointer derives from the node pointer, not from another slice of the node: a
        // slice's provenance covers only its own bytes.
        // SAFETY: the caller guarantees the range; the arena keeps it alive for 'a.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().byte_add(offset).cast::<u8>(), len) }
    }

    /// The internal key.
    fn key(self) -> &'a [u8] {
        let offset = TOWER_OFFSET + self.height() * size_of::<Link>();
        // SAFETY: the key bytes follow the tower (module comment's layout).
        unsafe { self.bytes(offset, self.key_len()) }
    }

    /// The value.
    fn value(self) -> &'a [u8] {
        let offset = TOWER_OFFSET + self.height() * size_of::<Link>() + self.key_len();
        // SAFETY: the value bytes follow the key bytes (module comment's layout).
        unsafe { self.bytes(offset, self.value_len()) }
    }
}

/// The raw pointer a link holds for `node` (null for "none": the end of a level).
fn raw(node: Option<NodeRef<'_>>) -> *mut Node {
    node.map_or(ptr::null_mut(), |n| n.ptr.as_ptr())
}

/// The predecessor and successor of a key on one level (`None` = the head / the end).
type Splice<'a> = (Option<NodeRef<'a>>, Option<NodeRef<'a>>);

/// Arena bytes per point-index bucket: a bucket (8 bytes) for every 1 KiB of the list's
/// capacity, which is 4 write buffers in the engine: 2 MiB of buckets for 64 MiB memtables,
/// about one bucket per entry of 250-byte entries.
const POINT_CAPACITY_BYTES_PER_BUCKET: usize = 1024;
const POINT_BUCKETS_MIN: usize = 16;
const POINT_BUCKETS_MAX: usize = 1 << 22;

/// The point index's hash of a user key: 8 bytes at a time, each word mixed in by a multiply
/// and a rotation, then splitmix64's finalizer, so every key bit moves the low bits (the
/// bucket) and the high half (the tag) alike.
fn point_hash(user_key: &[u8]) -> u64 {
    const M: u64 = 0xbf58_476d_1ce4_e5b9;
    let mix = |h: u64, word: u64| (h ^ word).wrapping_mul(M).rotate_left(31);
    let mut h = 0x9e37_79b9_7f4a_7c15 ^ user_key.len() as u64;
    let mut words = user_key.chunks_exact(8);
    for w in &mut words {
        h = mix(h, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(w));
    }
    h = (h ^ (h >> 30)).wrapping_mul(M);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A concurrent skiplist of internal keys ([`key::compare`] order) with values.
pub(crate) struct SkipList {
    arena: Arena,
    /// The point index's buckets (module comment): the newest node of each chain.
    points: Box<[Link]>,
    /// The head's tower: the first node of each level.
    head: [Link; HEIGHT_MAX],
    /// The tallest tower so far; searches start there. It only grows.
    height: AtomicUsize,
    /// Entries inserted (key nodes and version nodes).
    len: AtomicUsize,
    /// Bytes of every node allocated (towers, keys and values, aligned): what the entries
    /// take, without the arena's unused chunk tails.
    node_bytes: AtomicUsize,
    /// State of the height generator (a SplitMix64 counter).
    rng: AtomicU64,
}

impl SkipList {
    /// An empty list whose nodes take at most `capacity_bytes`, from arena chunks of
    /// `chunk_bytes`.
    pub(crate) fn new(capacity_bytes: usize, chunk_bytes: usize) -> SkipList {
        let buckets = (capacity_bytes / POINT_CAPACITY_BYTES_PER_BUCKET)
            .next_power_of_two()
            .clamp(POINT_BUCKETS_MIN, POINT_BUCKETS_MAX);
        SkipList {
            arena: Arena::new(capacity_bytes, chunk_bytes),
            points: (0..buckets).map(|_| Link::new(ptr::null_mut())).collect(),
            head: std::array::from_fn(|_| Link::new(ptr::null_mut())),
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            node_bytes: AtomicUsize::new(0),
            rng: AtomicU64::new(0x5eed_f00d_5ca1_ab1e),
        }
    }

    /// Inserts the internal key `user_key | trailer` with `value`; `false` if the arena is full
    /// (nothing was inserted then). Safe to call from several threads at once.
    ///
    /// A version of a user key the list holds already goes into the point index alone; a
    /// first version is also linked into the levels, as the key's key node (module comment).
    ///
    /// # Panics
    /// If the internal key or the value is longer than [`PART_BYTES_MAX`]. In debug builds,
    /// if the internal key is already in the list (sequence numbers are unique, so that is a
    /// bug).
    pub(crate) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) -> bool {
        let hash = point_hash(user_key);
        let tag = (hash >> 32) as u32;
        let bucket = self.point_bucket(hash);
        if self.chain(bucket).any(|n| n.is_version_of(tag, user_key)) {
            let Some(node) = self.new_node(0, user_key, trailer, value, hash) else {
                return false;
            };
            self.index_point(node, hash);
            self.len.fetch_add(1, Mem::Relaxed);
            return true;
        }
        let height = self.random_height();
        let Some(node) = self.new_node(height, user_key, trailer, value, hash) else {
            return false;
        };
        let key = Target::new(user_key);
        // Relaxed: a reader that sees the new height before the node's upper links finds null
        // links from the head there and just moves down a level.
        self.height.fetch_max(height, Mem::Relaxed);
        let mut splices = self.find_splices(key);
        prefetch(bucket.load(Mem::Relaxed));
        for (level, splice) in splices.iter_mut().enumerate().take(height) {
            loop {
                let (prev, next) = *splice;
                if level == 0 && next.is_some_and(|n| n.compare(key) == Ordering::Equal) {
                    // The key has a key node (linked since the chain was walked above): this
                    // node is one of its versions, in the point index alone.
                    self.index_point(node, hash);
                    self.len.fetch_add(1, Mem::Relaxed);
                    return true;
                }
                // Nobody else reads or writes this link until the CAS below publishes the node
                // at this level, so Relaxed is enough; the CAS's Release covers it.
                node.link(level).store(raw(next), Mem::Relaxed);
                let swung = self.link(prev, level).compare_exchange(
                    raw(next),
                    node.ptr.as_ptr(),
                    Mem::Release,
                    Mem::Relaxed,
                );
                if swung.is_ok() {
                    break;
                }
                // Someone linked a node after `prev` first; `prev` is still before `key`.
                *splice = self.find_splice(key, prev, level);
            }
        }
        self.index_point(node, hash);
        self.len.fetch_add(1, Mem::Relaxed);
        true
    }

    /// The nodes of a point-index chain, from the bucket's newest down.
    fn chain<'a>(&'a self, bucket: &'a Link) -> impl Iterator<Item = NodeRef<'a>> + 'a {
        std::iter::successors(self.point_node(bucket), move |n| self.point_node(n.point_next()))
    }

    /// The versions of key node `node`'s user key, newest first (module comment).
    fn versions<'a>(&'a self, node: NodeRef<'a>) -> impl Iterator<Item = NodeRef<'a>> + 'a {
        let user_key = node.user_key();
        let hash = point_hash(user_key);
        let tag = (hash >> 32) as u32;
        self.chain(self.point_bucket(hash)).filter(move |n| n.is_version_of(tag, user_key))
    }

    /// The versions of `version`'s user key older than it, newest first: the rest of its
    /// chain.
    fn older_versions<'a>(
        &'a self,
        version: NodeRef<'a>,
    ) -> impl Iterator<Item = NodeRef<'a>> + 'a {
        let (tag, user_key) = (version.tag(), version.user_key());
        std::iter::successors(self.point_node(version.point_next()), move |n| {
            self.point_node(n.point_next())
        })
        .filter(move |n| n.is_version_of(tag, user_key))
    }

    /// Starts loading the point-index bucket of `user_key` ([`SkipList::insert`]'s first
    /// cache miss in a large list). Only a hint.
    pub(crate) fn prefetch_bucket(&self, user_key: &[u8]) {
        prefetch(ptr::from_ref(self.point_bucket(point_hash(user_key))).cast());
    }

    /// Starts loading the newest node of `user_key`'s bucket (the second miss): best some
    /// inserts after [`SkipList::prefetch_bucket`], once the bucket has arrived. Only a hint.
    pub(crate) fn prefetch_chain_head(&self, user_key: &[u8]) {
        // Relaxed: the pointer is only a hint, never followed here.
        prefetch(self.point_bucket(point_hash(user_key)).load(Mem::Relaxed));
    }

    /// The bucket of a user key's `point_hash`.
    fn point_bucket(&self, hash: u64) -> &Link {
        &self.points[hash as usize & (self.points.len() - 1)]
    }

    /// The node a point-index link holds, `None` at the end of the chain.
    fn point_node<'a>(&'a self, link: &'a Link) -> Option<NodeRef<'a>> {
        // Acquire pairs with the Release CAS that linked the node into the chain.
        let ptr = NonNull::new(link.load(Mem::Acquire))?;
        // SAFETY: as in `next`: chains hold only null or nodes of this list, each filled
        // before the Release CAS that linked it, and nodes live as long as `self`.
        Some(unsafe { NodeRef::new(ptr) })
    }

    /// Links `node` into its bucket's chain, after every newer node (module comment).
    fn index_point(&self, node: NodeRef<'_>, hash: u64) {
        let seq = node.seq();
        let mut prev = self.point_bucket(hash);
        loop {
            let mut next = self.point_node(prev);
            while let Some(n) = next {
                debug_assert_ne!(n.seq(), seq, "two entries of sequence {seq}");
                if n.seq() < seq {
                    break;
                }
                prev = n.point_next();
                next = self.point_node(prev);
            }
            // Nobody reads this link until the CAS below links the node; its Release covers
            // the store.
            node.point_next().store(raw(next), Mem::Relaxed);
            let linked =
                prev.compare_exchange(raw(next), node.ptr.as_ptr(), Mem::Release, Mem::Relaxed);
            if linked.is_ok() {
                self.flag_versions(node, hash);
                return;
            }
            // A node was linked after `prev` first; `prev` is still newer than `node`.
        }
    }

    /// After `node` was linked into its chain: marks its key's newer versions as having an
    /// older one and the first older version as having a newer one, and records in `node`'s
    /// flags whether it found either (module comment).
    fn flag_versions(&self, node: NodeRef<'_>, hash: u64) {
        // Between this insert's link and its loads below: of two versions linked at once, at
        // least one then sees the other.
        fence(Mem::SeqCst);
        let (tag, user_key) = (node.tag(), node.user_key());
        let mut newer = false;
        for n in self.chain(self.point_bucket(hash)) {
            if n.ptr == node.ptr {
                break;
            }
            if n.is_version_of(tag, user_key) {
                n.mark(OLDER_SOME);
                newer = true;
            }
        }
        let older = self.older_versions(node).next();
        if let Some(o) = older {
            o.mark(NEWER_SOME);
        }
        let older_bit = if older.is_some() { OLDER_SOME } else { OLDER_NONE };
        node.mark(older_bit | if newer { NEWER_SOME } else { NEWER_NONE });
    }

    /// The newest entry of `user_key` with a sequence number at or below `snapshot_seq`, as
    /// (internal key, value), found through the point index.
    pub(crate) fn get_point(&self, user_key: &[u8], snapshot_seq: u64) -> Option<(&[u8], &[u8])> {
        let hash = point_hash(user_key);
        let tag = (hash >> 32) as u32;
        let mut next = self.point_node(self.point_bucket(hash));
        while let Some(n) = next {
            // The tag rules out nearly every other key without touching its bytes.
            if n.tag() == tag && n.seq() <= snapshot_seq && key::user_key(n.key()) == user_key {
                return Some((n.key(), n.value()));
            }
            next = self.point_node(n.point_next());
        }
        None
    }

    /// Bytes of the point index's buckets (outside the arena).
    pub(crate) fn point_index_bytes(&self) -> usize {
        self.points.len() * size_of::<Link>()
    }

    /// Allocates and fills a node, unpublished; `None` if the arena is full.
    /// `hash` is the user key's [`point_hash`].
    fn new_node(
        &self,
        height: usize,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
        hash: u64,
    ) -> Option<NodeRef<'_>> {
        let key_len = user_key.len() + key::TRAILER_BYTES;
        assert!(key_len <= PART_BYTES_MAX, "internal key of {key_len} bytes");
        assert!(value.len() <= PART_BYTES_MAX, "value of {} bytes", value.len());
        let bytes = node_bytes(height, key_len, value.len());
        let layout = Layout::from_size_align(bytes, align_of::<Node>().max(align_of::<Link>()))
            .expect("node layout");
        let ptr = self.arena.alloc(layout)?.cast::<Node>();
        self.node_bytes.fetch_add(layout.pad_to_align().size(), Mem::Relaxed);
        let header = Node {
            key_len: key_len as u32,
            value_len: value.len() as u32,
            height: height as u8,
            flags: AtomicU8::new(0),
            tag: (hash >> 32) as u32,
            prefix: key_prefix(user_key),
            point_next: Link::new(ptr::null_mut()),
        };
        // SAFETY: the arena handed out `bytes` fresh bytes at `ptr`, aligned for Node and Link,
        // that no other thread can reach until the node is published; each write below stays
        // within `node_bytes(height, key_len, value_len)` by the layout in the module comment.
        unsafe {
            ptr.as_ptr().write(header);
            let tower = ptr.as_ptr().byte_add(TOWER_OFFSET).cast::<Link>();
            for level in 0..height {
                tower.add(level).write(Link::new(ptr::null_mut()));
            }
            let key_at = tower.add(height).cast::<u8>();
            ptr::copy_nonoverlapping(user_key.as_ptr(), key_at, user_key.len());
            let trailer_at = key_at.add(user_key.len());
            ptr::copy_nonoverlapping(trailer.to_le_bytes().as_ptr(), trailer_at, 8);
            let value_at = trailer_at.add(key::TRAILER_BYTES);
            ptr::copy_nonoverlapping(value.as_ptr(), value_at, value.len());
        }
        // SAFETY: the node was filled just above by this thread and lives in `self.arena`.
        Some(unsafe { NodeRef::new(ptr) })
    }

    /// A height in 1..=HEIGHT_MAX, each level above the first with probability 1/BRANCHING.
    fn random_height(&self) -> usize {
        // SplitMix64: a shared atomic counter stepped by the golden gamma, then mixed. Every
        // caller gets its own counter value, so concurrent writers need no lock and no
        // thread-local state, and single-threaded runs are repeatable.
        let mut z = self.rng.fetch_add(0x9e37_79b9_7f4a_7c15, Mem::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // Each run of log2(BRANCHING) zero bits at the bottom is one more level.
        let extra = z.trailing_zeros() / BRANCHING.trailing_zeros();
        (1 + extra as usize).min(HEIGHT_MAX)
    }

    /// The link after `prev` at `level` (`None` = the head's).
    fn link<'a>(&'a self, prev: Option<NodeRef<'a>>, level: usize) -> &'a Link {
        match prev {
            None => &self.head[level],
            Some(node) => node.link(level),
        }
    }

    /// The node after `prev` at `level`, `None` at the end.
    fn next<'a>(&'a self, prev: Option<NodeRef<'a>>, level: usize) -> Option<NodeRef<'a>> {
        // Acquire pairs with the Release CAS that published the node: its bytes are visible.
        let ptr = NonNull::new(self.link(prev, level).load(Mem::Acquire))?;
        // SAFETY: links hold only null or nodes of this list, each filled before the Release
        // CAS (or the Relaxed store covered by a later Release CAS) that made it reachable;
        // the Acquire load above makes those writes visible, and nodes live as long as `self`.
        Some(unsafe { NodeRef::new(ptr) })
    }

    /// Walks `level` from `prev` to the last key node before `key` and the one after it (at or
    /// after `key`).
    fn find_splice<'a>(
        &'a self,
        key: Target<'_>,
        mut prev: Option<NodeRef<'a>>,
        level: usize,
    ) -> Splice<'a> {
        loop {
            let next = self.next(prev, level);
            if let Some(n) = next {
                // The walk's next hop, and the first hop of the level below if the walk stops
                // here, are cache misses in a large list: start both while `n`'s key is
                // compared.
                prefetch(n.link(level).load(Mem::Relaxed));
                if level > 0 {
                    prefetch(self.link(prev, level - 1).load(Mem::Relaxed));
                }
            }
            if next.is_none_or(|n| n.compare(key) != Ordering::Less) {
                return (prev, next);
            }
            prev = next;
        }
    }

    /// The splice of `key` at every level, found top down so each level starts where the
    /// level above stopped.
    fn find_splices(&self, key: Target<'_>) -> [Splice<'_>; HEIGHT_MAX] {
        let mut splices = [(None, None); HEIGHT_MAX];
        let mut prev = None;
        for level in (0..HEIGHT_MAX).rev() {
            splices[level] = self.find_splice(key, prev, level);
            prev = splices[level].0;
        }
        splices
    }

    /// The boundary of the prefix of the list for which `before` holds: the last node of the
    /// prefix (`None` = the head) and the node the walk found after it (`None` = the end),
    /// both as seen by one walk.
    ///
    /// The successor must be the node the walk compared, never a second load of the last
    /// node's link: a writer may link a node between the two meanwhile, and that node can sort
    /// before the boundary. A seek that loaded the link again returned such a node (a key
    /// below its target), so a point read saw another user key and missed an entry it should
    /// have found (issue #9: reads missing acknowledged writes under several writers).
    fn boundary<'a>(&'a self, before: impl Fn(NodeRef<'a>) -> bool) -> Splice<'a> {
        let mut prev = None;
        let mut next = None;
        for level in (0..self.height.load(Mem::Relaxed)).rev() {
            next = self.next(prev, level);
            while let Some(n) = next {
                if !before(n) {
                    break;
                }
                prev = Some(n);
                next = self.next(prev, level);
            }
        }
        (prev, next)
    }

    /// The last key node whose user key `before` holds for (`None` = the head), where
    /// `before` holds for a prefix of the list.
    fn last_where(&self, before: impl Fn(&[u8]) -> bool) -> Option<NodeRef<'_>> {
        self.boundary(|n| before(n.user_key())).0
    }

    /// The first entry at or after `target`, as (internal key, value). Point reads go
    /// through [`SkipList::get_point`]; the unit tests and the shuttle model
    /// (`crates/lsm-model`) check the two against each other.
    #[allow(dead_code)]
    pub(crate) fn first_at_or_after(&self, target: &[u8]) -> Option<(&[u8], &[u8])> {
        self.seek(target).map(|(_, v)| (v.key(), v.value()))
    }

    /// The first entry at or after the internal key `target`: its key node and version.
    fn seek(&self, target: &[u8]) -> Option<(NodeRef<'_>, NodeRef<'_>)> {
        let (user_key, trailer) = (key::user_key(target), key::trailer_of(target));
        let t = Target::new(user_key);
        let node = self.boundary(|n| n.compare(t) == Ordering::Less).1?;
        if node.compare(t) == Ordering::Equal {
            if node.surely_newest() && node.surely_oldest() {
                // The key's only version: no chain to walk.
                if node.trailer() <= trailer {
                    return Some((node, node));
                }
                return self.first_version_from(self.next(Some(node), 0));
            }
            // Versions at or after the target: the newest with a trailer at or below its.
            if let Some(v) = self.versions(node).find(|v| v.trailer() <= trailer) {
                return Some((node, v));
            }
            return self.first_version_from(self.next(Some(node), 0));
        }
        self.first_version_from(Some(node))
    }

    /// The newest version of the first key node from `node` on that has one in the point
    /// index. A key node has one once its insert finished; a read never waits for an insert
    /// in flight (its entry is above every published sequence), so one without is passed.
    fn first_version_from<'a>(
        &'a self,
        mut node: Option<NodeRef<'a>>,
    ) -> Option<(NodeRef<'a>, NodeRef<'a>)> {
        loop {
            let n = node?;
            if n.surely_newest() {
                // Its key's newest version: no chain to walk (module comment).
                return Some((n, n));
            }
            if let Some(v) = self.versions(n).next() {
                return Some((n, v));
            }
            node = self.next(Some(n), 0);
        }
    }

    /// The oldest version of the last key node from `node` back that has one.
    fn last_version_back_from<'a>(
        &'a self,
        mut node: Option<NodeRef<'a>>,
    ) -> Option<(NodeRef<'a>, NodeRef<'a>)> {
        loop {
            let n = node?;
            if n.surely_oldest() {
                return Some((n, n));
            }
            if let Some(v) = self.versions(n).last() {
                return Some((n, v));
            }
            node = self.before(n);
        }
    }

    /// The key node before `node` (a search from the head: nodes have no back links).
    fn before<'a>(&'a self, node: NodeRef<'a>) -> Option<NodeRef<'a>> {
        let user_key = node.user_key();
        self.last_where(|k| k < user_key)
    }

    /// The user keys of the key nodes, in level 0's order: each user key once (the tests'
    /// and the shuttle model's check of the module comment's rule).
    #[allow(dead_code)]
    pub(crate) fn key_nodes(&self) -> Vec<&[u8]> {
        std::iter::successors(self.next(None, 0), |&n| self.next(Some(n), 0))
            .map(|n| n.user_key())
            .collect()
    }

    /// Panics unless every node's flags say exactly whether its key has older and newer
    /// versions: what they must say once every insert has returned (the tests' and the
    /// shuttle model's check of the module comment's rule).
    #[allow(dead_code)]
    pub(crate) fn check_version_flags(&self) {
        for bucket in self.points.iter() {
            for n in self.chain(bucket) {
                let (tag, user_key, seq) = (n.tag(), n.user_key(), n.seq());
                let versions: Vec<u64> = self
                    .chain(bucket)
                    .filter(|v| v.is_version_of(tag, user_key))
                    .map(|v| v.seq())
                    .collect();
                let has_older = versions.iter().any(|&v| v < seq);
                let has_newer = versions.iter().any(|&v| v > seq);
                let flags = n.flags().load(Mem::Acquire);
                let (older, newer) =
                    (flags & (OLDER_NONE | OLDER_SOME), flags & (NEWER_NONE | NEWER_SOME));
                assert!(older != 0 && newer != 0, "{user_key:?}@{seq}: flags {flags:#x} unset");
                assert_eq!(
                    n.surely_oldest(),
                    !has_older,
                    "{user_key:?}@{seq} among {versions:?}: flags {flags:#x}"
                );
                assert_eq!(
                    n.surely_newest(),
                    !has_newer,
                    "{user_key:?}@{seq} among {versions:?}: flags {flags:#x}"
                );
            }
        }
    }

    /// Entries inserted (key nodes and version nodes).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Mem::Relaxed)
    }

    /// Bytes of the nodes allocated so far (see the field).
    pub(crate) fn node_bytes(&self) -> usize {
        self.node_bytes.load(Mem::Relaxed)
    }

    /// The arena the nodes live in.
    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }
}

/// A position in a list that keeps the list alive: the memtable iterator's engine.
///
/// `next` follows level 0; `prev` and `seek_for_prev` search again from the head (nodes have
/// no back links), O(log n) each.
pub(crate) struct Cursor {
    list: std::sync::Arc<SkipList>,
    /// The current key node of `list` and the version of its user key the cursor is on;
    /// `None` when not on an entry.
    at: At,
}

// SAFETY: the cursor's node pointers are only a position in `list`, whose nodes are immutable
// after publication except for their atomic links, and which the Arc keeps alive wherever the
// cursor goes; SkipList itself is Send + Sync.
unsafe impl Send for Cursor {}
// SAFETY: `&Cursor` only reads the nodes' immutable bytes and atomic links (see `Send`).
unsafe impl Sync for Cursor {}

/// A cursor position as raw pointers (see [`Cursor::at`]).
type At = Option<(NonNull<Node>, NonNull<Node>)>;

/// [`At`] of a position found in a list.
fn at(found: Option<(NodeRef<'_>, NodeRef<'_>)>) -> At {
    found.map(|(n, v)| (n.ptr, v.ptr))
}

impl Cursor {
    /// A cursor on `list`, not on an entry.
    pub(crate) fn new(list: std::sync::Arc<SkipList>) -> Cursor {
        Cursor { list, at: None }
    }

    /// The current key node and version, with the lifetime of the borrow of `self` (which
    /// holds the list).
    fn current(&self) -> Option<(NodeRef<'_>, NodeRef<'_>)> {
        // SAFETY: every pointer stored in `at` came from a NodeRef of `self.list`, so it is a
        // fully written node, and the list (with its arena) lives as long as `self` holds it.
        self.at.map(|(n, v)| unsafe { (NodeRef::new(n), NodeRef::new(v)) })
    }

    fn expect_current(&self) -> (NodeRef<'_>, NodeRef<'_>) {
        self.current().expect("memtable cursor used while not valid")
    }

    pub(crate) fn valid(&self) -> bool {
        self.at.is_some()
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.at = at(self.list.first_version_from(self.list.next(None, 0)));
    }

    pub(crate) fn seek_to_last(&mut self) {
        self.at = at(self.list.last_version_back_from(self.list.last_where(|_| true)));
    }

    pub(crate) fn seek(&mut self, target: &[u8]) {
        self.at = at(self.list.seek(target));
    }

    /// The last entry at or before `target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        let list = &self.list;
        let (user_key, trailer) = (key::user_key(target), key::trailer_of(target));
        let found = match list.last_where(|k| k <= user_key) {
            Some(node) if node.user_key() == user_key => {
                // Versions at or before the target: the oldest with a trailer at or above
                // its.
                match list.versions(node).take_while(|v| v.trailer() >= trailer).last() {
                    Some(v) => Some((node, v)),
                    None => list.last_version_back_from(list.before(node)),
                }
            }
            node => list.last_version_back_from(node),
        };
        self.at = at(found);
    }

    pub(crate) fn next(&mut self) {
        let (node, version) = self.expect_current();
        let older =
            if version.surely_oldest() { None } else { self.list.older_versions(version).next() };
        let found = match older {
            Some(older) => Some((node, older)),
            None => self.list.first_version_from(self.list.next(Some(node), 0)),
        };
        self.at = at(found);
    }

    /// Moves to the next key node's newest version, past the current key's older versions.
    pub(crate) fn next_user_key(&mut self) {
        let (node, _) = self.expect_current();
        self.at = at(self.list.first_version_from(self.list.next(Some(node), 0)));
    }

    pub(crate) fn prev(&mut self) {
        let (node, version) = self.expect_current();
        let trailer = version.trailer();
        let newer = if version.surely_newest() {
            None
        } else {
            self.list.versions(node).take_while(|v| v.trailer() > trailer).last()
        };
        let found = match newer {
            Some(newer) => Some((node, newer)),
            None => self.list.last_version_back_from(self.list.before(node)),
        };
        self.at = at(found);
    }

    pub(crate) fn key(&self) -> &[u8] {
        self.expect_current().1.key()
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.expect_current().1.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Kind;

    #[test]
    #[cfg_attr(miri, ignore = "statistics need many draws; no unsafe code is involved")]
    fn heights_follow_a_quarter_branching() {
        let list = SkipList::new(1 << 20, 1 << 16);
        let draws = 40_000;
        let mut at_least = [0usize; HEIGHT_MAX + 1];
        for _ in 0..draws {
            let h = list.random_height();
            assert!((1..=HEIGHT_MAX).contains(&h));
            for c in at_least.iter_mut().take(h + 1) {
                *c += 1;
            }
        }
        // P(height >= 2) = 1/4 and P(height >= 3) = 1/16; allow wide statistical slack.
        assert!((8_000..12_000).contains(&at_least[2]), "{}", at_least[2]);
        assert!((1_800..3_200).contains(&at_least[3]), "{}", at_least[3]);
    }

    /// Every key over `alphabet` of each length in `lens`.
    fn all_keys(alphabet: &[u8], lens: std::ops::RangeInclusive<usize>) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for len in lens {
            let mut key = vec![alphabet[0]; len];
            'next: loop {
                keys.push(key.clone());
                // Count up in base `alphabet.len()`, the last byte fastest.
                for i in (0..len).rev() {
                    let at = alphabet.iter().position(|&b| b == key[i]).unwrap();
                    if at + 1 < alphabet.len() {
                        key[i] = alphabet[at + 1];
                        continue 'next;
                    }
                    key[i] = alphabet[0];
                }
                break;
            }
        }
        keys
    }

    /// A node's prefix comparison agrees with the byte order of user keys for every pair of
    /// keys shorter and longer than the prefix, with zero bytes, and prefixes of each other.
    #[test]
    #[cfg_attr(miri, ignore = "a million comparisons; the unsafe parts are covered elsewhere")]
    fn prefix_comparison_agrees_with_key_order() {
        let mut keys = all_keys(&[0, 1, 0xff], 0..=5);
        keys.extend(all_keys(&[0, 0xff], 7..=9));
        let list = SkipList::new(1 << 20, 1 << 16);
        let nodes: Vec<_> = keys
            .iter()
            .map(|k| list.new_node(1, k, key::trailer(1, Kind::Put), b"", point_hash(k)).unwrap())
            .collect();
        for k in &keys {
            for node in &nodes {
                assert_eq!(
                    node.compare(Target::new(k)),
                    node.user_key().cmp(k.as_slice()),
                    "{:?} against {k:?}",
                    node.user_key()
                );
            }
        }
    }

    #[test]
    fn node_layout_round_trips_key_value_and_height() {
        let list = SkipList::new(1 << 16, 1 << 12);
        let hash = point_hash(b"user");
        let node = list.new_node(5, b"user", key::trailer(7, Kind::Put), b"value", hash).unwrap();
        assert_eq!(node.height(), 5);
        assert_eq!(node.prefix(), u64::from_be_bytes(*b"user\0\0\0\0"));
        assert_eq!(node.tag(), (hash >> 32) as u32);
        assert!(node.point_next().load(Mem::Relaxed).is_null());
        assert_eq!(node.key(), key::encode(b"user", 7, Kind::Put));
        assert_eq!(node.value(), b"value");
        for level in 0..5 {
            assert!(node.link(level).load(Mem::Relaxed).is_null());
        }
        let empty =
            list.new_node(1, b"", key::trailer(0, Kind::Delete), b"", point_hash(b"")).unwrap();
        assert_eq!(empty.key(), key::encode(b"", 0, Kind::Delete));
        assert_eq!(empty.value(), b"");
    }

    /// The point index against a seek of the levels, in a list of 128 buckets for 800
    /// entries (chains of several keys), with the versions of each key inserted in scattered
    /// sequence order: at every snapshot both find the same entry, the newest of its key at
    /// or below it.
    #[test]
    fn point_lookups_agree_with_seeks_in_crowded_buckets() {
        let list = SkipList::new(128 * POINT_CAPACITY_BYTES_PER_BUCKET, 1 << 12);
        assert_eq!(list.point_index_bytes(), 128 * size_of::<Link>());
        let (keys, versions) = (200u64, 4u64);
        let count = keys * versions;
        for i in 0..count {
            // Sequence numbers 1..=count in a scattered order (97 is coprime to 800).
            let seq = (i * 97) % count + 1;
            let k = format!("key:0000000{:04}", seq % keys);
            assert!(list.insert(k.as_bytes(), key::trailer(seq, Kind::Put), &seq.to_le_bytes()));
        }
        for k in 0..keys + 2 {
            let user_key = format!("key:0000000{k:04}");
            for snapshot in 0..=count + 1 {
                let target = key::encode(user_key.as_bytes(), snapshot, Kind::SEEK);
                let by_seek = list
                    .first_at_or_after(&target)
                    .filter(|(ikey, _)| key::user_key(ikey) == user_key.as_bytes());
                let by_point = list.get_point(user_key.as_bytes(), snapshot);
                assert_eq!(by_point, by_seek, "{user_key} at {snapshot}");
                let newest = (1..=snapshot.min(count)).rev().find(|s| s % keys == k);
                assert_eq!(by_point.map(|(ikey, _)| key::trailer_of(ikey) >> 8), newest);
            }
        }
    }

    /// Threads racing to insert the first and later versions of the same user keys leave one
    /// key node per user key in the levels, every version in the point index, and a cursor
    /// that walks them all in internal-key order.
    #[test]
    fn racing_versions_leave_one_key_node_per_user_key() {
        let (threads, keys, rounds) = (4u64, 8u64, if cfg!(miri) { 4 } else { 200 });
        let list = std::sync::Arc::new(SkipList::new(1 << 22, 1 << 12));
        std::thread::scope(|scope| {
            for t in 0..threads {
                let list = &list;
                scope.spawn(move || {
                    for r in 0..rounds {
                        for k in 0..keys {
                            let seq = (r * keys + k) * threads + t + 1;
                            let user_key = format!("key:00000000{k:02}");
                            let trailer = key::trailer(seq, Kind::Put);
                            assert!(list.insert(user_key.as_bytes(), trailer, b"v"));
                        }
                    }
                });
            }
        });
        let expected: Vec<Vec<u8>> =
            (0..keys).map(|k| format!("key:00000000{k:02}").into_bytes()).collect();
        assert_eq!(list.key_nodes(), expected, "one key node per user key, in order");
        list.check_version_flags();
        let total = (threads * keys * rounds) as usize;
        assert_eq!(list.len(), total);
        let mut cursor = Cursor::new(list.clone());
        cursor.seek_to_first();
        let mut seen = Vec::new();
        while cursor.valid() {
            seen.push(cursor.key().to_vec());
            cursor.next();
        }
        assert_eq!(seen.len(), total, "every version once");
        assert!(seen.windows(2).all(|w| key::compare(&w[0], &w[1]) == Ordering::Less));
        // Backward, the same entries in reverse.
        cursor.seek_to_last();
        let mut back = Vec::new();
        while cursor.valid() {
            back.push(cursor.key().to_vec());
            cursor.prev();
        }
        back.reverse();
        assert_eq!(back, seen);
    }

    #[test]
    fn every_level_is_sorted_and_a_sublist_of_the_one_below() {
        let count = if cfg!(miri) { 200 } else { 2000 };
        let list = SkipList::new(1 << 20, 1 << 14);
        for i in 0..count {
            // A scattered insertion order over keys (7919 is a prime, coprime to `count`).
            let k = (i * 7919) % count;
            assert!(list.insert(format!("{k:05}").as_bytes(), key::trailer(i, Kind::Put), b"v"));
        }
        let mut lower: Vec<Vec<u8>> = Vec::new();
        for level in 0..HEIGHT_MAX {
            let mut keys = Vec::new();
            let mut node = list.next(None, level);
            while let Some(n) = node {
                keys.push(n.key().to_vec());
                node = list.next(node, level);
            }
            for w in keys.windows(2) {
                assert_eq!(key::compare(&w[0], &w[1]), Ordering::Less, "level {level}");
            }
            if level == 0 {
                assert_eq!(keys.len() as u64, count);
            } else {
                let mut below = lower.iter();
                assert!(keys.iter().all(|k| below.any(|b| b == k)), "level {level} not a sublist");
            }
            lower = keys;
        }
    }
}
