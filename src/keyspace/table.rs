//! The key table: a hash table of packed entries in cache-line buckets that grows and
//! shrinks incrementally.
//!
//! Every key has two candidate buckets (two-choice hashing): a new key goes to the one
//! whose chain is shorter, and stays there. Entries carry no chain link; a bucket holds
//! eight tagged entry pointers and overflows into a chained bucket when full
//! (`buckets.rs`). With two choices the chains stay even, so a table is sized as
//! Redis's dict is, one entry slot per key (it grows at a load of 1): a million keys
//! take 2^17 buckets, 8.4 bytes per key, with about one bucket in six overflowing.
//! Looking up reads the first candidate's line, then the second's if the key is not
//! in the first.
//!
//! Like Redis's dict it keeps two bucket arrays while resizing and moves a few buckets
//! on every write and on a timer, so doubling at ten million keys never stops the
//! world. Bucket counts are powers of two, and a resize moves each entry to an image of
//! the bucket it was in (the candidate it had taken, under the new mask), which is what
//! lets SCAN's reverse-binary cursor visit every bucket of the smaller table together
//! with all of its images in the larger one: a key present for a whole SCAN is
//! returned at least once even while the table grows or shrinks between calls. Entries
//! never change bucket otherwise.
//!
//! Background snapshots are key-level copy-on-write (`cow_begin`): starting one flips
//! the table's snapshot mark, so every existing entry's mark differs from it
//! ("unwritten"), while entries created afterwards carry the current mark (they are
//! not part of the image). The snapshot's walker (`cow_walk`) visits buckets in SCAN
//! order, which never misses an entry present throughout, however the table resizes,
//! and hands each unwritten entry to the `CowSink`; and every mutating path of this
//! table (`EntryMut`'s mutators, `insert`, `set_expire`, `remove`, dropping the table)
//! first hands an unwritten entry's current contents to the sink. Because the hook is
//! here, no caller can forget it: expiry, eviction, RENAME, MOVE, lazy free, field
//! expiry and every command reach entries only through these methods.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::buckets::{self, Bucket, Pos, SLOTS};
use super::entry::{EntryPtr, IntoEntry, SNAP_MARK};
use super::slot_index::SlotIndex;
use super::value::{Value, ValueRef};

/// Entry slots of the smallest table, as Redis's dict (4 buckets): it lives in one
/// bucket, and grows to 8 (the same bucket size) at its fifth key as Redis's does.
const INITIAL_SLOTS: usize = 4;

/// Buckets that hold a table of `slots` entry slots.
fn buckets_for(slots: usize) -> usize {
    slots.div_ceil(SLOTS)
}
/// Under `maxmemory`, a table this full or less does not double if the new bucket
/// array would take memory over the limit (Redis's dictExpandAllowed): the doubling
/// itself would make the server evict keys. Beyond it, it grows regardless.
const GROW_ANYWAY_LOAD_PERMILLE: usize = 1618;

/// The memory (bytes of `used_memory`) a table's growth must stay within while its load
/// is at most `GROW_ANYWAY_LOAD_PERMILLE`; 0: no limit. One per process, as maxmemory:
/// the executor sets it from `maxmemory` plus the memory eviction leaves out.
static GROW_LIMIT: AtomicUsize = AtomicUsize::new(0);

pub fn set_grow_limit(bytes: usize) {
    GROW_LIMIT.store(bytes, Ordering::Relaxed);
}

/// Whether adding `more` bytes of bucket array keeps memory within the grow limit.
fn growth_fits(more: usize) -> bool {
    let limit = GROW_LIMIT.load(Ordering::Relaxed);
    limit == 0 || crate::alloc::used_memory() + more <= limit
}

/// Buckets examined at most per rehash step when they turn out empty.
const EMPTY_VISITS_PER_STEP: usize = 10;
/// Buckets a snapshot walk requests memory for together (`cow_walk`): about thirty
/// entries, as many misses as a core keeps in flight.
const WALK_BATCH: usize = 4;

/// Entry slots per bucket (`buckets.rs`).
pub(super) const BUCKET_SLOTS: usize = SLOTS;

/// The most keys `KeyTable::prefetch` takes at once.
pub const PREFETCH_BATCH: usize = 16;

/// A key's second candidate bucket index before masking: the high half of a multiply
/// of its hash, so that it does not follow from the first (the low bits).
#[inline(always)]
fn second_choice(h: u64) -> usize {
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
}

/// The two candidate buckets of hash `h` in an array of `mask + 1` buckets.
#[inline(always)]
fn choices(h: u64, mask: usize) -> (usize, usize) {
    (h as usize & mask, second_choice(h) & mask)
}

pub struct KeyTable {
    tables: [Vec<Bucket>; 2],
    /// Each array's size in entry slots (the number it grows at); 0 for no array.
    /// Bucket count × 8, except that the smallest size, 4, also takes a bucket.
    sizes: [usize; 2],
    /// Next bucket of `tables[0]` to move while resizing; `None` when not resizing.
    rehash_idx: Option<usize>,
    len: usize,
    hasher: foldhash::fast::FixedState,
    /// The mark new entries get; entries whose mark differs are unwritten by the
    /// snapshot in progress. Outside a snapshot every entry carries this mark.
    mark: u32,
    /// The snapshot in progress on this table, if any.
    cow: Option<Box<Cow>>,
    /// Cluster mode's per-slot key index (`slot_index.rs`); None otherwise.
    slot_index: Option<Box<SlotIndex>>,
}

/// Receives the entries a background snapshot must contain, each exactly once:
/// from the walker, or just before the entry is modified or removed.
pub trait CowSink: Send {
    /// `before_write` tells a copy-on-write (the entry is about to change) from the
    /// walker's visit.
    fn save(
        &mut self,
        key: &[u8],
        value: ValueRef<'_>,
        expire: Option<i64>,
        access: u32,
        before_write: bool,
    );
    /// Hands buffered output on (called once per event-loop turn).
    fn flush(&mut self);
    /// A cancelled snapshot only needs the marks brought back in line: an unwritten
    /// table dropped then costs nothing.
    fn discarding(&self) -> bool;
}

struct Cow {
    sink: Box<dyn CowSink>,
    /// The walker's SCAN cursor.
    cursor: u64,
}

impl Cow {
    /// Saves `e` if it is still unwritten, and marks it written.
    fn save(&mut self, e: EntryPtr, mark: u32, before_write: bool) {
        if e.snap_mark() != mark {
            self.sink
                .save(e.key(), e.value(), e.expire(), e.lru(), before_write);
            e.set_snap_mark(mark);
        }
    }
}

// SAFETY: the table exclusively owns its bucket arrays, their overflow buckets and every
// entry reachable from them, and the entries own their boxed payloads, which are `Send`
// (Value's contents are all `Send`); nothing is shared with another table or thread.
unsafe impl Send for KeyTable {}

/// What `prefetch` guessed for each key of its batch: the first entry whose tag
/// matched, not yet compared with the key.
pub struct Likely<'a> {
    found: [Option<EntryPtr>; PREFETCH_BATCH],
    _table: std::marker::PhantomData<&'a KeyTable>,
}

impl<'a> Likely<'a> {
    /// The `i`th key's entry, if the guess was right (`key` is that key): a lookup's
    /// answer without a second hash and bucket walk.
    pub fn entry(&self, i: usize, key: &[u8]) -> Option<EntryRef<'a>> {
        let ptr = (*self.found.get(i)?)?;
        (ptr.key() == key).then_some(EntryRef {
            ptr,
            _table: std::marker::PhantomData,
        })
    }
}

