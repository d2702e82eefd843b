//! The key table's buckets: one cache line of eight tagged entry pointers, chained to
//! overflow buckets when full.
//!
//! Entries carry no chain link (it was 8 of a small key's 36 bytes): a bucket holds up
//! to eight entry pointers side by side, so finding a key reads one line of pointers and
//! then only the entry whose tag matches. A slot word is
//!
//! ```text
//! 0                                  empty
//! tag (bits 49..63) | entry address  an entry; the tag is the key hash's top 15 bits
//!                                    with the lowest forced to 1, never zero, so empty
//!                                    slots never match
//! overflow address | 1               slot 7 only: the rest of the chain
//! ```
//!
//! Fifteen bits keep a tag positive as a 16-bit lane, which lets SSE2 compare a whole
//! bucket's tags at once (`tag_hits`).
//!
//! Entry addresses are 8-aligned and below 2^48 (user-space addresses on the 64-bit
//! targets Cinnabar builds for; `word` checks it).
//!
//! A chain is packed: its entries fill slots in order, a bucket that has an overflow
//! holds seven entries and the overflow's pointer, only the chain's last bucket has
//! empty slots, and an overflow bucket holds at least two entries (one left over is
//! moved back into its parent's last slot). So the first empty slot ends a chain, and
//! removing moves the chain's last entry into the hole.

use super::entry::EntryPtr;

pub const SLOTS: usize = 8;
const LAST: usize = SLOTS - 1;
const OVERFLOW: u64 = 1;
const ADDR_MASK: u64 = (1 << 48) - 8;
const TAG_SHIFT: u32 = 49;
const TAG_MASK: u64 = !((1 << TAG_SHIFT) - 1);

#[repr(C, align(64))]
pub struct Bucket {
    slots: [u64; SLOTS],
}

/// The tag of a key with hash `h`: its top 15 bits, made non-zero.
#[inline(always)]
pub fn tag(h: u64) -> u64 {
    (h | (1 << TAG_SHIFT)) & TAG_MASK
}

/// The slot word of entry `e` whose key's tag is `tag`.
#[inline(always)]
pub fn word(e: EntryPtr, tag: u64) -> u64 {
    let a = e.as_ptr() as u64;
    assert!(a & !ADDR_MASK == 0, "entry address outside 48 bits");
    a | tag
}

/// The entry a slot word holds.
///
/// # Safety
/// `w` must be an entry word of a live chain (non-zero, not an overflow pointer).
#[inline(always)]
unsafe fn entry(w: u64) -> EntryPtr {
    // SAFETY: per the contract the address bits are a live entry's pointer.
    unsafe { EntryPtr::from_raw((w & ADDR_MASK) as *mut u8) }
}

fn is_overflow(w: u64) -> bool {
    w & OVERFLOW != 0
}

/// Where an entry sits in a chain: buckets to follow from the head, and the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    depth: u32,
    slot: u32,
}

impl Bucket {
    /// The overflow bucket, if any.
    #[inline(always)]
    fn overflow(&self) -> Option<&Bucket> {
        let w = self.slots[LAST];
        // SAFETY: an overflow word holds the address of a live boxed bucket owned by
        // this chain.
        is_overflow(w).then(|| unsafe { &*((w & ADDR_MASK) as *const Bucket) })
    }

    fn overflow_ptr(&mut self) -> Option<*mut Bucket> {
        let w = self.slots[LAST];
        is_overflow(w).then_some((w & ADDR_MASK) as *mut Bucket)
    }

