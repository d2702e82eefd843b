//! The hash table behind big hashes and sets (OBJECT ENCODING `hashtable`), shaped
//! for memory.
//!
//! Layout. A power-of-two array of one-word buckets. A bucket word is empty (null),
//! one element, or a pointer to a small overflow block `[count][word; count]` holding
//! the bucket's elements when it has two or more. An element word is either the
//! element itself, inline, when it is at most 7 bytes (tag and length in the low
//! byte), or a pointer to one allocation `[varint length][bytes]`. So an element
//! costs its bytes plus one length byte, and its share of the bucket array: no
//! per-element pointers, chain links or `Vec` headers. A hash stores each
//! field/value pair as one element `[varint field length][field][value]` (`Pairs`).
//!
//! Why chained buckets rather than open addressing: HSCAN/SSCAN use Redis's
//! reverse-binary cursor, whose guarantee (every element present for a whole
//! iteration is returned at least once, across growth and shrink) needs each
//! element to live in the bucket its hash selects. With chains that holds by
//! construction; probing would move elements away from their home bucket.
//!
//! Resizing is incremental, as Redis's dict: a resize allocates the new (zeroed)
//! array and every insert or remove then moves a few buckets, so no single command
//! pays for rehashing millions of elements. Lookups search both arrays meanwhile,
//! SCAN visits a bucket of the smaller array together with its images in the larger,
//! and random picks skip the buckets already moved. The table doubles when it holds
//! more elements than buckets and halves below 1/8 full.
//!
//! Random members (SPOP, SRANDMEMBER, HRANDFIELD): a random bucket and a random slot
//! in it below a bound no bucket exceeds (`longest`, kept on insert and reset when a
//! resize completes), retried until the slot holds an element: every element is
//! equally likely.
//!
//! This file holds the only `unsafe` of the collection types: the tagged words and
//! their allocations. Each block states why it is sound; the tests exercise inline and
//! heap elements, overflow blocks growing and collapsing, clones and drops.

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, realloc, Layout};
use std::hash::BuildHasher;
use std::marker::PhantomData;
use std::sync::OnceLock;

use crate::util::prefetch;

/// How an element's key is found in its bytes.
pub trait Shape {
    fn key(elem: &[u8]) -> &[u8];
}

/// Set members: the element is its own key.
#[derive(Debug)]
pub struct Members;

impl Shape for Members {
    #[inline]
    fn key(elem: &[u8]) -> &[u8] {
        elem
    }
}

/// Hash fields: `[varint field length][field][value]`, keyed by the field.
#[derive(Debug)]
pub struct Pairs;

impl Pairs {
    /// The field and the value of a pair element.
    #[inline]
    pub fn split(elem: &[u8]) -> (&[u8], &[u8]) {
        let (flen, h) = read_varint(elem);
        elem[h..].split_at(flen)
    }

    /// The element parts of (field, value): the length prefix goes into `hdr`.
    #[inline]
    pub fn parts<'a>(hdr: &'a mut [u8; 10], field: &'a [u8], value: &'a [u8]) -> [&'a [u8]; 3] {
        let h = write_varint(field.len(), hdr);
        [&hdr[..h], field, value]
    }
}

impl Shape for Pairs {
    #[inline]
    fn key(elem: &[u8]) -> &[u8] {
        Pairs::split(elem).0
    }
}

fn write_varint(mut n: usize, out: &mut [u8; 10]) -> usize {
    let mut i = 0;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out[i] = b;
            return i + 1;
        }
        out[i] = b | 0x80;
        i += 1;
    }
}

/// Reads a varint from the start of `b`: (value, bytes used).
#[inline]
fn read_varint(b: &[u8]) -> (usize, usize) {
    let mut n = 0usize;
    for (i, &x) in b.iter().enumerate() {
        n |= ((x & 0x7f) as usize) << (7 * i);
        if x & 0x80 == 0 {
            return (n, i + 1);
        }
    }
    (n, b.len())
}

fn hasher() -> &'static foldhash::fast::FixedState {
    static H: OnceLock<foldhash::fast::FixedState> = OnceLock::new();
    H.get_or_init(|| foldhash::fast::FixedState::with_seed(fastrand::u64(..)))
}

#[inline]
fn hash(key: &[u8]) -> usize {
    hasher().hash_one(key) as usize
}

/// Asks for what the bucket word at `word` (from `ScanTable::prefetch_bucket`) points
/// to: its overflow block, or its element's bytes.
///
/// # Safety
/// `word` must come from `prefetch_bucket` on a table not changed since.
pub unsafe fn prefetch_bucket_contents(word: *const usize) {
    // SAFETY: per the contract, `word` points at a live bucket word.
    let w = unsafe { &*(word as *const Slot) };
    if !w.is_empty() && w.tag() != TAG_INLINE {
        prefetch(w.block_ptr() as *const u8);
    }
}