/// A borrowed entry: key, expiry and value, valid while the table is borrowed.
#[derive(Clone, Copy)]
pub struct EntryRef<'a> {
    ptr: EntryPtr,
    _table: std::marker::PhantomData<&'a KeyTable>,
}

impl<'a> EntryRef<'a> {
    pub fn key(&self) -> &'a [u8] {
        self.ptr.key()
    }
    pub fn expire(&self) -> Option<i64> {
        self.ptr.expire()
    }
    pub fn value(&self) -> ValueRef<'a> {
        self.ptr.value()
    }
    pub fn lru(&self) -> u32 {
        self.ptr.lru()
    }
    /// Bytes of the entry's allocation, for MEMORY USAGE.
    pub fn alloc_size(&self) -> usize {
        self.ptr.alloc_size()
    }
}

/// A mutably borrowed entry. Its mutators first let a snapshot in progress copy the
/// entry's current contents.
pub struct EntryMut<'a> {
    ptr: EntryPtr,
    cow: Option<&'a mut Cow>,
    mark: u32,
}

impl<'a> EntryMut<'a> {
    pub fn key(&self) -> &[u8] {
        self.ptr.key()
    }
    pub fn expire(&self) -> Option<i64> {
        self.ptr.expire()
    }
    pub fn value(&self) -> ValueRef<'_> {
        self.ptr.value()
    }
    fn before_write(&mut self) {
        if let Some(c) = self.cow.as_deref_mut() {
            c.save(self.ptr, self.mark, true);
        }
    }
    pub fn object_mut(&mut self) -> Option<super::value::ObjMut<'_>> {
        self.before_write();
        self.ptr.object_mut()
    }
    pub fn raw_string_mut(&mut self) -> Option<&mut Vec<u8>> {
        self.before_write();
        self.ptr.raw_string_mut()
    }
    pub fn set_int_in_place(&mut self, n: i64) -> bool {
        self.before_write();
        self.ptr.set_int_in_place(n)
    }
    pub fn set_expire_in_place(&mut self, t: i64) -> bool {
        self.before_write();
        self.ptr.set_expire_in_place(t)
    }
    pub fn set_lru(&mut self, lru: u32) {
        self.ptr.set_lru(lru)
    }
    pub fn lru(&self) -> u32 {
        self.ptr.lru()
    }
    pub fn into_ref(self) -> EntryRef<'a> {
        EntryRef {
            ptr: self.ptr,
            _table: std::marker::PhantomData,
        }
    }
}

/// Where a found key's entry sits: array, bucket, position in the bucket's chain.
#[derive(Clone, Copy)]
struct Loc {
    table: usize,
    bucket: usize,
    pos: Pos,
}

impl Default for KeyTable {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyTable {
    pub fn new() -> Self {
        KeyTable {
            tables: [Vec::new(), Vec::new()],
            sizes: [0, 0],
            rehash_idx: None,
            len: 0,
            hasher: foldhash::fast::FixedState::with_seed(fastrand::u64(..)),
            mark: 0,
            cow: None,
            slot_index: None,
        }
    }

    /// A new empty table that keeps a per-slot index when `indexed` (cluster mode).
    pub fn with_slot_index(indexed: bool) -> Self {
        let mut t = KeyTable::new();
        if indexed {
            t.slot_index = Some(Box::default());
        }
        t
    }

    /// Starts keeping the per-slot key index (cluster mode), indexing the keys
    /// already present.
    pub fn enable_slot_index(&mut self) {
        if self.slot_index.is_some() {
            return;
        }
        let mut ix = Box::new(SlotIndex::new());
        self.for_each_ptr(|e| ix.add(e.key(), self.hash(e.key())));
        self.slot_index = Some(ix);
    }

    pub fn has_slot_index(&self) -> bool {
        self.slot_index.is_some()
    }

    /// Keys hashing to cluster slot `slot`; None without an index.
    pub fn slot_key_count(&self, slot: usize) -> Option<usize> {
        self.slot_index.as_ref().map(|ix| ix.count(slot))
    }

    /// Calls `f` with up to `max` keys of cluster slot `slot` (nothing without an
    /// index): each indexed hash selects two candidate buckets per array, whose entries
    /// with that hash and slot are the slot's keys.
    pub fn slot_keys(&self, slot: usize, max: usize, mut f: impl FnMut(&[u8])) {
        let Some(ix) = self.slot_index.as_deref() else {
            return;
        };
        let mut n = 0;
        for h in ix.hashes(slot) {
            for t in 0..=1 {
                let table = &self.tables[t];
                if !table.is_empty() {
                    let (a, b) = choices(h, table.len() - 1);
                    let distinct = if a == b { 1 } else { 2 };
                    for &i in &[a, b][..distinct] {
                        table[i].for_each(|e| {
                            let key = e.key();
                            if n < max
                                && self.hash(key) == h
                                && crate::util::hashslot::key_slot(key) as usize == slot
                            {
                                f(key);
                                n += 1;
                            }
                        });
                    }
                }
                if self.rehash_idx.is_none() {
                    break;
                }
            }
            if n >= max {
                return;
            }
        }
    }