    /// Entries held in this bucket itself (not its overflow).
    #[inline(always)]
    fn own_len(&self) -> usize {
        if is_overflow(self.slots[LAST]) {
            LAST
        } else {
            self.slots.iter().position(|&w| w == 0).unwrap_or(SLOTS)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slots[0] == 0
    }

    /// Entries in the whole chain.
    pub fn len(&self) -> usize {
        let mut n = 0;
        let mut b = self;
        loop {
            n += b.own_len();
            match b.overflow() {
                Some(o) => b = o,
                None => return n,
            }
        }
    }

    /// Slots of this bucket whose word carries `tag`, as a bit set.
    #[inline(always)]
    #[cfg(not(target_arch = "x86_64"))]
    fn tag_hits(&self, tag: u64) -> u32 {
        let mut m = 0;
        for (i, &w) in self.slots.iter().enumerate() {
            m |= u32::from(w & TAG_MASK == tag) << i;
        }
        m
    }

    /// Slots of this bucket whose word carries `tag`, as a bit set: the eight tags
    /// are shifted down and packed into 16-bit lanes (they are below 2^15, so the
    /// saturating packs keep them), compared at once, and packed again to one byte per
    /// slot for the mask. About a third of the instructions of a word-by-word loop.
    #[inline(always)]
    #[cfg(target_arch = "x86_64")]
    fn tag_hits(&self, tag: u64) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the bucket is 64-aligned and 64
        // bytes long, so the four aligned 16-byte loads stay inside it.
        unsafe {
            let p = self.slots.as_ptr() as *const __m128i;
            let t0 = _mm_srli_epi64::<{ TAG_SHIFT as i32 }>(_mm_load_si128(p));
            let t1 = _mm_srli_epi64::<{ TAG_SHIFT as i32 }>(_mm_load_si128(p.add(1)));
            let t2 = _mm_srli_epi64::<{ TAG_SHIFT as i32 }>(_mm_load_si128(p.add(2)));
            let t3 = _mm_srli_epi64::<{ TAG_SHIFT as i32 }>(_mm_load_si128(p.add(3)));
            // 32-bit lanes [tag, 0, tag, 0] -> 16-bit lanes [t0 0 t1 0 t2 0 t3 0] ...
            let lo = _mm_packs_epi32(t0, t1);
            let hi = _mm_packs_epi32(t2, t3);
            // ... -> the eight tags in eight 16-bit lanes.
            let tags = _mm_packs_epi32(lo, hi);
            let eq = _mm_cmpeq_epi16(tags, _mm_set1_epi16((tag >> TAG_SHIFT) as i16));
            _mm_movemask_epi8(_mm_packs_epi16(eq, _mm_setzero_si128())) as u32
        }
    }

    /// The chain's entry with `key`, whose tag is `tag`.
    #[inline]
    pub fn find(&self, tag: u64, key: &[u8]) -> Option<(EntryPtr, Pos)> {
        let mut b = self;
        let mut depth = 0;
        loop {
            let mut hits = b.tag_hits(tag);
            while hits != 0 {
                let i = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                // SAFETY: a slot whose tag bits match a non-zero tag holds an entry
                // (overflow words have no tag bits).
                let e = unsafe { entry(b.slots[i]) };
                if e.key() == key {
                    return Some((
                        e,
                        Pos {
                            depth,
                            slot: i as u32,
                        },
                    ));
                }
            }
            b = b.overflow()?;
            depth += 1;
        }
    }

    /// The first entry of this bucket (not its overflow) whose tag is `tag`: the
    /// likeliest match, for prefetching.
    #[inline(always)]
    pub fn first_with_tag(&self, tag: u64) -> Option<EntryPtr> {
        let hits = self.tag_hits(tag);
        // SAFETY: as in `find`.
        (hits != 0).then(|| unsafe { entry(self.slots[hits.trailing_zeros() as usize]) })
    }