const WORD: usize = std::mem::size_of::<usize>();
const TAG_MASK: usize = 0b11;
const TAG_HEAP: usize = 0;
const TAG_BLOCK: usize = 1;
const TAG_INLINE: usize = 2;
/// Longest element stored inside its word.
const INLINE_MAX: usize = WORD - 1;
/// Where the low byte of a word (tag and inline length) and the inline data sit in
/// memory.
#[cfg(target_endian = "little")]
const TAG_AT: usize = 0;
#[cfg(target_endian = "little")]
const DATA_AT: usize = 1;
#[cfg(target_endian = "big")]
const TAG_AT: usize = WORD - 1;
#[cfg(target_endian = "big")]
const DATA_AT: usize = 0;

/// A tagged word: empty (null), an element (inline or heap), or an overflow block.
#[repr(transparent)]
struct Slot(*mut u8);

impl Slot {
    const EMPTY: Slot = Slot(std::ptr::null_mut());

    #[inline]
    fn is_empty(&self) -> bool {
        self.0.is_null()
    }

    #[inline]
    fn tag(&self) -> usize {
        self.0.addr() & TAG_MASK
    }

    /// An element made of `parts` concatenated.
    fn new_elem(parts: &[&[u8]]) -> Slot {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len <= INLINE_MAX {
            let mut w = [0u8; WORD];
            w[TAG_AT] = (TAG_INLINE | len << 2) as u8;
            let mut at = DATA_AT;
            for p in parts {
                w[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            return Slot(std::ptr::without_provenance_mut(usize::from_ne_bytes(w)));
        }
        let mut hdr = [0u8; 10];
        let h = write_varint(len, &mut hdr);
        let layout = elem_layout(h + len);
        // SAFETY: the layout has a non-zero size. The allocation is written in full
        // (header then every part, `h + len` bytes) before the slot is returned, and
        // its 8-byte alignment leaves the tag bits of the address zero (TAG_HEAP).
        unsafe {
            let p = alloc(layout);
            if p.is_null() {
                handle_alloc_error(layout);
            }
            std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, h);
            let mut at = h;
            for part in parts {
                std::ptr::copy_nonoverlapping(part.as_ptr(), p.add(at), part.len());
                at += part.len();
            }
            Slot(p)
        }
    }

    /// An element's bytes.
    #[inline]
    fn bytes(&self) -> &[u8] {
        debug_assert!(!self.is_empty() && self.tag() != TAG_BLOCK);
        if self.tag() == TAG_INLINE {
            let len = (self.0.addr() & 0xff) >> 2;
            // SAFETY: the slot is WORD initialized bytes (a pointer value has no
            // padding) and an inline element's data are `len <= INLINE_MAX` of them
            // starting at DATA_AT; the slice borrows `self`.
            unsafe {
                std::slice::from_raw_parts((self as *const Slot as *const u8).add(DATA_AT), len)
            }
        } else {
            // SAFETY: a heap element points to a live allocation written by
            // `new_elem`: a varint length followed by that many bytes, so the
            // header is read up to its last byte (no continuation bit) and the data
            // lie within the allocation. It is freed only by `free_elem`, which takes
            // the slot by value, so it outlives `&self`.
            unsafe {
                let (mut len, mut h) = (0usize, 0usize);
                loop {
                    let b = *self.0.add(h);
                    len |= ((b & 0x7f) as usize) << (7 * h);
                    h += 1;
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                std::slice::from_raw_parts(self.0.add(h), len)
            }
        }
    }

    /// Frees an element.
    fn free_elem(self) {
        if self.tag() == TAG_HEAP {
            let total = {
                let b = self.bytes();
                let mut hdr = [0u8; 10];
                write_varint(b.len(), &mut hdr) + b.len()
            };
            // SAFETY: a heap element was allocated by `new_elem` with exactly this
            // layout (the size is recomputed from its own header), and taking the slot
            // by value means nothing refers to it any more.
            unsafe { dealloc(self.0, elem_layout(total)) }
        }
    }

    /// A deep copy of an element.
    fn clone_elem(&self) -> Slot {
        if self.tag() == TAG_INLINE {
            Slot(self.0)
        } else {
            Slot::new_elem(&[self.bytes()])
        }
    }

    #[inline]
    fn block_ptr(&self) -> *mut usize {
        self.0.map_addr(|a| a & !TAG_MASK) as *mut usize
    }

    /// The elements of a bucket.
    #[inline]
    fn bucket(&self) -> &[Slot] {
        match self.tag() {
            _ if self.is_empty() => &[],
            TAG_BLOCK => {
                // SAFETY: a block is a live allocation `[count][Slot; count]`, aligned
                // for usize, written by `bucket_push`/`bucket_take`; the slice borrows
                // the bucket word that owns it.
                unsafe {
                    let p = self.block_ptr();
                    std::slice::from_raw_parts(p.add(1) as *const Slot, *p)
                }
            }
            _ => std::slice::from_ref(self),
        }
    }

    /// The elements of a bucket, mutably (to replace one in place).
    #[inline]
    fn bucket_mut(&mut self) -> &mut [Slot] {
        match self.tag() {
            _ if self.is_empty() => &mut [],
            TAG_BLOCK => {
                // SAFETY: as in `bucket`; the exclusive borrow of the bucket word
                // makes the block's elements exclusively ours.
                unsafe {
                    let p = self.block_ptr();
                    std::slice::from_raw_parts_mut(p.add(1) as *mut Slot, *p)
                }
            }
            _ => std::slice::from_mut(self),
        }
    }

    /// Adds element `e` to this bucket.
    fn bucket_push(&mut self, e: Slot) {
        if self.is_empty() {
            *self = e;
            return;
        }
        if self.tag() != TAG_BLOCK {
            let first = std::mem::replace(self, Slot::EMPTY);
            let layout = block_layout(2);
            // SAFETY: a fresh allocation for a block of two, fully written (count,
            // then both elements) before it is published with the block tag; its
            // alignment leaves the tag bits free.
            unsafe {
                let p = alloc(layout) as *mut usize;
                if p.is_null() {
                    handle_alloc_error(layout);
                }
                p.write(2);
                (p.add(1) as *mut Slot).write(first);
                (p.add(2) as *mut Slot).write(e);
                *self = Slot((p as *mut u8).map_addr(|a| a | TAG_BLOCK));
            }
            return;
        }
        // SAFETY: the block holds `n` elements and was allocated with
        // `block_layout(n)`; it grows by one and the new last element is written
        // before the count covers it.
        unsafe {
            let p = self.block_ptr();
            let n = *p;
            let q =
                realloc(p as *mut u8, block_layout(n), block_layout(n + 1).size()) as *mut usize;
            if q.is_null() {
                handle_alloc_error(block_layout(n + 1));
            }
            (q.add(1 + n) as *mut Slot).write(e);
            q.write(n + 1);
            *self = Slot((q as *mut u8).map_addr(|a| a | TAG_BLOCK));
        }
    }

    /// Removes and returns the `i`-th element of this bucket.
    fn bucket_take(&mut self, i: usize) -> Slot {
        if self.tag() != TAG_BLOCK {
            debug_assert!(i == 0 && !self.is_empty());
            return std::mem::replace(self, Slot::EMPTY);
        }
        // SAFETY: the block holds `n >= 2` elements (a block never holds fewer) and
        // was allocated with `block_layout(n)`. The taken element is read out and the
        // last one moved into its place, so every element is owned exactly once; a
        // block left with one element is freed and that element becomes the bucket.
        unsafe {
            let p = self.block_ptr();
            let n = *p;
            debug_assert!(n >= 2 && i < n);
            let elems = p.add(1) as *mut Slot;
            let taken = elems.add(i).read();
            if i != n - 1 {
                elems.add(i).write(elems.add(n - 1).read());
            }
            if n == 2 {
                let last = elems.read();
                dealloc(p as *mut u8, block_layout(2));
                *self = last;
            } else {
                p.write(n - 1);
                let q = realloc(p as *mut u8, block_layout(n), block_layout(n - 1).size());
                if q.is_null() {
                    handle_alloc_error(block_layout(n - 1));
                }
                *self = Slot(q.map_addr(|a| a | TAG_BLOCK));
            }
            taken
        }
    }

    /// Empties the bucket, handing each element to `f`, and frees its block.
    fn bucket_drain(&mut self, mut f: impl FnMut(Slot)) {
        let b = std::mem::replace(self, Slot::EMPTY);
        if b.is_empty() {
            return;
        }
        if b.tag() != TAG_BLOCK {
            f(b);
            return;
        }
        // SAFETY: the block is owned by `b`, which was taken out of the table; each
        // element is read out once and handed over, then the block memory is freed
        // with the layout it was allocated with.
        unsafe {
            let p = b.block_ptr();
            let n = *p;
            for i in 0..n {
                f((p.add(1 + i) as *const Slot).read());
            }
            dealloc(p as *mut u8, block_layout(n));
        }
    }
}

fn elem_layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("element size")
}

fn block_layout(n: usize) -> Layout {
    Layout::from_size_align((n + 1) * WORD, WORD.max(4)).expect("block size")
}

/// A zeroed (all empty) bucket array.
fn new_buckets(n: usize) -> Box<[Slot]> {
    let layout = Layout::array::<Slot>(n).expect("bucket array");
    // SAFETY: `n > 0`, so the layout is non-zero; a zeroed word is a null pointer,
    // the empty slot, so every element is initialized; the pointer was allocated by
    // the global allocator with `Layout::array::<Slot>(n)`, which is what `Box<[Slot]>`
    // frees with. Zeroed allocation lets a large array come from fresh pages without
    // a memset, so starting a resize does not stall.
    unsafe {
        let p = alloc_zeroed(layout) as *mut Slot;
        if p.is_null() {
            handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

const MIN_BUCKETS: usize = 4;
/// Buckets moved per insert or remove while resizing, and buckets looked at.
const REHASH_MOVES: usize = 4;
const REHASH_VISITS: usize = 64;

pub struct ScanTable<S> {
    /// The table; while resizing, the old one, whose buckets below `rehash` are moved.
    t0: Box<[Slot]>,
    /// The new table while resizing; empty otherwise.
    t1: Box<[Slot]>,
    rehash: usize,
    len: usize,
    /// At least the longest bucket of `t0` (it only grows until a resize completes),
    /// and of `t1` while resizing: the bound fair random picks draw slots from.
    longest: [u32; 2],
    _shape: PhantomData<fn() -> S>,
}

// SAFETY: a ScanTable exclusively owns every allocation its words point to (nothing
// else holds those pointers, and no method shares them), so moving it to another
// thread (lazy free) or reading it from several threads is as safe as for a
// `Vec<Box<[u8]>>`.
unsafe impl<S> Send for ScanTable<S> {}
// SAFETY: no interior mutability; `&self` methods only read.
unsafe impl<S> Sync for ScanTable<S> {}

impl<S> std::fmt::Debug for ScanTable<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanTable")
            .field("len", &self.len)
            .field("buckets", &self.t0.len())
            .field("resizing_to", &self.t1.len())
            .finish()
    }
}

impl<S: Shape> Default for ScanTable<S> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<S> Drop for ScanTable<S> {
    fn drop(&mut self) {
        for t in [&mut self.t0, &mut self.t1] {
            for b in t.iter_mut() {
                b.bucket_drain(Slot::free_elem);
            }
        }
    }
}

impl<S: Shape> Clone for ScanTable<S> {
    fn clone(&self) -> Self {
        let mut t = ScanTable::with_capacity(self.len);
        for e in self.slots() {
            let c = e.clone_elem();
            let h = hash(S::key(c.bytes()));
            let m = t.t0.len() - 1;
            let b = &mut t.t0[h & m];
            b.bucket_push(c);
            t.longest[0] = t.longest[0].max(b.bucket().len() as u32);
        }
        t.len = self.len;
        t
    }
}

impl<S: Shape> ScanTable<S> {
    pub fn with_capacity(n: usize) -> Self {
        ScanTable {
            t0: new_buckets(n.next_power_of_two().max(MIN_BUCKETS)),
            t1: Box::new([]),
            rehash: 0,
            len: 0,
            longest: [0; 2],
            _shape: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn resizing(&self) -> bool {
        !self.t1.is_empty()
    }

    /// (table, bucket, index in bucket) of the element with `key`.
    fn locate(&self, key: &[u8]) -> Option<(usize, usize, usize)> {
        self.locate_hashed(key, hash(key))
    }

    /// `locate` of a key whose hash `h` is known.
    #[inline]
    fn locate_hashed(&self, key: &[u8], h: usize) -> Option<(usize, usize, usize)> {
        let b0 = h & (self.t0.len() - 1);
        if !self.resizing() || b0 >= self.rehash {
            if let Some(i) = self.t0[b0]
                .bucket()
                .iter()
                .position(|e| S::key(e.bytes()) == key)
            {
                return Some((0, b0, i));
            }
        }
        if self.resizing() {
            let b1 = h & (self.t1.len() - 1);
            if let Some(i) = self.t1[b1]
                .bucket()
                .iter()
                .position(|e| S::key(e.bytes()) == key)
            {
                return Some((1, b1, i));
            }
        }
        None
    }

    fn table_mut(&mut self, t: usize) -> &mut [Slot] {
        if t == 0 {
            &mut self.t0
        } else {
            &mut self.t1
        }
    }

    /// The bucket word `key` hashes to, its cache line asked for ahead of a lookup
    /// (a pipeline's batch, net/mod.rs); while resizing, the array that holds it now.
    /// Follow with `prefetch_bucket_contents` once the lines may have come.
    pub fn prefetch_bucket(&self, key: &[u8]) -> *const usize {
        let h = hash(key);
        let b0 = h & (self.t0.len() - 1);
        let p: *const Slot = if self.resizing() && b0 < self.rehash {
            &self.t1[h & (self.t1.len() - 1)]
        } else {
            &self.t0[b0]
        };
        prefetch(p as *const u8);
        p as *const usize
    }

    /// The element with `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let (t, b, i) = self.locate(key)?;
        let table = if t == 0 { &self.t0 } else { &self.t1 };
        Some(table[b].bucket()[i].bytes())
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.locate(key).is_some()
    }

    /// Inserts the element made of `parts` concatenated, whose key is known to be
    /// absent.
    pub fn insert_new(&mut self, parts: &[&[u8]]) {
        self.rehash_step();
        let e = Slot::new_elem(parts);
        let h = hash(S::key(e.bytes()));
        self.push_hashed(e, h);
    }

    /// Inserts the element made of `parts` (whose key is `key`) unless one with that
    /// key is there; returns whether it inserted. The key is hashed once.
    pub fn insert_if_absent(&mut self, key: &[u8], parts: &[&[u8]]) -> bool {
        self.rehash_step();
        let h = hash(key);
        if self.locate_hashed(key, h).is_some() {
            return false;
        }
        let e = Slot::new_elem(parts);
        debug_assert!(S::key(e.bytes()) == key);
        self.push_hashed(e, h);
        true
    }

    /// Puts the element made of `parts` (whose key is `key`) in place of the one with
    /// that key, or adds it; returns whether it was added. The key is hashed once.
    pub fn upsert(&mut self, key: &[u8], parts: &[&[u8]]) -> bool {
        self.rehash_step();
        let h = hash(key);
        let e = Slot::new_elem(parts);
        debug_assert!(S::key(e.bytes()) == key);
        match self.locate_hashed(key, h) {
            Some((t, b, i)) => {
                std::mem::replace(&mut self.table_mut(t)[b].bucket_mut()[i], e).free_elem();
                false
            }
            None => {
                self.push_hashed(e, h);
                true
            }
        }
    }

    /// Adds element `e`, whose key hashes to `h` and is not in the table.
    fn push_hashed(&mut self, e: Slot, h: usize) {
        let which = usize::from(self.resizing());
        let t = if which == 1 {
            &mut self.t1
        } else {
            &mut self.t0
        };
        let m = t.len() - 1;
        let b = &mut t[h & m];
        b.bucket_push(e);
        self.longest[which] = self.longest[which].max(b.bucket().len() as u32);
        self.len += 1;
        if !self.resizing() && self.len > self.t0.len() {
            self.start_resize(self.t0.len() * 2);
        }
    }

    /// Removes the element with `key`; returns whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.rehash_step();
        let Some((t, b, i)) = self.locate(key) else {
            return false;
        };
        self.table_mut(t)[b].bucket_take(i).free_elem();
        self.len -= 1;
        if !self.resizing() && self.t0.len() > MIN_BUCKETS && self.len * 8 < self.t0.len() {
            self.start_resize((self.len * 2).next_power_of_two().max(MIN_BUCKETS));
        }
        true
    }

    fn start_resize(&mut self, size: usize) {
        debug_assert!(!self.resizing());
        if size == self.t0.len() {
            return;
        }
        self.t1 = new_buckets(size);
        self.longest[1] = 0;
        self.rehash = 0;
        self.rehash_step();
    }

    /// Moves a few buckets of the old array to the new one.
    fn rehash_step(&mut self) {
        if !self.resizing() {
            return;
        }
        let (mut moved, mut visited) = (0, 0);
        let m1 = self.t1.len() - 1;
        while self.rehash < self.t0.len() && moved < REHASH_MOVES && visited < REHASH_VISITS {
            let t1 = &mut self.t1;
            let longest = &mut self.longest[1];
            let b = &mut self.t0[self.rehash];
            if !b.is_empty() {
                b.bucket_drain(|e| {
                    let h = hash(S::key(e.bytes()));
                    let nb = &mut t1[h & m1];
                    nb.bucket_push(e);
                    *longest = (*longest).max(nb.bucket().len() as u32);
                });
                moved += 1;
            }
            self.rehash += 1;
            visited += 1;
        }
        if self.rehash == self.t0.len() {
            self.t0 = std::mem::replace(&mut self.t1, Box::new([]));
            self.longest = [self.longest[1], 0];
            self.rehash = 0;
        }
    }

    /// Finishes any resize in progress (tests).
    #[cfg(test)]
    fn finish_resize(&mut self) {
        while self.resizing() {
            self.rehash_step();
        }
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.t0
            .iter()
            .chain(self.t1.iter())
            .flat_map(|b| b.bucket().iter())
    }

    /// Every element, in table order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.slots().map(Slot::bytes)
    }

    /// Visits the bucket(s) at `cursor` and returns the next cursor (0 when done),
    /// with Redis's reverse-binary increment so that resizes between calls lose
    /// nothing: while resizing, a bucket of the smaller array is visited with all its
    /// images in the larger one.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8])) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mut v = cursor;
        let mut emit = |t: &[Slot], idx: usize| t[idx].bucket().iter().for_each(|e| f(e.bytes()));
        if !self.resizing() {
            let m0 = (self.t0.len() - 1) as u64;
            emit(&self.t0, (v & m0) as usize);
            v |= !m0;
            return v.reverse_bits().wrapping_add(1).reverse_bits();
        }
        let (small, large) = if self.t0.len() <= self.t1.len() {
            (&self.t0, &self.t1)
        } else {
            (&self.t1, &self.t0)
        };
        let m0 = (small.len() - 1) as u64;
        let m1 = (large.len() - 1) as u64;
        emit(small, (v & m0) as usize);
        loop {
            emit(large, (v & m1) as usize);
            v |= !m1;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v & (m0 ^ m1) == 0 {
                return v;
            }
        }
    }