    /// Visits every entry once (no snapshot or resize work).
    fn for_each_ptr(&self, mut f: impl FnMut(EntryPtr)) {
        for table in &self.tables {
            for b in table {
                b.for_each(&mut f);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total entry slots of the bucket arrays (what Redis's dict calls its table size:
    /// the table grows when its keys reach it), for INFO-style reporting and tests.
    pub fn buckets(&self) -> usize {
        self.sizes[0] + self.sizes[1]
    }

    /// The size in entry slots of the main array (`rehashing` false) or of the one a
    /// resize fills (true): DEBUG HTSTATS's table size.
    pub fn array_slots(&self, rehashing: bool) -> usize {
        self.sizes[usize::from(rehashing)]
    }

    /// The number of entries in every bucket chain of the main array (`rehashing`
    /// false) or of the one a resize fills (true; None when not resizing): DEBUG
    /// HTSTATS.
    pub fn chain_lengths(&self, rehashing: bool) -> Option<impl Iterator<Item = usize> + '_> {
        if rehashing && self.rehash_idx.is_none() {
            return None;
        }
        let t = &self.tables[usize::from(rehashing)];
        Some(t.iter().map(Bucket::len))
    }

    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    /// Entry slots of the array being emptied by a resize in progress (0 when none):
    /// MEMORY STATS `overhead.db.hashtable.rehashing`.
    pub fn rehashing_buckets(&self) -> usize {
        if self.rehash_idx.is_some() {
            self.sizes[0]
        } else {
            0
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Asks the CPU for what looking up `keys` will read (both candidate buckets, the
    /// entry whose tag matches, its value), a batch at a time, so that a pipeline's
    /// cache misses overlap instead of each command stalling on its own (Valkey 8's
    /// batch prefetch). A hint only: nothing is changed, and a wrong guess costs
    /// nothing but the loads. Each level is requested for the whole batch before the
    /// next level is read, so the loads of one level are in flight together. Returns
    /// the entries guessed (by tag), for a next level the caller prefetches itself.
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Likely<'_> {
        const MAX: usize = PREFETCH_BATCH;
        let mut likely = Likely {
            found: [None; MAX],
            _table: std::marker::PhantomData,
        };
        if self.len == 0 {
            return likely;
        }
        // While resizing, a key is in either array; the newer one receives every
        // insert, so it is the better guess for a key not moved yet as well.
        let table = if self.rehash_idx.is_some() && !self.tables[1].is_empty() {
            &self.tables[1]
        } else {
            &self.tables[0]
        };
        if table.is_empty() {
            return likely;
        }
        let mask = table.len() - 1;
        let mut cands = [(0usize, 0usize, 0u64); MAX];
        let mut n = 0;
        for (c, key) in cands.iter_mut().zip(keys) {
            let h = self.hash(key);
            let (a, b) = choices(h, mask);
            table[a].prefetch();
            table[b].prefetch();
            *c = (a, b, buckets::tag(h));
            n += 1;
        }
        let found = &mut likely.found;
        for (f, &(a, b, tag)) in found.iter_mut().zip(&cands[..n]) {
            *f = table[a]
                .first_with_tag(tag)
                .or_else(|| table[b].first_with_tag(tag));
            if let Some(e) = f {
                e.prefetch();
            }
        }
        for e in found[..n].iter().flatten() {
            e.prefetch_value();
        }
        likely
    }

    /// Finds `key`'s entry and where it sits: in the main array, or while resizing in
    /// the one being filled.
    #[inline]
    fn locate(&self, key: &[u8], h: u64) -> Option<(EntryPtr, Loc)> {
        let tag = buckets::tag(h);
        let found = self.locate_in(0, key, h, tag);
        if found.is_some() || self.rehash_idx.is_none() {
            return found;
        }
        self.locate_in(1, key, h, tag)
    }

    /// Finds `key`'s entry in array `t`, looking in its distinct candidate buckets.
    #[inline(always)]
    fn locate_in(&self, t: usize, key: &[u8], h: u64, tag: u64) -> Option<(EntryPtr, Loc)> {
        let table = &self.tables[t];
        if table.is_empty() {
            return None;
        }
        let (a, b) = choices(h, table.len() - 1);
        let distinct = if a == b { 1 } else { 2 };
        for &bucket in &[a, b][..distinct] {
            if let Some((e, pos)) = table[bucket].find(tag, key) {
                return Some((
                    e,
                    Loc {
                        table: t,
                        bucket,
                        pos,
                    },
                ));
            }
        }
        None
    }

    fn find(&self, key: &[u8]) -> Option<EntryPtr> {
        if self.len == 0 {
            return None;
        }
        self.locate(key, self.hash(key)).map(|(e, _)| e)
    }

    pub fn get(&self, key: &[u8]) -> Option<EntryRef<'_>> {
        self.find(key).map(|ptr| EntryRef {
            ptr,
            _table: std::marker::PhantomData,
        })
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<EntryMut<'_>> {
        self.rehash_step();
        let ptr = self.find(key)?;
        Some(EntryMut {
            ptr,
            cow: self.cow.as_deref_mut(),
            mark: self.mark,
        })
    }

    /// `key`'s entry for writing; when it is missing, a new entry holding `make()`
    /// with access field `access()`, no expiry. One lookup where a test for the key
    /// and then an insert and a lookup took three. The flag: whether it was made.
    pub fn get_mut_or_insert_with(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> Value,
        access: impl FnOnce() -> u32,
    ) -> (EntryMut<'_>, bool) {
        self.rehash_step();
        let h = self.hash(key);
        let (ptr, made) = match self.locate(key, h) {
            Some((e, _)) => (e, false),
            None => (
                self.push_new(key, h, EntryPtr::new(key, None, make(), access())),
                true,
            ),
        };
        let e = EntryMut {
            ptr,
            cow: self.cow.as_deref_mut(),
            mark: self.mark,
        };
        (e, made)
    }

    /// Puts `entry`, for `key` (hash `h`) not in the table, in the emptier of its
    /// candidate buckets of the array receiving inserts.
    fn push_new(&mut self, key: &[u8], h: u64, entry: EntryPtr) -> EntryPtr {
        entry.set_snap_mark(self.mark);
        self.expand_if_needed();
        let t = if self.rehash_idx.is_some() { 1 } else { 0 };
        let table = &mut self.tables[t];
        let (a, b) = choices(h, table.len() - 1);
        let i = if a == b || table[a].len() <= table[b].len() {
            a
        } else {
            b
        };
        table[i].push(buckets::word(entry, buckets::tag(h)));
        self.len += 1;
        if let Some(ix) = self.slot_index.as_deref_mut() {
            ix.add(key, h);
        }
        entry
    }

    /// Lets a snapshot in progress save `e` before it changes.
    fn before_write(&mut self, e: EntryPtr) {
        if let Some(c) = self.cow.as_deref_mut() {
            c.save(e, self.mark, true);
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.find(key).is_some()
    }

    /// Puts a rebuilt entry in place of the one at `loc`.
    fn replace_at(&mut self, loc: Loc, entry: EntryPtr, h: u64) {
        self.tables[loc.table][loc.bucket].set(loc.pos, buckets::word(entry, buckets::tag(h)));
    }

    /// Inserts or replaces `key`. With `keep_ttl` a replaced key keeps its own expiry
    /// when it has one (found by this same lookup). Returns, if there was a previous
    /// entry, its expiry and its value when that owns memory of its own
    /// (`EntryPtr::into_old`: a short string or an integer is freed with its entry).
    pub fn insert(
        &mut self,
        key: &[u8],
        expire: Option<i64>,
        keep_ttl: bool,
        value: impl IntoEntry,
        access: impl FnOnce(Option<u32>) -> u32,
    ) -> Option<(Option<Value>, Option<i64>)> {
        self.rehash_step();
        let h = self.hash(key);
        if let Some((old, loc)) = self.locate(key, h) {
            self.before_write(old);
            let expire = match old.expire() {
                Some(t) if keep_ttl => Some(t),
                _ => expire,
            };
            let entry = value.into_entry(key, expire, access(Some(old.lru())));
            entry.set_snap_mark(self.mark);
            self.replace_at(loc, entry, h);
            // SAFETY: the old entry is out of its bucket; it is freed exactly once.
            return Some(unsafe { old.into_old() });
        }
        self.push_new(key, h, value.into_entry(key, expire, access(None)));
        None
    }

    /// Rebuilds `key`'s entry with a new expiry, keeping value and access clock.
    /// Returns false if the key is absent.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>) -> bool {
        if self.len == 0 {
            return false;
        }
        let h = self.hash(key);
        let Some((old, loc)) = self.locate(key, h) else {
            return false;
        };
        self.before_write(old);
        if let Some(t) = expire {
            if old.set_expire_in_place(t) {
                return true;
            }
        } else if old.expire().is_none() {
            return true;
        }
        let lru = old.lru();
        // SAFETY: the old entry is replaced in its bucket below and never used again.
        let (value, _) = unsafe { old.into_value() };
        let entry = EntryPtr::new(key, expire, value, lru);
        entry.set_snap_mark(self.mark);
        self.replace_at(loc, entry, h);
        true
    }

    /// Removes `key`, returning its value and expiry.
    pub fn remove(&mut self, key: &[u8]) -> Option<(Value, Option<i64>)> {
        if self.len == 0 {
            return None;
        }
        self.rehash_step();
        let h = self.hash(key);
        let (old, loc) = self.locate(key, h)?;
        self.before_write(old);
        self.tables[loc.table][loc.bucket].remove(loc.pos);
        self.len -= 1;
        if let Some(ix) = self.slot_index.as_deref_mut() {
            ix.remove(key, h);
        }
        // SAFETY: the entry is out of its bucket; it is freed exactly once.
        Some(unsafe { old.into_value() })
    }

    /// Removes every entry, handing the values to `sink` (which may drop them here or
    /// on another thread).
    pub fn clear_into(&mut self, mut sink: impl FnMut(Value)) {
        // A snapshot still needing this table's entries gets them now (the keyspace
        // avoids this pause by handing flushed tables to the walker instead).
        if let Some(mut c) = self.cow.take() {
            if !c.sink.discarding() {
                let mark = self.mark;
                let mut cursor = 0;
                loop {
                    cursor = self.scan_ptrs(cursor, |e| c.save(e, mark, true));
                    if cursor == 0 {
                        break;
                    }
                }
                c.sink.flush();
            }
        }
        for t in 0..2 {
            let mut table = std::mem::take(&mut self.tables[t]);
            for b in &mut table {
                // SAFETY: each entry is drained out of its bucket once and freed.
                b.drain(|e, _| sink(unsafe { e.into_value() }.0));
            }
        }
        self.rehash_idx = None;
        self.sizes = [0, 0];
        self.len = 0;
        if self.slot_index.is_some() {
            self.slot_index = Some(Box::default());
        }
    }

    fn expand_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        if self.tables[0].is_empty() {
            self.tables[0] = buckets::try_empty(buckets_for(INITIAL_SLOTS)).expect("one bucket");
            self.sizes[0] = INITIAL_SLOTS;
            return;
        }
        let size = self.sizes[0];
        if self.len >= size {
            let slots = (self.len + 1).next_power_of_two();
            let loaded = self.len * 1000 > size * GROW_ANYWAY_LOAD_PERMILLE;
            if loaded || growth_fits(buckets_for(slots) * std::mem::size_of::<Bucket>()) {
                self.start_resize(slots);
            }
        }
    }

    /// Sizes the bucket array for `keys` keys ahead of inserting them (Redis's
    /// dictExpand: DEBUG POPULATE and loads whose key count is known), so the table
    /// does not double its way there, freeing each smaller array behind it. A resize
    /// in progress is finished first; a table already that big is left alone.
    /// False, with the table unchanged, when that array cannot be allocated.
    pub fn expand(&mut self, keys: usize) -> bool {
        let Some(slots) = keys.max(INITIAL_SLOTS).checked_next_power_of_two() else {
            return false;
        };
        if slots <= self.sizes[0].max(self.sizes[1]) {
            return true;
        }
        let Some(array) = buckets::try_empty(buckets_for(slots)) else {
            return false;
        };
        while self.rehash_idx.is_some() {
            self.rehash_step();
        }
        if self.tables[0].is_empty() {
            self.tables[0] = array;
            self.sizes[0] = slots;
        } else {
            self.tables[1] = array;
            self.sizes[1] = slots;
            self.rehash_idx = Some(0);
        }
        true
    }

    /// Starts shrinking when the table is under 10% full, as Redis does from its cron.
    pub fn shrink_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        let size = self.sizes[0];
        if size > INITIAL_SLOTS && self.len * 100 / size < 10 {
            self.start_resize(self.len.next_power_of_two().max(INITIAL_SLOTS));
        }
    }

    /// Starts moving the keys to an array of `slots` entry slots. An array the
    /// allocator cannot give leaves the table as it is (fuller chains, no abort).
    fn start_resize(&mut self, slots: usize) {
        if slots == self.sizes[0] {
            return;
        }
        if let Some(array) = buckets::try_empty(buckets_for(slots)) {
            self.tables[1] = array;
            self.sizes[1] = slots;
            self.rehash_idx = Some(0);
        }
    }

    /// Moves one bucket (skipping a few empty ones) from the old table to the new,
    /// when a resize is in progress. Each entry goes to the image of the candidate
    /// bucket it was in, so SCAN's guarantee holds across the resize.
    #[inline]
    pub fn rehash_step(&mut self) {
        // Every lookup and write asks: inline, the usual answer costs a test.
        if self.rehash_idx.is_some() {
            self.move_next_bucket();
        }
    }

    #[inline(never)]
    fn move_next_bucket(&mut self) {
        let Some(mut idx) = self.rehash_idx else {
            return;
        };
        let mut empty_visits = EMPTY_VISITS_PER_STEP;
        let old_len = self.tables[0].len();
        while idx < old_len && self.tables[0][idx].is_empty() {
            idx += 1;
            empty_visits -= 1;
            if empty_visits == 0 {
                self.rehash_idx = Some(idx);
                return;
            }
        }
        if idx < old_len {
            let old_mask = old_len - 1;
            let new_mask = self.tables[1].len() - 1;
            let [old, new] = &mut self.tables;
            let hasher = &self.hasher;
            old[idx].drain(|e, tag| {
                let h = hasher.hash_one(e.key());
                let i = if h as usize & old_mask == idx {
                    h as usize & new_mask
                } else {
                    second_choice(h) & new_mask
                };
                new[i].push(buckets::word(e, tag));
            });
            idx += 1;
        }
        if idx >= old_len {
            self.tables[0] = std::mem::take(&mut self.tables[1]);
            self.sizes = [self.sizes[1], 0];
            self.rehash_idx = None;
        } else {
            self.rehash_idx = Some(idx);
        }
    }

    /// Rehashes for up to `budget`; returns true if a resize is still in progress.
    pub fn rehash_for(&mut self, budget: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while self.rehash_idx.is_some() {
            for _ in 0..100 {
                self.rehash_step();
            }
            if start.elapsed() >= budget {
                break;
            }
        }
        self.rehash_idx.is_some()
    }

    /// Visits buckets from `cursor` on, calling `f` on each entry of at least one bucket
    /// (and all its images in the other table while resizing). Returns the next cursor,
    /// 0 when the iteration is complete. This is Redis's reverse-binary cursor scan.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(EntryRef<'_>)) -> u64 {
        self.scan_ptrs(cursor, |ptr| {
            f(EntryRef {
                ptr,
                _table: std::marker::PhantomData,
            })
        })
    }

    fn scan_ptrs(&self, cursor: u64, mut f: impl FnMut(EntryPtr)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mut v = cursor;
        if self.rehash_idx.is_none() {
            let m0 = (self.tables[0].len() - 1) as u64;
            self.tables[0][(v & m0) as usize].for_each(&mut f);
            v |= !m0;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
        } else {
            let (small, large) = if self.tables[0].len() <= self.tables[1].len() {
                (&self.tables[0], &self.tables[1])
            } else {
                (&self.tables[1], &self.tables[0])
            };
            let m0 = (small.len() - 1) as u64;
            let m1 = (large.len() - 1) as u64;
            small[(v & m0) as usize].for_each(&mut f);
            loop {
                large[(v & m1) as usize].for_each(&mut f);
                v |= !m1;
                v = v.reverse_bits().wrapping_add(1).reverse_bits();
                if v & (m0 ^ m1) == 0 {
                    break;
                }
            }
        }
        v
    }

    /// Calls `f` on every entry once, bucket by bucket through both arrays (a bucket
    /// already moved by a resize is empty). Each batch of buckets has its memory
    /// requested level by level before it is read, as the snapshot walk does: the
    /// misses of a whole pass (SAVE, an image made at once) overlap.
    pub fn for_each_entry(&self, mut f: impl FnMut(EntryRef<'_>)) {
        for table in &self.tables {
            for batch in table.chunks(WALK_BATCH) {
                batch.iter().for_each(|b| b.for_each(EntryPtr::prefetch));
                batch
                    .iter()
                    .for_each(|b| b.for_each(EntryPtr::prefetch_value));
                batch
                    .iter()
                    .for_each(|b| b.for_each(EntryPtr::prefetch_string_bytes));
                for b in batch {
                    b.for_each(|ptr| {
                        f(EntryRef {
                            ptr,
                            _table: std::marker::PhantomData,
                        })
                    });
                }
            }
        }
    }

    /// Starts a snapshot of this table: every current entry becomes unwritten.
    /// Panics if one is already in progress (one snapshot at a time).
    pub fn cow_begin(&mut self, sink: Box<dyn CowSink>) {
        assert!(
            self.cow.is_none(),
            "a snapshot is already walking this table"
        );
        self.mark ^= SNAP_MARK;
        self.cow = Some(Box::new(Cow { sink, cursor: 0 }));
    }

    /// Whether a snapshot still needs entries of this table.
    pub fn cow_active(&self) -> bool {
        self.cow.is_some()
    }

    /// Whether the snapshot in progress is only realigning marks (cancelled).
    pub fn cow_discarding(&self) -> bool {
        self.cow.as_ref().is_some_and(|c| c.sink.discarding())
    }

    /// Flushes the sink's buffered output.
    pub fn cow_flush(&mut self) {
        if let Some(c) = self.cow.as_deref_mut() {
            c.sink.flush();
        }
    }

    /// Walks up to `buckets` buckets (with their images while resizing), saving the
    /// unwritten entries found. When the walk completes, the snapshot is detached from
    /// the table (its sink flushed and dropped) and true is returned.
    pub fn cow_walk(&mut self, buckets: usize) -> bool {
        let Some(mut c) = self.cow.take() else {
            return true;
        };
        let mark = self.mark;
        let mut cursor = c.cursor;
        let mut left = buckets.max(1);
        while left > 0 {
            if self.rehash_idx.is_some() || self.len == 0 {
                cursor = self.scan_ptrs(cursor, |e| c.save(e, mark, false));
                left -= 1;
            } else {
                // The next buckets in SCAN order lie all over the table, and each key
                // is up to four dependent cache misses away (bucket, entry, string
                // vector, bytes): a batch's memory is requested level by level before
                // any of it is read, so the misses overlap instead of queueing.
                let t = &self.tables[0];
                let m0 = (t.len() - 1) as u64;
                let mut idx = [0usize; WALK_BATCH];
                let mut n = 0;
                while n < WALK_BATCH.min(left) {
                    idx[n] = (cursor & m0) as usize;
                    n += 1;
                    cursor = (cursor | !m0).reverse_bits().wrapping_add(1).reverse_bits();
                    if cursor == 0 {
                        break;
                    }
                }
                let batch = &idx[..n];
                batch.iter().for_each(|&i| t[i].prefetch());
                batch
                    .iter()
                    .for_each(|&i| t[i].for_each(EntryPtr::prefetch));
                batch
                    .iter()
                    .for_each(|&i| t[i].for_each(EntryPtr::prefetch_value));
                batch
                    .iter()
                    .for_each(|&i| t[i].for_each(EntryPtr::prefetch_string_bytes));
                for &i in batch {
                    t[i].for_each(|e| c.save(e, mark, false));
                }
                left -= n;
            }
            if cursor == 0 {
                c.sink.flush();
                return true;
            }
        }
        c.cursor = cursor;
        self.cow = Some(c);
        false
    }

    /// A uniformly chosen non-empty bucket's random entry (Redis's approach: fair
    /// enough for RANDOMKEY and eviction sampling, and O(1) on a table that is not
    /// nearly empty).
    pub fn random_entry(&self) -> Option<EntryRef<'_>> {
        if self.len == 0 {
            return None;
        }
        loop {
            let b = match self.rehash_idx {
                Some(done) => {
                    let n0 = self.tables[0].len();
                    let total = n0 + self.tables[1].len();
                    let i = done + fastrand::usize(..total - done);
                    if i < n0 {
                        &self.tables[0][i]
                    } else {
                        &self.tables[1][i - n0]
                    }
                }
                None => &self.tables[0][fastrand::usize(..self.tables[0].len())],
            };
            if b.is_empty() {
                continue;
            }
            let ptr = b.nth(fastrand::usize(..b.len())).expect("within the chain");
            return Some(EntryRef {
                ptr,
                _table: std::marker::PhantomData,
            });
        }
    }
}

impl Drop for KeyTable {
    fn drop(&mut self) {
        self.clear_into(drop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    fn val(n: i64) -> Value {
        Value::Int(n)
    }

    fn int_of(v: ValueRef<'_>) -> i64 {
        match v {
            ValueRef::Int(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn insert_get_remove_through_resizes() {
        let mut t = KeyTable::new();
        for i in 0..10_000i64 {
            assert!(t
                .insert(format!("k{i}").as_bytes(), None, false, val(i), |_| 0)
                .is_none());
        }
        assert_eq!(t.len(), 10_000);
        for i in 0..10_000i64 {
            assert_eq!(
                int_of(t.get(format!("k{i}").as_bytes()).unwrap().value()),
                i
            );
        }
        let old = t.insert(b"k5", Some(99), false, val(-5), |_| 0).unwrap();
        assert!(matches!(old, (None, None)));
        assert_eq!(t.get(b"k5").unwrap().expire(), Some(99));
        // keep_ttl: the replaced key's own expiry wins over the one given; a key
        // without one (or a new key) takes the one given.
        let old = t.insert(b"k5", Some(7), true, val(5), |_| 0).unwrap();
        assert!(matches!(old, (None, Some(99))));
        assert_eq!(t.get(b"k5").unwrap().expire(), Some(99));
        t.insert(b"k6", Some(7), true, val(6), |_| 0).unwrap();
        assert_eq!(t.get(b"k6").unwrap().expire(), Some(7));
        assert!(t.insert(b"new", Some(8), true, val(0), |_| 0).is_none());
        assert_eq!(t.get(b"new").unwrap().expire(), Some(8));
        assert!(t.remove(b"new").is_some());
        for i in 0..9_990i64 {
            assert!(t.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert_eq!(t.len(), 10);
        t.shrink_if_needed();
        t.rehash_for(std::time::Duration::from_secs(1));
        assert!(t.buckets() <= 16, "shrunk to {}", t.buckets());
        for i in 9_990..10_000i64 {
            assert!(t.contains(format!("k{i}").as_bytes()));
        }
    }

    /// `get_mut_or_insert_with` finds what is there (leaving value, expiry and access
    /// field alone, `make` not called) and adds what is not, through resizes.
    #[test]
    fn get_mut_or_insert_with_finds_or_adds_once() {
        let mut t = KeyTable::new();
        t.insert(b"there", Some(42), false, val(7), |_| 3);
        let (e, made) = t.get_mut_or_insert_with(b"there", || panic!("not made"), || 9);
        assert!(!made);
        assert_eq!(int_of(e.value()), 7);
        assert_eq!((e.expire(), e.lru()), (Some(42), 3));
        for i in 0..5_000i64 {
            let key = format!("k{i}");
            let (e, made) = t.get_mut_or_insert_with(key.as_bytes(), || val(i), || 9);
            assert!(made);
            assert_eq!((int_of(e.value()), e.expire(), e.lru()), (i, None, 9));
            // Asked again at once, mid-resize or not: the same entry.
            let (e, made) = t.get_mut_or_insert_with(key.as_bytes(), || val(-1), || 0);
            assert!(!made);
            assert_eq!(int_of(e.value()), i);
        }
        assert_eq!(t.len(), 5_001);
        for i in 0..5_000i64 {
            assert_eq!(
                int_of(t.get(format!("k{i}").as_bytes()).unwrap().value()),
                i
            );
        }
    }

    /// `prefetch` only reads: on an empty table, a growing one (keys in both arrays),
    /// keys present or not, heap strings and collections, nothing changes and every
    /// lookup still finds its key.
    #[test]
    fn prefetch_reads_any_table_state_and_changes_nothing() {
        let mut t = KeyTable::new();
        t.prefetch([b"missing".as_slice()].into_iter());
        let keys: Vec<Vec<u8>> = (0..5_000).map(|i| format!("k{i}").into_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            let v = if i % 2 == 0 {
                val(i as i64)
            } else {
                Value::from_slice(&vec![b'x'; 40 + i % 7])
            };
            t.insert(k, None, false, v, |_| 0);
            if i % 97 == 0 {
                // Mid-resize tables too: the batch looks in the newer array.
                let batch: Vec<&[u8]> = keys[i.saturating_sub(20)..=i]
                    .iter()
                    .map(|k| k.as_slice())
                    .chain([b"absent".as_slice()])
                    .collect();
                t.prefetch(batch.into_iter());
            }
        }
        let all: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        for chunk in all.chunks(PREFETCH_BATCH + 3) {
            // More keys than a batch holds: the rest are ignored.
            t.prefetch(chunk.iter().copied());
        }
        assert_eq!(t.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert!(t.contains(k), "key {i}");
        }
    }

    /// `for_each_entry` visits every entry exactly once, whether or not a resize is
    /// in progress (keys then lie in both arrays).
    #[test]
    fn for_each_entry_visits_every_key_once_in_any_table_state() {
        let mut t = KeyTable::new();
        let mut seen_rehashing = false;
        for i in 0..3_000usize {
            let v = if i % 2 == 0 {
                val(i as i64)
            } else {
                Value::from_slice(&vec![b'y'; 30 + i % 11])
            };
            t.insert(format!("k{i}").as_bytes(), None, false, v, |_| 0);
            if i % 37 == 0 || t.is_rehashing() && i % 5 == 0 {
                seen_rehashing |= t.is_rehashing();
                let mut seen = std::collections::HashSet::new();
                t.for_each_entry(|e| assert!(seen.insert(e.key().to_vec()), "{i}: twice"));
                assert_eq!(seen.len(), i + 1, "after key {i}");
            }
        }
        assert!(seen_rehashing, "a resize was walked");
        KeyTable::new().for_each_entry(|_| panic!("an empty table has no entry"));
    }

    /// Sizes follow Redis's dict: four slots for the first key, a resize to eight (in
    /// progress until the next writes move the old bucket) at the fifth.
    #[test]
    fn smallest_table_grows_at_its_fifth_key() {
        let mut t = KeyTable::new();
        assert_eq!(t.buckets(), 0);
        for i in 0..4 {
            t.insert(format!("k{i}").as_bytes(), None, false, val(i), |_| 0);
            assert_eq!((t.buckets(), t.is_rehashing()), (4, false));
        }
        t.insert(b"k4", None, false, val(4), |_| 0);
        assert!(t.is_rehashing());
        assert_eq!((t.buckets(), t.rehashing_buckets()), (12, 4));
        assert_eq!((t.array_slots(false), t.array_slots(true)), (4, 8));
        assert_eq!(t.chain_lengths(true).unwrap().sum::<usize>(), 1);
        for i in 0..5 {
            assert!(t.contains(format!("k{i}").as_bytes()));
        }
        t.rehash_step();
        assert_eq!((t.buckets(), t.is_rehashing()), (8, false));
        for i in 0..5 {
            assert!(t.contains(format!("k{i}").as_bytes()));
        }
    }

    /// At a load of one key per slot (the most a table holds before it doubles) the two
    /// candidates keep chains short: few buckets overflow and none by much. A second
    /// choice that followed from the first would fail this. Removing half the keys
    /// keeps the rest reachable, and a SCAN then returns each key exactly once.
    #[test]
    fn two_choices_keep_chains_short_at_full_load() {
        let mut t = KeyTable::new();
        let n = 4096 * SLOTS;
        assert!(t.expand(n));
        for i in 0..n as i64 {
            t.insert(format!("key:{i}").as_bytes(), None, false, val(i), |_| 0);
        }
        assert!(!t.is_rehashing());
        assert_eq!(t.buckets(), n);
        let chains: Vec<usize> = t.chain_lengths(false).unwrap().collect();
        assert_eq!(chains.len(), 4096);
        assert_eq!(chains.iter().sum::<usize>(), n);
        let overflowing = chains.iter().filter(|&&c| c > SLOTS).count();
        // About 30% at this load; one choice would overflow 41% and reach 19.
        assert!(overflowing < 4096 / 3, "{overflowing} buckets overflow");
        assert!(chains.iter().all(|&c| c <= 2 * SLOTS), "{chains:?}");
        let mut rng = fastrand::Rng::with_seed(3);
        let mut kept = HashSet::new();
        for i in 0..n as i64 {
            let k = format!("key:{i}").into_bytes();
            if rng.bool() {
                assert!(matches!(t.remove(&k), Some((Value::Int(v), None)) if v == i));
            } else {
                kept.insert(k);
            }
        }
        for k in &kept {
            assert!(t.contains(k));
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = t.scan(cursor, |e| seen.push(e.key().to_vec()));
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), kept.len());
        assert_eq!(seen.into_iter().collect::<HashSet<_>>(), kept);
    }

    /// `expand` sizes the array once: inserting that many keys then never resizes,
    /// and expanding a table that holds keys (even mid-resize) keeps them all.
    #[test]
    fn expand_presizes_and_keeps_keys() {
        let mut t = KeyTable::new();
        assert!(t.expand(5000));
        assert_eq!(t.buckets(), 8192);
        for i in 0..5000i64 {
            t.insert(format!("k{i}").as_bytes(), None, false, val(i), |_| 0);
            assert!(!t.is_rehashing());
        }
        assert_eq!(t.buckets(), 8192);
        assert!(t.expand(100));
        assert_eq!(t.buckets(), 8192, "a smaller size leaves the table alone");
        // A size no allocator can give fails and changes nothing.
        assert!(!t.expand(usize::MAX / 4));
        assert!(!t.expand(usize::MAX));
        assert_eq!(t.buckets(), 8192);
        // Grow past the load factor so a resize is in progress, then expand beyond it.
        for i in 5000..9000i64 {
            t.insert(format!("k{i}").as_bytes(), None, false, val(i), |_| 0);
        }
        assert!(t.is_rehashing());
        assert!(t.expand(100_000));
        assert!(t.is_rehashing());
        t.rehash_for(std::time::Duration::from_secs(5));
        assert_eq!(t.buckets(), 131_072);
        assert_eq!(t.len(), 9000);
        for i in 0..9000i64 {
            assert_eq!(
                int_of(t.get(format!("k{i}").as_bytes()).unwrap().value()),
                i
            );
        }
    }

    /// The per-slot index against a full scan after random inserts, overwrites,
    /// expiry rebuilds, removals, resizes and clears (hash-tagged keys crowd a few
    /// slots so slots hold many keys).
    #[test]
    fn slot_index_matches_a_scan_after_random_ops() {
        use crate::util::hashslot::{key_slot, SLOTS};
        fn check(t: &KeyTable) {
            let mut by_slot: HashMap<usize, HashSet<Vec<u8>>> = HashMap::new();
            t.for_each_ptr(|e| {
                by_slot
                    .entry(key_slot(e.key()) as usize)
                    .or_default()
                    .insert(e.key().to_vec());
            });
            for s in 0..SLOTS {
                let want = by_slot.remove(&s).unwrap_or_default();
                assert_eq!(t.slot_key_count(s), Some(want.len()), "slot {s}");
                let mut got = HashSet::new();
                t.slot_keys(s, usize::MAX, |k| assert!(got.insert(k.to_vec())));
                assert_eq!(got, want, "slot {s}");
            }
        }
        let mut rng = fastrand::Rng::with_seed(7);
        let mut t = KeyTable::new();
        for i in 0..50 {
            t.insert(format!("pre{i}").as_bytes(), None, false, val(i), |_| 0);
        }
        t.enable_slot_index();
        check(&t);
        for round in 0..6 {
            for _ in 0..3000 {
                let key = match rng.u8(0..3) {
                    0 => format!("{{tag{}}}:{}", rng.u8(0..4), rng.u16(0..400)),
                    _ => format!("k{}", rng.u16(0..2000)),
                };
                match rng.u8(0..10) {
                    0..=4 => {
                        t.insert(key.as_bytes(), None, false, val(1), |_| 0);
                    }
                    5 => {
                        t.set_expire(key.as_bytes(), Some(rng.i64(1..1000)));
                    }
                    6 => {
                        if let Some(mut e) = t.get_mut(key.as_bytes()) {
                            e.set_int_in_place(2);
                        }
                    }
                    _ => {
                        t.remove(key.as_bytes());
                    }
                }
                if rng.u8(0..50) == 0 {
                    t.shrink_if_needed();
                }
            }
            check(&t);
            let (n, max) = (t.len(), 3);
            let s = key_slot(b"{tag1}") as usize;
            let mut seen = 0;
            t.slot_keys(s, max, |_| seen += 1);
            assert_eq!(seen, t.slot_key_count(s).unwrap().min(max));
            assert_eq!(n, (0..SLOTS).map(|s| t.slot_key_count(s).unwrap()).sum());
            if round == 3 {
                t.clear_into(drop);
                check(&t);
            }
        }
    }

    #[test]
    fn set_expire_rebuilds_and_keeps_value() {
        let mut t = KeyTable::new();
        t.insert(b"a", None, false, Value::Str(b"hello".to_vec()), |_| 7);
        assert!(t.set_expire(b"a", Some(1000)));
        assert!(t.set_expire(b"a", Some(2000)));
        let e = t.get(b"a").unwrap();
        assert_eq!(e.expire(), Some(2000));
        assert_eq!(e.lru(), 7);
        assert!(matches!(e.value(), ValueRef::Emb(b"hello")));
        assert!(t.set_expire(b"a", None));
        assert_eq!(t.get(b"a").unwrap().expire(), None);
        assert!(!t.set_expire(b"missing", Some(1)));
    }

    /// Every key present for the whole scan is returned, whatever resizes happen between
    /// calls.
    #[test]
    fn scan_guarantee_across_growth_and_shrink() {
        let mut t = KeyTable::new();
        for i in 0..1000 {
            t.insert(format!("stable{i}").as_bytes(), None, false, val(i), |_| 0);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = t.scan(cursor, |e| {
                seen.insert(e.key().to_vec());
            });
            // Alternate heavy growth and heavy shrinkage while scanning.
            if round % 20 < 10 {
                for j in 0..300 {
                    t.insert(
                        format!("tmp{round}_{j}").as_bytes(),
                        None,
                        false,
                        val(0),
                        |_| 0,
                    );
                }
            } else {
                for r in (round - 10)..round {
                    for j in 0..300 {
                        t.remove(format!("tmp{r}_{j}").as_bytes());
                    }
                }
                t.shrink_if_needed();
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(
                seen.contains(format!("stable{i}").as_bytes()),
                "missed stable{i}"
            );
        }
    }

    #[test]
    fn random_entry_finds_members() {
        let mut t = KeyTable::new();
        assert!(t.random_entry().is_none());
        for i in 0..50 {
            t.insert(format!("r{i}").as_bytes(), None, false, val(i), |_| 0);
        }
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            seen.insert(t.random_entry().unwrap().key().to_vec());
        }
        assert!(seen.len() > 40);
    }

    type Image = HashMap<Vec<u8>, (i64, Option<i64>)>;

    /// A sink recording what the snapshot saw: key -> (value, expiry), counting
    /// duplicates.
    #[derive(Clone, Default)]
    struct Recorder {
        saved: std::sync::Arc<std::sync::Mutex<(Image, usize)>>,
    }

    impl CowSink for Recorder {
        fn save(&mut self, key: &[u8], value: ValueRef<'_>, expire: Option<i64>, _: u32, _: bool) {
            let mut g = self.saved.lock().unwrap();
            if g.0.insert(key.to_vec(), (int_of(value), expire)).is_some() {
                g.1 += 1;
            }
        }
        fn flush(&mut self) {}
        fn discarding(&self) -> bool {
            false
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Walker + copy-on-write against a model: whatever the interleaving of
        /// inserts, overwrites, deletes, expiry changes, in-place edits, growth and
        /// shrinkage with walk steps, the snapshot holds exactly the table as it was
        /// when the snapshot began, each key once; a second snapshot works after it.
        #[test]
        fn cow_snapshot_is_point_in_time(
            initial in 0usize..400,
            ops in prop::collection::vec((0u8..7, 0u16..600, any::<i64>()), 1..800),
            walk_every in 1usize..20,
        ) {
            let mut t = KeyTable::new();
            let mut model: HashMap<Vec<u8>, (i64, Option<i64>)> = HashMap::new();
            for i in 0..initial {
                let key = format!("key{i}").into_bytes();
                let exp = if i % 3 == 0 { Some(i as i64) } else { None };
                t.insert(&key, exp, false, Value::Int(i as i64), |_| 0);
                model.insert(key, (i as i64, exp));
            }
            for round in 0..2 {
                let expected = model.clone();
                let rec = Recorder::default();
                t.cow_begin(Box::new(rec.clone()));
                let mut done = false;
                for (n, (op, k, v)) in ops.iter().enumerate() {
                    let key = format!("key{k}").into_bytes();
                    match op {
                        0 | 1 => {
                            let exp = if v % 2 == 0 { Some(*v) } else { None };
                            t.insert(&key, exp, false, Value::Int(*v), |_| 0);
                            model.insert(key, (*v, exp));
                        }
                        2 => {
                            t.remove(&key);
                            model.remove(&key);
                        }
                        3 => {
                            let exp = if v % 2 == 0 { Some(*v) } else { None };
                            t.set_expire(&key, exp);
                            if let Some(e) = model.get_mut(&key) { e.1 = exp; }
                        }
                        4 => {
                            if let Some(mut e) = t.get_mut(&key) {
                                e.set_int_in_place(*v);
                                model.get_mut(&key).unwrap().0 = *v;
                            }
                        }
                        5 => {
                            // A burst of deletions, then a shrink.
                            for j in 0..50u16 {
                                let key = format!("key{}", (k + j) % 600).into_bytes();
                                t.remove(&key);
                                model.remove(&key);
                            }
                            t.shrink_if_needed();
                        }
                        _ => {
                            // A burst of new keys: growth mid-walk.
                            for j in 0..50u16 {
                                let key = format!("new{round}_{k}_{j}").into_bytes();
                                t.insert(&key, None, false, Value::Int(1), |_| 0);
                                model.insert(key, (1, None));
                            }
                        }
                    }
                    if !done && n % walk_every == 0 {
                        done = t.cow_walk(1);
                    }
                }
                while !done {
                    done = t.cow_walk(3);
                }
                prop_assert!(!t.cow_active());
                let g = rec.saved.lock().unwrap();
                prop_assert_eq!(g.1, 0, "a key was saved twice");
                prop_assert_eq!(&g.0, &expected);
            }
        }
    }

    type ObjImage = HashMap<Vec<u8>, (&'static str, usize)>;

    /// A sink recording (type, element count) of each collection it is handed.
    #[derive(Clone, Default)]
    struct ObjRecorder {
        saved: std::sync::Arc<std::sync::Mutex<ObjImage>>,
    }

    fn obj_len(v: ValueRef<'_>) -> (&'static str, usize) {
        use crate::keyspace::value::ObjRef;
        let ValueRef::Obj(o) = v else {
            panic!("not a collection")
        };
        let n = match o {
            ObjRef::ZSet(z) => z.len(),
            ObjRef::List(l) => l.len(),
            ObjRef::Hash(h) => h.len(),
            ObjRef::Set(s) => s.len(),
            ObjRef::Stream(s) => s.len() as usize,
        };
        (o.type_name(), n)
    }

    impl CowSink for ObjRecorder {
        fn save(&mut self, key: &[u8], value: ValueRef<'_>, _: Option<i64>, _: u32, _: bool) {
            let prev = self
                .saved
                .lock()
                .unwrap()
                .insert(key.to_vec(), obj_len(value));
            assert!(prev.is_none(), "saved twice");
        }
        fn flush(&mut self) {}
        fn discarding(&self) -> bool {
            false
        }
    }

    /// Every collection kind through the table under a snapshot: in-place edits,
    /// replacement, expiry rebuilds and removal each hand the snapshot the value as it
    /// was, and the table drops whatever is left.
    #[test]
    #[allow(clippy::needless_range_loop)]
    fn cow_snapshot_of_every_collection_kind() {
        use crate::keyspace::value::{ObjMut, Object};
        use crate::types::{hash, list, set, stream, zset};
        let zl = zset::Limits {
            max_entries: 128,
            max_value: 64,
        };
        let make = |kind: usize, n: usize| -> Value {
            let items: Vec<Vec<u8>> = (0..n).map(|i| format!("m{i}").into_bytes()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            Value::Obj(match kind {
                0 => {
                    let mut z = zset::ZSet::default();
                    refs.iter().for_each(|m| z.set(m, 1.0, zl));
                    Object::ZSet(Box::new(z))
                }
                1 => {
                    let mut l = list::List::new();
                    l.push(list::End::Tail, &refs, list::Packing::fill(-2));
                    Object::List(Box::new(l))
                }
                2 => {
                    let mut h = hash::Hash::new();
                    refs.iter().for_each(|m| {
                        h.set(m, b"v", hash::HashLimits::default());
                    });
                    Object::Hash(Box::new(h))
                }
                3 => {
                    let mut s = set::Set::new_intset();
                    refs.iter().for_each(|m| {
                        s.add(m, set::SetLimits::default());
                    });
                    Object::Set(Box::new(s))
                }
                _ => {
                    let mut x = stream::Stream::new();
                    for (i, m) in refs.iter().enumerate() {
                        x.append(stream::StreamId::new(1, i as u64), &[b"f", m], 0, 0);
                    }
                    Object::Stream(Box::new(x))
                }
            })
        };
        let names = ["zset", "list", "hash", "set", "stream"];
        let mut t = KeyTable::new();
        for kind in 0..5 {
            for op in 0..5 {
                let key = format!("{kind}:{op}").into_bytes();
                t.insert(&key, None, false, make(kind, 3), |_| 0);
            }
        }
        let rec = ObjRecorder::default();
        t.cow_begin(Box::new(rec.clone()));
        for kind in 0..5 {
            // op 0: edited in place.
            let mut e = t.get_mut(format!("{kind}:0").as_bytes()).unwrap();
            match e.object_mut().unwrap() {
                ObjMut::ZSet(z) => z.set(b"x", 2.0, zl),
                ObjMut::List(l) => l.push(list::End::Head, &[b"x"], list::Packing::fill(-2)),
                ObjMut::Hash(h) => {
                    h.set(b"x", b"v", hash::HashLimits::default());
                }
                ObjMut::Set(s) => {
                    s.add(b"x", set::SetLimits::default());
                }
                ObjMut::Stream(s) => s.append(stream::StreamId::new(9, 0), &[b"f", b"x"], 0, 0),
            }
            assert_eq!(obj_len(e.value()), (names[kind], 4));
            // op 1: replaced by another kind; op 2: given an expiry; op 3: removed.
            let old = t.insert(
                format!("{kind}:1").as_bytes(),
                None,
                false,
                make((kind + 1) % 5, 7),
                |_| 0,
            );
            assert!(matches!(old, Some((Some(Value::Obj(ref o)), None)) if o.element_count() > 0));
            assert!(t.set_expire(format!("{kind}:2").as_bytes(), Some(5)));
            let (v, _) = t.remove(format!("{kind}:3").as_bytes()).unwrap();
            assert_eq!(
                obj_len(ValueRef::Obj(match &v {
                    Value::Obj(o) => o.as_ref(),
                    _ => unreachable!(),
                })),
                (names[kind], 3)
            );
        }
        while !t.cow_walk(4) {}
        let saved = rec.saved.lock().unwrap();
        assert_eq!(saved.len(), 25);
        for kind in 0..5 {
            for op in 0..5 {
                let key = format!("{kind}:{op}").into_bytes();
                assert_eq!(saved[&key], (names[kind], 3), "{kind}:{op}");
            }
            let now =
                |op: usize| obj_len(t.get(format!("{kind}:{op}").as_bytes()).unwrap().value());
            assert_eq!(now(0), (names[kind], 4));
            assert_eq!(now(1), (names[(kind + 1) % 5], 7));
            assert_eq!(now(2), (names[kind], 3));
            assert!(t.get(format!("{kind}:3").as_bytes()).is_none());
        }
        drop(t);
    }

    proptest! {
        #[test]
        fn behaves_like_a_hashmap(ops in prop::collection::vec((0u8..4, 0u16..200, any::<i64>()), 1..600)) {
            let mut t = KeyTable::new();
            let mut model: HashMap<Vec<u8>, (i64, Option<i64>)> = HashMap::new();
            for (op, k, v) in ops {
                let key = format!("key{k}").into_bytes();
                match op {
                    0 => {
                        let exp = if v % 3 == 0 { Some(v) } else { None };
                        // An integer dies with its entry: only the old expiry comes back.
                        let old = t.insert(&key, exp, false, Value::Int(v), |_| 0).map(|(v, e)| (v.is_some(), e));
                        prop_assert_eq!(old, model.insert(key, (v, exp)).map(|(_, e)| (false, e)));
                    }
                    1 => {
                        let old = t.remove(&key).map(|(v, e)| (match v { Value::Int(n) => n, _ => unreachable!() }, e));
                        prop_assert_eq!(old, model.remove(&key));
                    }
                    2 => {
                        let exp = if v % 2 == 0 { Some(v) } else { None };
                        let present = t.set_expire(&key, exp);
                        prop_assert_eq!(present, model.contains_key(&key));
                        if let Some(e) = model.get_mut(&key) { e.1 = exp; }
                    }
                    _ => t.shrink_if_needed(),
                }
                prop_assert_eq!(t.len(), model.len());
            }
            for (k, (v, e)) in &model {
                let got = t.get(k).unwrap();
                prop_assert_eq!(int_of(got.value()), *v);
                prop_assert_eq!(got.expire(), *e);
            }
            let mut all = HashSet::new();
            let mut c = 0;
            loop { c = t.scan(c, |e| { all.insert(e.key().to_vec()); }); if c == 0 { break; } }
            prop_assert_eq!(all.len(), model.len());
        }
    }
}