    /// Calls `f` on every entry of the chain, in chain order.
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(EntryPtr)) {
        let mut b = self;
        loop {
            for &w in &b.slots[..b.own_len()] {
                // SAFETY: the first `own_len` slots of a bucket hold entries.
                f(unsafe { entry(w) });
            }
            match b.overflow() {
                Some(o) => b = o,
                None => return,
            }
        }
    }

    /// The chain's `n`th entry (`n < len()`).
    pub fn nth(&self, mut n: usize) -> Option<EntryPtr> {
        let mut b = self;
        loop {
            let own = b.own_len();
            if n < own {
                // SAFETY: as in `for_each`.
                return Some(unsafe { entry(b.slots[n]) });
            }
            n -= own;
            b = b.overflow()?;
        }
    }

    /// The bucket `depth` overflows down the chain.
    fn at_depth(&mut self, depth: u32) -> *mut Bucket {
        let mut b: *mut Bucket = self;
        for _ in 0..depth {
            // SAFETY: `depth` came from `find` on this unchanged chain, so every bucket
            // on the way has an overflow.
            b = unsafe { (*b).overflow_ptr() }.expect("position within the chain");
        }
        b
    }

    /// Replaces the entry at `pos` (from `find`, chain unchanged since) with word `w`.
    pub fn set(&mut self, pos: Pos, w: u64) {
        let b = self.at_depth(pos.depth);
        // SAFETY: `b` is a live bucket of this chain, borrowed through `self`.
        unsafe { (*b).slots[pos.slot as usize] = w };
    }

    /// Appends entry word `w` at the chain's end, adding an overflow bucket when the
    /// last one is full.
    pub fn push(&mut self, w: u64) {
        let mut b: *mut Bucket = self;
        // SAFETY: every bucket reached is this chain's, reached through `self`; a new
        // overflow bucket is boxed and owned by the chain from here on.
        unsafe {
            while let Some(o) = (*b).overflow_ptr() {
                b = o;
            }
            let n = (*b).own_len();
            if n < SLOTS {
                (*b).slots[n] = w;
            } else {
                let mut o = Box::new(Bucket { slots: [0; SLOTS] });
                o.slots[0] = (*b).slots[LAST];
                o.slots[1] = w;
                (*b).slots[LAST] = Box::into_raw(o) as u64 | OVERFLOW;
            }
        }
    }

    /// Removes the entry at `pos` (from `find`, chain unchanged since) and returns it;
    /// the chain's last entry takes its place.
    pub fn remove(&mut self, pos: Pos) -> EntryPtr {
        let target = self.at_depth(pos.depth);
        let mut parent: *mut Bucket = std::ptr::null_mut();
        let mut last: *mut Bucket = self;
        // SAFETY: all buckets are this chain's, reached through `self`; the slot at
        // `pos` holds an entry; a freed overflow is unlinked first and was boxed.
        unsafe {
            while let Some(o) = (*last).overflow_ptr() {
                parent = last;
                last = o;
            }
            let removed = (*target).slots[pos.slot as usize];
            let n = (*last).own_len();
            let moved = std::mem::replace(&mut (*last).slots[n - 1], 0);
            if !(target == last && pos.slot as usize == n - 1) {
                (*target).slots[pos.slot as usize] = moved;
            }
            if !parent.is_null() && n - 1 == 1 {
                (*parent).slots[LAST] = (*last).slots[0];
                drop(Box::from_raw(last));
            }
            entry(removed)
        }
    }

    /// Empties the chain, handing each entry to `f` and freeing its overflow buckets.
    pub fn drain(&mut self, mut f: impl FnMut(EntryPtr, u64)) {
        let mut next = self.overflow_ptr();
        for &w in &self.slots[..self.own_len()] {
            // SAFETY: as in `for_each`.
            f(unsafe { entry(w) }, w & TAG_MASK);
        }
        self.slots = [0; SLOTS];
        while let Some(b) = next {
            // SAFETY: the overflow bucket was boxed by `push` and is owned by this
            // chain alone; it is read, then freed once.
            let mut o = unsafe { Box::from_raw(b) };
            next = o.overflow_ptr();
            for &w in &o.slots[..o.own_len()] {
                // SAFETY: as in `for_each`.
                f(unsafe { entry(w) }, w & TAG_MASK);
            }
            o.slots = [0; SLOTS];
        }
    }

    /// Asks the CPU for this bucket's line.
    #[inline(always)]
    pub fn prefetch(&self) {
        super::entry::prefetch(self as *const Bucket as *const u8);
    }
}