    /// The length of every bucket of the table (`rehashing` false) or of the one a
    /// resize fills (true; None when not resizing): DEBUG HTSTATS-KEY.
    pub fn chain_lengths(&self, rehashing: bool) -> Option<impl Iterator<Item = usize> + '_> {
        let t = if rehashing {
            if !self.resizing() {
                return None;
            }
            &self.t1
        } else {
            &self.t0
        };
        Some(t.iter().map(|b| b.bucket().len()))
    }

    /// A random element (see the module comment for the distribution).
    pub fn random(&self) -> Option<&[u8]> {
        let slots = self.longest[0].max(self.longest[1]).max(1) as usize;
        if self.len == 0 {
            return None;
        }
        let n0 = self.t0.len();
        let start = if self.resizing() { self.rehash } else { 0 };
        let span = n0 + self.t1.len() - start;
        loop {
            let i = start + fastrand::usize(..span);
            let b = if i < n0 {
                &self.t0[i]
            } else {
                &self.t1[i - n0]
            };
            // Fair: a slot of the bucket is drawn from 0..slots (no bucket is longer)
            // and only an occupied one is taken, so every element has the same
            // chance whatever the length of its bucket.
            if let Some(e) = b.bucket().get(fastrand::usize(..slots)) {
                return Some(e.bytes());
            }
        }
    }

    /// Heap bytes: bucket arrays, overflow blocks and element allocations.
    pub fn heap_size(&self) -> usize {
        let mut n = (self.t0.len() + self.t1.len()) * WORD;
        for b in self.t0.iter().chain(self.t1.iter()) {
            let es = b.bucket();
            if es.len() > 1 {
                n += (es.len() + 1) * WORD;
            }
            for e in es {
                if e.tag() == TAG_HEAP {
                    let l = e.bytes().len();
                    n += l + 1 + usize::from(l >= 128);
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn k(i: usize) -> Vec<u8> {
        format!("k{i}").into_bytes()
    }

    fn set_of(t: &ScanTable<Members>) -> BTreeSet<Vec<u8>> {
        t.iter().map(|e| e.to_vec()).collect()
    }

    /// Random picks are uniform (chi-square far under a five-sigma bound), whatever
    /// the bucket lengths at each size.
    #[test]
    fn random_picks_are_uniform() {
        fastrand::seed(7);
        for n in [10usize, 13, 30, 100] {
            let mut t: ScanTable<Members> = ScanTable::default();
            for i in 0..n {
                t.insert_new(&[&k(i)]);
            }
            let draws = 2000 * n;
            let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
            for _ in 0..draws {
                *seen.entry(t.random().unwrap().to_vec()).or_default() += 1;
            }
            assert_eq!(seen.len(), n);
            let expected = draws as f64 / n as f64;
            let chi2: f64 = seen
                .values()
                .map(|&o| (o as f64 - expected).powi(2) / expected)
                .sum();
            let df = (n - 1) as f64;
            assert!(chi2 < df + 5.0 * (2.0 * df).sqrt(), "n={n} chi2={chi2}");
        }
    }

    #[test]
    fn varints_round_trip() {
        for n in [0usize, 1, 127, 128, 300, 16383, 16384, 1 << 40] {
            let mut b = [0u8; 10];
            let h = write_varint(n, &mut b);
            assert_eq!(read_varint(&b[..h]), (n, h));
        }
    }

    #[test]
    fn inline_heap_and_long_elements() {
        let mut t: ScanTable<Members> = ScanTable::default();
        let long = vec![b'x'; 300];
        let members: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"1234567".to_vec(),
            b"12345678".to_vec(),
            long.clone(),
            vec![0u8, 255, 0],
        ];
        for m in &members {
            t.insert_new(&[m]);
        }
        for m in &members {
            assert_eq!(t.get(m), Some(&m[..]));
        }
        assert_eq!(t.len(), members.len());
        assert!(!t.contains(b"b"));
        let c = t.clone();
        for m in &members {
            assert!(t.remove(m));
            assert!(!t.remove(m));
        }
        assert!(t.is_empty());
        assert_eq!(set_of(&c), members.into_iter().collect());
    }

    #[test]
    fn pairs_replace_and_split() {
        let mut t: ScanTable<Pairs> = ScanTable::default();
        for i in 0..500 {
            let mut hdr = [0u8; 10];
            t.insert_new(&Pairs::parts(&mut hdr, &k(i), format!("v{i}").as_bytes()));
        }
        for i in (0..500).step_by(3) {
            let mut hdr = [0u8; 10];
            let v = vec![b'w'; i % 200];
            assert!(!t.upsert(&k(i), &Pairs::parts(&mut hdr, &k(i), &v)));
        }
        for i in 0..500 {
            let (f, v) = Pairs::split(t.get(&k(i)).unwrap());
            assert_eq!(f, &k(i)[..]);
            if i % 3 == 0 {
                assert_eq!(v, &vec![b'w'; i % 200][..]);
            } else {
                assert_eq!(v, format!("v{i}").as_bytes());
            }
        }
        let mut hdr = [0u8; 10];
        assert!(t.upsert(b"nope", &Pairs::parts(&mut hdr, b"nope", b"x")));
        assert_eq!(
            Pairs::split(t.get(b"nope").unwrap()),
            (&b"nope"[..], &b"x"[..])
        );
    }

    /// Prefetching a bucket and what it points to reads any table state (inline and
    /// heap elements, overflow blocks, empty buckets, mid-resize arrays) and changes
    /// nothing.
    #[test]
    fn prefetch_reads_any_bucket_and_changes_nothing() {
        let mut t: ScanTable<Members> = ScanTable::default();
        let members: Vec<Vec<u8>> = (0..3000)
            .map(|i| {
                if i % 3 == 0 {
                    format!("{i}").into_bytes()
                } else {
                    format!("member:{i}:{}", "x".repeat(i % 40)).into_bytes()
                }
            })
            .collect();
        for (i, m) in members.iter().enumerate() {
            t.insert_new(&[m]);
            if i % 101 == 0 {
                for probe in members[..=i].iter().rev().take(20).map(|m| m.as_slice()) {
                    let w = t.prefetch_bucket(probe);
                    // SAFETY: `w` came from `prefetch_bucket` on `t`, unchanged since.
                    unsafe { prefetch_bucket_contents(w) };
                }
                let w = t.prefetch_bucket(b"absent");
                // SAFETY: as above.
                unsafe { prefetch_bucket_contents(w) };
            }
        }
        assert_eq!(t.len(), members.len());
        assert!(members.iter().all(|m| t.contains(m)));
    }

    #[test]
    fn insert_remove_resize() {
        let mut t: ScanTable<Members> = ScanTable::default();
        for i in 0..1000 {
            t.insert_new(&[&k(i)]);
        }
        assert_eq!(t.len(), 1000);
        for i in 0..1000 {
            assert!(t.contains(&k(i)));
        }
        for i in 0..990 {
            assert!(t.remove(&k(i)));
        }
        assert_eq!(t.len(), 10);
        t.finish_resize();
        assert!(t.t0.len() <= 64);
        assert!(!t.remove(&k(0)));
        assert_eq!(set_of(&t), (990..1000).map(k).collect());
    }

    #[test]
    fn random_reaches_every_element_fairly() {
        let mut t: ScanTable<Members> = ScanTable::default();
        for i in 0..64 {
            t.insert_new(&[&k(i)]);
        }
        let mut hits: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for _ in 0..64 * 400 {
            *hits.entry(t.random().unwrap().to_vec()).or_default() += 1;
        }
        assert_eq!(hits.len(), 64);
        // Every element within a broad band around the mean of 400.
        assert!(hits.values().all(|&n| n > 100 && n < 1200), "{hits:?}");
    }

    /// Scans while the table grows and shrinks under it; returns what was seen.
    fn scan_with_churn(stable: usize, plan: &[(bool, usize)]) -> (BTreeSet<Vec<u8>>, usize) {
        let mut t: ScanTable<Members> = ScanTable::default();
        for i in 0..stable {
            t.insert_new(&[&k(i)]);
        }
        let mut tmp = Vec::new();
        let mut next = 1_000_000;
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = t.scan(cursor, |e| {
                seen.insert(e.to_vec());
            });
            let (grow, n) = plan[step % plan.len().max(1)];
            step += 1;
            if grow {
                // Bounded, so that a scan racing endless growth still ends.
                for _ in 0..n.min(4000 - tmp.len().min(4000)) {
                    tmp.push(k(next));
                    t.insert_new(&[&k(next)]);
                    next += 1;
                }
            } else {
                for _ in 0..n.min(tmp.len()) {
                    let m = tmp.swap_remove(fastrand::usize(..tmp.len()));
                    assert!(t.remove(&m));
                }
            }
            if cursor == 0 {
                break;
            }
        }
        (seen, step)
    }

    #[test]
    fn scan_survives_growth_and_shrink() {
        let plan = [
            (true, 50),
            (true, 200),
            (false, 400),
            (false, 400),
            (true, 10),
        ];
        let (seen, _) = scan_with_churn(100, &plan);
        for i in 0..100 {
            assert!(seen.contains(&k(i)), "missed {i}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Elements present for the whole scan are returned, whatever the table does
        /// between calls (grows, shrinks, mid-resize states).
        #[test]
        fn scan_guarantee(stable in 0usize..300, plan in proptest::collection::vec((any::<bool>(), 0usize..300), 1..12)) {
            let (seen, _) = scan_with_churn(stable, &plan);
            for i in 0..stable {
                prop_assert!(seen.contains(&k(i)), "missed {}", i);
            }
        }

        /// The table behaves like a BTreeSet under inserts and removes, including
        /// while resizes are in progress, and clones are independent deep copies.
        #[test]
        fn matches_model(ops in proptest::collection::vec((any::<bool>(), 0usize..400, 0usize..20), 0..1500)) {
            let mut t: ScanTable<Members> = ScanTable::default();
            let mut model = BTreeSet::new();
            for (add, i, l) in ops {
                let m: Vec<u8> = format!("{i}{}", "y".repeat(l)).into_bytes();
                if add {
                    if model.insert(m.clone()) {
                        t.insert_new(&[&m]);
                    }
                } else {
                    prop_assert_eq!(t.remove(&m), model.remove(&m));
                }
                prop_assert_eq!(t.len(), model.len());
            }
            prop_assert_eq!(set_of(&t), model.clone());
            for m in &model {
                prop_assert!(t.contains(m));
            }
            let c = t.clone();
            drop(t);
            prop_assert_eq!(set_of(&c), model);
        }

        /// `insert_if_absent` (members) and `upsert` (pairs) agree with a map, through
        /// resizes either way: each reports whether it added, and the values are the
        /// last ones written.
        #[test]
        fn upsert_and_insert_if_absent_match_a_map(ops in proptest::collection::vec((0u8..3, 0usize..400, 0usize..40), 0..1500)) {
            let mut members: ScanTable<Members> = ScanTable::default();
            let mut pairs: ScanTable<Pairs> = ScanTable::default();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (op, i, l) in ops {
                let key = k(i);
                match op {
                    0 | 1 => {
                        let value = vec![b'v'; l];
                        let mut hdr = [0u8; 10];
                        let added = pairs.upsert(&key, &Pairs::parts(&mut hdr, &key, &value));
                        prop_assert_eq!(members.insert_if_absent(&key, &[&key]), added);
                        prop_assert_eq!(model.insert(key, value).is_none(), added);
                    }
                    _ => {
                        let had = model.remove(&key).is_some();
                        prop_assert_eq!(pairs.remove(&key), had);
                        prop_assert_eq!(members.remove(&key), had);
                    }
                }
                prop_assert_eq!(pairs.len(), model.len());
            }
            prop_assert_eq!(set_of(&members), model.keys().cloned().collect::<BTreeSet<_>>());
            for (key, value) in &model {
                let (f, v) = Pairs::split(pairs.get(key).unwrap());
                prop_assert_eq!((f, v), (&key[..], &value[..]));
            }
        }
    }
}