/// `n` empty buckets, or None when the allocator cannot give them (a size asked for by
/// a client must not abort the process). A zeroed block: the pages are mapped lazily,
/// so even a 128 MB array costs no pause.
pub fn try_empty(n: usize) -> Option<Vec<Bucket>> {
    let layout = std::alloc::Layout::array::<Bucket>(n).ok()?;
    if layout.size() == 0 {
        return Some(Vec::new());
    }
    // SAFETY: the layout is non-zero in size; a zeroed block is `n` empty buckets
    // (all-zero words); the Vec takes the block with exactly the layout it was
    // allocated with (capacity `n` of `Bucket`), so it frees it with that layout.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut Bucket;
        if p.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(p, n, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::value::Value;

    fn entry_for(n: usize) -> (EntryPtr, Vec<u8>) {
        let key = format!("k{n}").into_bytes();
        (EntryPtr::new(&key, None, Value::Int(n as i64), 0), key)
    }

    fn free(e: EntryPtr) {
        // SAFETY: the entry was taken out of its chain.
        drop(unsafe { e.into_value() });
    }

    /// Chains grow through overflow buckets and shrink back, staying packed, whatever
    /// order entries leave in.
    #[test]
    fn chains_overflow_and_fold_back() {
        for removal_seed in 0..20u64 {
            let mut b = try_empty(1).unwrap();
            let head = &mut b[0];
            let t = tag(0xabcd_0000_0000_0000);
            let mut keys = Vec::new();
            for n in 0..40 {
                let (e, k) = entry_for(n);
                head.push(word(e, t));
                keys.push(k);
                assert_eq!(head.len(), n + 1);
            }
            let mut seen = Vec::new();
            head.for_each(|e| seen.push(e.key().to_vec()));
            assert_eq!(seen, keys, "chain order is insertion order");
            assert_eq!(head.nth(39).unwrap().key(), b"k39");
            let mut rng = fastrand::Rng::with_seed(removal_seed);
            while !keys.is_empty() {
                let k = keys.swap_remove(rng.usize(..keys.len()));
                let (e, pos) = head.find(t, &k).expect("present");
                assert_eq!(head.remove(pos), e);
                free(e);
                assert!(head.find(t, &k).is_none());
                assert_eq!(head.len(), keys.len());
                for k in &keys {
                    assert!(head.find(t, k).is_some());
                }
                // Packed: exactly `len` entries are visited and an overflow holds two
                // or more.
                let mut n = 0;
                head.for_each(|_| n += 1);
                assert_eq!(n, keys.len());
                let mut bk: &Bucket = head;
                while let Some(o) = bk.overflow() {
                    assert!(o.len() >= 2);
                    bk = o;
                }
            }
            assert!(head.is_empty());
        }
    }

    /// The packed comparison agrees with the word-by-word definition, whatever mix of
    /// empty slots, entries, an overflow pointer and extreme tags a bucket holds.
    #[test]
    fn tag_hits_matches_each_word() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut b = try_empty(1).unwrap();
        for round in 0..20_000 {
            let tags = [tag(0), tag(u64::MAX), tag(rng.u64(..)), tag(rng.u64(..))];
            for (i, w) in b[0].slots.iter_mut().enumerate() {
                *w = match rng.u8(0..4) {
                    0 => 0,
                    1 if i == LAST => (rng.u64(..) & ADDR_MASK) | OVERFLOW,
                    _ => (rng.u64(..) & ADDR_MASK) | tags[rng.usize(..4)],
                };
            }
            let probe = if round % 5 == 0 {
                tag(rng.u64(..))
            } else {
                tags[rng.usize(..4)]
            };
            let want = b[0]
                .slots
                .iter()
                .enumerate()
                .fold(0, |m, (i, &w)| m | (u32::from(w & TAG_MASK == probe) << i));
            assert_eq!(b[0].tag_hits(probe), want, "{:x?} {probe:x}", b[0].slots);
        }
        b[0].slots = [0; SLOTS];
    }

    #[test]
    fn tags_separate_keys_and_drain_frees_everything() {
        let mut b = try_empty(1).unwrap();
        let head = &mut b[0];
        for n in 0..20 {
            let (e, _) = entry_for(n);
            head.push(word(e, tag((n as u64) << 50)));
        }
        // A key present under another tag is not found.
        assert!(head.find(tag(1 << 50), b"k2").is_none());
        assert!(head.find(tag(2 << 50), b"k2").is_some());
        assert_eq!(
            head.first_with_tag(tag(3 << 50)).map(|e| e.key().to_vec()),
            Some(b"k3".to_vec())
        );
        let mut n = 0;
        head.drain(|e, _| {
            n += 1;
            free(e);
        });
        assert_eq!(n, 20);
        assert!(head.is_empty());
        assert_eq!(head.len(), 0);
    }
}
