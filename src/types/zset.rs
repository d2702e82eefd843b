//! The sorted-set type: members with f64 scores, ordered by (score, member bytes).
//!
//! Two encodings, hidden behind one API that speaks in ranks:
//! - `listpack`: one contiguous byte buffer of `[varint len][member][score f64 LE]`
//!   entries in order, for small sets (`zset-max-listpack-entries` / `-value`). Every
//!   operation is a linear scan, which at 128 entries beats any pointer structure. As
//!   in Redis (whose listpack stores `-0` as the integer 0) a score of -0 is stored as 0.
//! - `skiplist` (the name Redis reports): a slab of (score, member) slots, a hash table
//!   of slot ids keyed by member (4 bytes a slot: the member is stored once, in the
//!   slab), and the counted B+tree of `zindex.rs` for order and rank.
//!
//! A set converts to `skiplist` when it outgrows the limits and never converts back in
//! place (as Redis); results built whole (stores) pick their encoding from their size.
//! Everything is expressed in ranks: a score or lex range is first turned into a rank
//! interval with two partition points, so commands never branch on the encoding.

use std::cmp::Ordering;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::zindex::{cmp_keys, Key, Slots, Tree};

/// The listpack thresholds, read from the configuration by the caller.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

/// ZADD's flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// What an add did (Redis's zsetAdd out flags).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOutcome {
    /// A new member, with its score.
    Added(f64),
    /// An existing member whose score changed.
    Updated(f64),
    /// Processed but the score was already that value.
    Same(f64),
    /// Not performed because of NX/XX/GT/LT.
    Nop,
    /// The increment produced NaN; nothing changed.
    NaN,
}

/// A score bound: value and whether it is exclusive.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    pub min: f64,
    pub min_ex: bool,
    pub max: f64,
    pub max_ex: bool,
}

/// A lex bound.
#[derive(Clone, Debug)]
pub enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl ScoreRange {
    fn empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
    fn below_min(&self, s: f64) -> bool {
        if self.min_ex {
            s <= self.min
        } else {
            s < self.min
        }
    }
    fn le_max(&self, s: f64) -> bool {
        if self.max_ex {
            s < self.max
        } else {
            s <= self.max
        }
    }
}

impl LexRange {
    fn empty(&self) -> bool {
        use LexBound::*;
        match (&self.min, &self.max) {
            (PosInf, _) | (_, NegInf) => true,
            (NegInf, _) | (_, PosInf) => false,
            (Incl(a), Incl(b)) => a > b,
            (Incl(a), Excl(b)) | (Excl(a), Incl(b)) | (Excl(a), Excl(b)) => a >= b,
        }
    }
    fn below_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(b) => m < b.as_slice(),
            LexBound::Excl(b) => m <= b.as_slice(),
        }
    }
    fn le_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(b) => m <= b.as_slice(),
            LexBound::Excl(b) => m < b.as_slice(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Pack(Pack),
    Big(Box<Big>),
}

// ----- listpack ------------------------------------------------------------------

/// The listpack form. The buffer is sized exactly (a boxed slice, no spare capacity)
/// and the count is 32-bit: small sets are many, and this keeps `ZSet` at 24 bytes and a
/// 5-member set's buffer in the allocator's 24-byte class.
#[derive(Clone, Debug, Default)]
struct Pack {
    buf: Box<[u8]>,
    len: u32,
}

/// One decoded listpack entry: its byte span and contents.
struct PEntry<'a> {
    at: usize,
    end: usize,
    member: &'a [u8],
    score: f64,
}

fn put_varint(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

// Score encodings in the listpack: a tag byte, then the value. Integral scores (the
// common case: counters, timestamps in seconds, ranks) take 1, 2 or 4 bytes instead of
// 8, as Redis's listpack stores them as integers.
const SCORE_I8: u8 = 0;
const SCORE_I16: u8 = 1;
const SCORE_I32: u8 = 2;
const SCORE_F64: u8 = 3;

fn put_score(score: f64, out: &mut Vec<u8>) {
    // Redis's listpack turns -0 into the integer 0.
    let score = if score == 0.0 { 0.0 } else { score };
    if score.fract() == 0.0 && score >= i32::MIN as f64 && score <= i32::MAX as f64 {
        let n = score as i32;
        if let Ok(v) = i8::try_from(n) {
            out.push(SCORE_I8);
            out.push(v as u8);
        } else if let Ok(v) = i16::try_from(n) {
            out.push(SCORE_I16);
            out.extend_from_slice(&v.to_le_bytes());
        } else {
            out.push(SCORE_I32);
            out.extend_from_slice(&n.to_le_bytes());
        }
    } else {
        out.push(SCORE_F64);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

/// Decodes a score written by `put_score` at `at`; returns it and the bytes it took.
fn get_score(buf: &[u8], at: usize) -> (f64, usize) {
    match buf[at] {
        SCORE_I8 => (buf[at + 1] as i8 as f64, 2),
        SCORE_I16 => (i16::from_le_bytes([buf[at + 1], buf[at + 2]]) as f64, 3),
        SCORE_I32 => (
            i32::from_le_bytes(buf[at + 1..at + 5].try_into().expect("4 bytes")) as f64,
            5,
        ),
        _ => (
            f64::from_le_bytes(buf[at + 1..at + 9].try_into().expect("8 bytes")),
            9,
        ),
    }
}

fn encode_entry(member: &[u8], score: f64) -> Vec<u8> {
    let mut e = Vec::with_capacity(member.len() + 10);
    put_varint(member.len(), &mut e);
    e.extend_from_slice(member);
    put_score(score, &mut e);
    e
}

struct PackIter<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = PEntry<'a>;
    fn next(&mut self) -> Option<PEntry<'a>> {
        if self.at >= self.buf.len() {
            return None;
        }
        let start = self.at;
        let (mut n, mut shift, mut i) = (0usize, 0, start);
        loop {
            let b = self.buf[i];
            n |= ((b & 0x7f) as usize) << shift;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let member = &self.buf[i..i + n];
        let s = i + n;
        let (score, width) = get_score(self.buf, s);
        self.at = s + width;
        Some(PEntry {
            at: start,
            end: self.at,
            member,
            score,
        })
    }
}

impl Pack {
    fn iter(&self) -> PackIter<'_> {
        PackIter {
            buf: &self.buf,
            at: 0,
        }
    }

    fn find(&self, member: &[u8]) -> Option<(usize, PEntry<'_>)> {
        self.iter().enumerate().find(|(_, e)| e.member == member)
    }

    fn insert(&mut self, member: &[u8], score: f64) {
        let at = self
            .iter()
            .find(|e| cmp_keys((e.score, e.member), (score, member)) == Ordering::Greater)
            .map_or(self.buf.len(), |e| e.at);
        let bytes = encode_entry(member, score);
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.reserve_exact(bytes.len());
        buf.splice(at..at, bytes);
        self.buf = buf.into_boxed_slice();
        self.len += 1;
    }

    /// Removes the bytes `at..end`, which hold `n` entries.
    fn remove_bytes(&mut self, at: usize, end: usize, n: u32) {
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.drain(at..end);
        self.buf = buf.into_boxed_slice();
        self.len -= n;
    }

    fn remove_span(&mut self, at: usize, end: usize) {
        self.remove_bytes(at, end, 1);
    }
}

// ----- skiplist (hash + counted B+tree) -------------------------------------------

#[derive(Clone, Debug)]
struct Slot {
    /// NaN marks a free slot (scores are never NaN).
    score: f64,
    member: Box<[u8]>,
}

#[derive(Clone, Debug, Default)]
struct SlotVec(Vec<Slot>);

impl Slots for SlotVec {
    fn key(&self, id: u32) -> Key<'_> {
        let s = &self.0[id as usize];
        (s.score, &s.member)
    }
}

#[derive(Clone, Default)]
struct Big {
    slots: SlotVec,
    free: Vec<u32>,
    table: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    tree: Tree,
}

impl std::fmt::Debug for Big {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Big")
            .field("len", &self.tree.len())
            .finish()
    }
}

impl Big {
    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(member);
        let slots = &self.slots.0;
        self.table
            .find(h, |&id| &*slots[id as usize].member == member)
            .copied()
    }

    fn insert_new(&mut self, member: &[u8], score: f64) {
        let slot = Slot {
            score,
            member: member.into(),
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots.0[id as usize] = slot;
                id
            }
            None => {
                self.slots.0.push(slot);
                (self.slots.0.len() - 1) as u32
            }
        };
        let h = self.hasher.hash_one(member);
        let (slots, hasher) = (&self.slots.0, &self.hasher);
        self.table
            .insert_unique(h, id, |&i| hasher.hash_one(&*slots[i as usize].member));
        self.tree.insert(id, &self.slots);
    }

    fn set_score(&mut self, id: u32, score: f64) {
        self.tree.remove(id, &self.slots);
        self.slots.0[id as usize].score = score;
        self.tree.insert(id, &self.slots);
    }

    fn remove_id(&mut self, id: u32) {
        self.tree.remove(id, &self.slots);
        self.forget(id);
    }

    /// Drops `id` from the member table and frees its slot, returning the slot's
    /// contents; the caller has already taken it out of the tree.
    fn forget(&mut self, id: u32) -> Slot {
        let h = self.hasher.hash_one(&*self.slots.0[id as usize].member);
        if let Ok(e) = self.table.find_entry(h, |&i| i == id) {
            e.remove();
        }
        let slot = std::mem::replace(
            &mut self.slots.0[id as usize],
            Slot {
                score: f64::NAN,
                member: Box::default(),
            },
        );
        self.free.push(id);
        slot
    }

    fn heap_size(&self) -> usize {
        self.slots.0.capacity() * std::mem::size_of::<Slot>()
            + self.slots.0.iter().map(|s| s.member.len()).sum::<usize>()
            + self.free.capacity() * 4
            + self.table.capacity() * 5
            + self.tree.heap_size()
    }
}

// ----- the public API -------------------------------------------------------------

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            repr: Repr::Pack(Pack::default()),
        }
    }
}

impl ZSet {
    /// An empty set encoded for about `size_hint` members of up to `max_len` bytes,
    /// as Redis's zsetTypeCreate chooses.
    pub fn with_hint(size_hint: usize, max_len: usize, limits: Limits) -> ZSet {
        if size_hint <= limits.max_entries && max_len <= limits.max_value {
            ZSet::default()
        } else {
            ZSet {
                repr: Repr::Big(Box::default()),
            }
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.len as usize,
            Repr::Big(b) => b.tree.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Big(_) => "skiplist",
        }
    }

    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.buf.len(),
            Repr::Big(b) => std::mem::size_of::<Big>() + b.heap_size(),
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Pack(p) => p.find(member).map(|(_, e)| e.score),
            Repr::Big(b) => b.find(member).map(|id| b.slots.0[id as usize].score),
        }
    }

    /// A compact set about to take `size_hint` members in one command is converted up
    /// front when they would be too many for it, even if some already belong to it
    /// (Redis's zsetTypeMaybeConvert on ZADD to an existing key).
    pub fn prepare_for(&mut self, size_hint: usize, limits: Limits) {
        if size_hint > limits.max_entries {
            self.convert_to_big();
        }
    }

    /// Gives a compact set the big encoding for good (also SORT's doing, as Redis's).
    pub fn convert_to_big(&mut self) {
        if let Repr::Pack(p) = &self.repr {
            let mut big = Box::<Big>::default();
            for e in p.iter() {
                big.insert_new(e.member, e.score);
            }
            self.repr = Repr::Big(big);
        }
    }

    /// Inserts a member known to be absent, converting the encoding if needed.
    fn insert_new(&mut self, member: &[u8], score: f64, limits: Limits) {
        if let Repr::Pack(p) = &self.repr {
            if p.len as usize + 1 > limits.max_entries
                || p.len == u32::MAX
                || member.len() > limits.max_value
            {
                self.convert_to_big();
            }
        }
        match &mut self.repr {
            Repr::Pack(p) => p.insert(member, score),
            Repr::Big(b) => b.insert_new(member, score),
        }
    }

    /// Changes an existing member's score.
    fn rescore(&mut self, member: &[u8], score: f64) {
        match &mut self.repr {
            Repr::Pack(p) => {
                if let Some((_, e)) = p.find(member) {
                    let (at, end) = (e.at, e.end);
                    p.remove_span(at, end);
                    p.insert(member, score);
                }
            }
            Repr::Big(b) => {
                if let Some(id) = b.find(member) {
                    b.set_score(id, score);
                }
            }
        }
    }

    /// ZADD/ZINCRBY on one member, with Redis's zsetAdd semantics.
    pub fn add(&mut self, member: &[u8], score: f64, f: AddFlags, limits: Limits) -> AddOutcome {
        // The big encoding's slot id is kept so that a re-score needs no second lookup.
        let found = match &self.repr {
            Repr::Pack(p) => p.find(member).map(|(_, e)| (e.score, None)),
            Repr::Big(b) => b
                .find(member)
                .map(|id| (b.slots.0[id as usize].score, Some(id))),
        };
        match found {
            Some((cur, id)) => {
                if f.nx {
                    return AddOutcome::Nop;
                }
                let new = if f.incr { score + cur } else { score };
                if new.is_nan() {
                    return AddOutcome::NaN;
                }
                if (f.lt && new >= cur) || (f.gt && new <= cur) {
                    return AddOutcome::Nop;
                }
                if new != cur {
                    match (&mut self.repr, id) {
                        (Repr::Big(b), Some(id)) => b.set_score(id, new),
                        _ => self.rescore(member, new),
                    }
                    AddOutcome::Updated(new)
                } else {
                    AddOutcome::Same(new)
                }
            }
            None => {
                if f.xx {
                    return AddOutcome::Nop;
                }
                self.insert_new(member, score, limits);
                AddOutcome::Added(score)
            }
        }
    }

    /// Adds or overwrites a member's score (building results).
    pub fn set(&mut self, member: &[u8], score: f64, limits: Limits) {
        if self.score(member).is_some() {
            self.rescore(member, score);
        } else {
            self.insert_new(member, score, limits);
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(p) => match p.find(member) {
                Some((_, e)) => {
                    let (at, end) = (e.at, e.end);
                    p.remove_span(at, end);
                    true
                }
                None => false,
            },
            Repr::Big(b) => match b.find(member) {
                Some(id) => {
                    b.remove_id(id);
                    true
                }
                None => false,
            },
        }
    }

    /// 0-based rank (from the lowest, or from the highest if `rev`) and score.
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<(usize, f64)> {
        let (r, s) = match &self.repr {
            Repr::Pack(p) => p.find(member).map(|(i, e)| (i, e.score))?,
            Repr::Big(b) => {
                let id = b.find(member)?;
                (b.tree.rank(id, &b.slots)?, b.slots.0[id as usize].score)
            }
        };
        Some((if rev { self.len() - 1 - r } else { r }, s))
    }

    /// Number of leading elements (in ascending order) for which `pred` holds; `pred`
    /// must hold for a prefix of the order.
    fn partition_point(&self, pred: impl Fn(Key<'_>) -> bool) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.iter().take_while(|e| pred((e.score, e.member))).count(),
            Repr::Big(b) => b.tree.partition_point(&b.slots, pred),
        }
    }

    /// Number of leading elements whose score satisfies `pred` (a prefix predicate).
    fn partition_point_score(&self, pred: impl Fn(f64) -> bool) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.iter().take_while(|e| pred(e.score)).count(),
            Repr::Big(b) => b.tree.partition_point_score(pred),
        }
    }

    /// The ascending rank interval `start..end` of the members with scores in `r`.
    pub fn score_ranks(&self, r: &ScoreRange) -> (usize, usize) {
        if r.empty() {
            return (0, 0);
        }
        let start = self.partition_point_score(|x| r.below_min(x));
        let end = self.partition_point_score(|x| r.le_max(x));
        (start, end.max(start))
    }

    /// Calls `f` for the members in the score range `r`, in ascending order (descending
    /// if `rev`), skipping `offset` of them and stopping after `limit` (all if `None`).
    /// One descent finds the first member; the walk then stops at the range's far end
    /// or the limit, so `LIMIT 0 10` costs ten elements whatever the range's size.
    pub fn walk_score_range(
        &self,
        r: &ScoreRange,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
        f: impl FnMut(&[u8], f64),
    ) {
        if r.empty() {
            return;
        }
        if rev {
            let end = self.partition_point_score(|x| r.le_max(x));
            self.walk_from(end, rev, offset, limit, |k| !r.below_min(k.0), f);
        } else {
            let start = self.partition_point_score(|x| r.below_min(x));
            self.walk_from(start, rev, offset, limit, |k| r.le_max(k.0), f);
        }
    }

    /// `walk_score_range` for a lex range.
    pub fn walk_lex_range(
        &self,
        r: &LexRange,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
        f: impl FnMut(&[u8], f64),
    ) {
        if r.empty() {
            return;
        }
        if rev {
            let end = self.partition_point(|k| r.le_max(k.1));
            self.walk_from(end, rev, offset, limit, |k| !r.below_min(k.1), f);
        } else {
            let start = self.partition_point(|k| r.below_min(k.1));
            self.walk_from(start, rev, offset, limit, |k| r.le_max(k.1), f);
        }
    }

    /// Walks from the boundary rank `at` (ascending: ranks `at..`; descending: ranks
    /// below `at`), skipping `offset` members and yielding at most `limit`, while
    /// `within` holds for the member's key.
    fn walk_from(
        &self,
        at: usize,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
        within: impl Fn(Key<'_>) -> bool,
        mut f: impl FnMut(&[u8], f64),
    ) {
        let (start, end) = if rev {
            (0, at.saturating_sub(offset))
        } else {
            (at.saturating_add(offset), self.len())
        };
        let mut left = limit.unwrap_or(usize::MAX);
        if left == 0 || start >= end {
            return;
        }
        self.for_each_rank_while(start, end, rev, |m, s| {
            if !within((s, m)) {
                return false;
            }
            f(m, s);
            left -= 1;
            left > 0
        });
    }

    /// The ascending rank interval of the members in the lex range `r` (meaningful when
    /// all scores are equal, as Redis documents).
    pub fn lex_ranks(&self, r: &LexRange) -> (usize, usize) {
        if r.empty() {
            return (0, 0);
        }
        let start = self.partition_point(|k| r.below_min(k.1));
        let end = self.partition_point(|k| r.le_max(k.1));
        (start, end.max(start))
    }

    /// Calls `f(member, score)` for ascending ranks `start..end`, in descending order
    /// if `rev`.
    pub fn for_each_rank(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        mut f: impl FnMut(&[u8], f64),
    ) {
        self.for_each_rank_while(start, end, rev, |m, s| {
            f(m, s);
            true
        })
    }

    /// As `for_each_rank`, stopping as soon as `f` returns false.
    fn for_each_rank_while(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        mut f: impl FnMut(&[u8], f64) -> bool,
    ) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        match &self.repr {
            Repr::Pack(p) => {
                let it = p.iter().skip(start).take(end - start);
                if rev {
                    let v: Vec<PEntry<'_>> = it.collect();
                    v.iter().rev().all(|e| f(e.member, e.score));
                } else {
                    it.take_while(|e| f(e.member, e.score)).for_each(drop);
                }
            }
            Repr::Big(b) => b.tree.for_each_while(start, end, rev, &mut |id| {
                let s = &b.slots.0[id as usize];
                f(&s.member, s.score)
            }),
        }
    }

    /// Every member with its score, ascending.
    pub fn for_each(&self, f: impl FnMut(&[u8], f64)) {
        self.for_each_rank(0, self.len(), false, f)
    }

    /// The member and score at an ascending rank.
    pub fn at_rank(&self, rank: usize) -> Option<(Vec<u8>, f64)> {
        let mut out = None;
        self.for_each_rank(rank, rank + 1, false, |m, s| out = Some((m.to_vec(), s)));
        out
    }

    /// Removes the members at ascending ranks `start..end`; returns how many.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match &mut self.repr {
            Repr::Pack(p) => {
                let mut it = p.iter().skip(start);
                let at = it.next().map_or(0, |e| e.at);
                let stop = p.iter().nth(end - 1).map_or(p.buf.len(), |e| e.end);
                p.remove_bytes(at, stop, (end - start) as u32);
            }
            Repr::Big(b) => {
                for _ in start..end {
                    let id = b.tree.remove_rank(start).expect("rank in range");
                    b.forget(id);
                }
            }
        }
        end - start
    }

    /// Removes and returns up to `count` members from the low end (or the high end if
    /// `max`), in pop order.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(Vec<u8>, f64)> {
        let n = count.min(self.len());
        let (start, end) = if max {
            (self.len() - n, self.len())
        } else {
            (0, n)
        };
        let mut out = Vec::with_capacity(n);
        if let Repr::Big(b) = &mut self.repr {
            // Taken out of the tree by rank and out of the slab by value: no key
            // comparisons and no copy of the member.
            for _ in 0..n {
                let rank = if max { b.tree.len() - 1 } else { 0 };
                let id = b.tree.remove_rank(rank).expect("rank in range");
                let slot = b.forget(id);
                out.push((slot.member.into_vec(), slot.score));
            }
            return out;
        }
        self.for_each_rank(start, end, max, |m, s| out.push((m.to_vec(), s)));
        self.remove_ranks(start, end);
        out
    }

    /// One step of ZSCAN: calls `f` for members from `cursor` on and returns the next
    /// cursor (0 when done). A listpack is returned whole. The big encoding walks slab
    /// slots, whose ids are stable for a member's lifetime, so a member present for the
    /// whole scan is returned exactly once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Pack(p) => {
                p.iter().for_each(|e| f(e.member, e.score));
                0
            }
            Repr::Big(b) => {
                let slots = &b.slots.0;
                let mut i = cursor as usize;
                let mut seen = 0;
                // Bound the work on sparse stretches of freed slots too.
                let mut visited = 0;
                while i < slots.len() && seen < count && visited < count * 10 {
                    let s = &slots[i];
                    if !s.score.is_nan() {
                        f(&s.member, s.score);
                        seen += 1;
                    }
                    i += 1;
                    visited += 1;
                }
                if i >= slots.len() {
                    0
                } else {
                    i as u64
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const SMALL: Limits = Limits {
        max_entries: 8,
        max_value: 16,
    };

    fn members(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::new();
        z.for_each(|m, s| v.push((m.to_vec(), s)));
        v
    }

    #[test]
    fn converts_at_thresholds() {
        let mut z = ZSet::default();
        for i in 0..8 {
            z.add(
                format!("m{i}").as_bytes(),
                i as f64,
                AddFlags::default(),
                SMALL,
            );
        }
        assert_eq!(z.encoding(), "listpack");
        z.add(b"m8", 8.0, AddFlags::default(), SMALL);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.len(), 9);
        let mut z = ZSet::default();
        z.add(&[b'x'; 17], 1.0, AddFlags::default(), SMALL);
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn negative_zero_is_zero_in_listpack_only() {
        let mut z = ZSet::default();
        z.add(b"a", -0.0, AddFlags::default(), SMALL);
        assert!(z.score(b"a").unwrap().is_sign_positive());
        let mut z = ZSet::with_hint(1000, 1, SMALL);
        z.add(b"a", -0.0, AddFlags::default(), SMALL);
        assert!(z.score(b"a").unwrap().is_sign_negative());
    }

    #[test]
    fn add_flags() {
        let mut z = ZSet::default();
        let f = AddFlags::default();
        assert_eq!(z.add(b"a", 1.0, f, SMALL), AddOutcome::Added(1.0));
        let gt = AddFlags { gt: true, ..f };
        assert_eq!(z.add(b"a", 0.5, gt, SMALL), AddOutcome::Nop);
        assert_eq!(z.add(b"a", 2.0, gt, SMALL), AddOutcome::Updated(2.0));
        let incr = AddFlags { incr: true, ..f };
        z.add(b"b", f64::INFINITY, f, SMALL);
        assert_eq!(z.add(b"b", f64::NEG_INFINITY, incr, SMALL), AddOutcome::NaN);
        assert_eq!(z.add(b"a", 0.0, incr, SMALL), AddOutcome::Same(2.0));
        let xx = AddFlags { xx: true, ..f };
        assert_eq!(z.add(b"c", 1.0, xx, SMALL), AddOutcome::Nop);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Both encodings against a BTreeMap model: ranks, ranges, removals.
        #[test]
        fn matches_model(ops in proptest::collection::vec((0u8..6, 0u8..40, -8i8..8), 1..400), big in any::<bool>()) {
            let limits = if big { Limits { max_entries: 0, max_value: 0 } } else { Limits { max_entries: 1000, max_value: 1000 } };
            let mut z = ZSet::with_hint(0, 0, limits);
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            for (op, m, sc) in ops {
                let member = vec![b'a' + m % 26, b'0' + m / 26];
                let score = sc as f64;
                match op {
                    0 | 1 => { z.set(&member, score, limits); model.insert(member, score); }
                    2 => { prop_assert_eq!(z.remove(&member), model.remove(&member).is_some()); }
                    3 => {
                        let r = ScoreRange { min: score, min_ex: m % 2 == 0, max: score + (m % 5) as f64, max_ex: m % 3 == 0 };
                        let (a, b) = z.score_ranks(&r);
                        let n = model.values().filter(|&&s| !r.below_min(s) && r.le_max(s)).count();
                        prop_assert_eq!(b - a, n);
                        // Walks with LIMIT against the model's filtered order.
                        let mut sorted: Vec<(Vec<u8>, f64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
                        sorted.sort_by(|x, y| cmp_keys((x.1, &x.0), (y.1, &y.0)));
                        let (off, lim) = ((m % 3) as usize, if sc < -4 { None } else { Some((sc.unsigned_abs() % 4) as usize) });
                        for rev in [false, true] {
                            let mut want: Vec<(Vec<u8>, f64)> = sorted.iter().filter(|(_, s)| !r.below_min(*s) && r.le_max(*s)).cloned().collect();
                            if rev { want.reverse(); }
                            let want: Vec<_> = want.into_iter().skip(off).take(lim.unwrap_or(usize::MAX)).collect();
                            let mut got = Vec::new();
                            z.walk_score_range(&r, rev, off, lim, |m, s| got.push((m.to_vec(), s)));
                            prop_assert_eq!(got, want);
                            let lr = LexRange { min: LexBound::Incl(vec![b'a' + m % 26]), max: if m % 2 == 0 { LexBound::PosInf } else { LexBound::Excl(vec![b'a' + (m + 5) % 26]) } };
                            let mut want: Vec<(Vec<u8>, f64)> = sorted.iter().filter(|(k, _)| !lr.below_min(k) && lr.le_max(k)).cloned().collect();
                            if rev { want.reverse(); }
                            let want: Vec<_> = want.into_iter().skip(off).take(lim.unwrap_or(usize::MAX)).collect();
                            let mut got = Vec::new();
                            z.walk_lex_range(&lr, rev, off, lim, |m, s| got.push((m.to_vec(), s)));
                            // Lex walks are defined on sets whose scores are equal; the
                            // model filter matches the walk only then.
                            if sorted.iter().all(|(_, s)| *s == sorted[0].1) {
                                prop_assert_eq!(got, want);
                            }
                        }
                    }
                    4 => {
                        let n = (m as usize) % 4;
                        let popped = z.pop(n, sc < 0);
                        let mut sorted: Vec<(Vec<u8>, f64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
                        sorted.sort_by(|a, b| cmp_keys((a.1, &a.0), (b.1, &b.0)));
                        if sc < 0 { sorted.reverse(); }
                        sorted.truncate(n);
                        for (k, _) in &sorted { model.remove(k); }
                        prop_assert_eq!(popped, sorted);
                    }
                    _ => {
                        let (a, b) = ((m as usize) % 7, (m as usize) % 7 + (sc.unsigned_abs() as usize));
                        let removed = z.remove_ranks(a, b);
                        let mut sorted: Vec<(Vec<u8>, f64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
                        sorted.sort_by(|x, y| cmp_keys((x.1, &x.0), (y.1, &y.0)));
                        let gone: Vec<_> = sorted.iter().skip(a).take(b.saturating_sub(a)).cloned().collect();
                        prop_assert_eq!(removed, gone.len());
                        for (k, _) in gone { model.remove(&k); }
                    }
                }
                prop_assert_eq!(z.len(), model.len());
            }
            let mut sorted: Vec<(Vec<u8>, f64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            sorted.sort_by(|a, b| cmp_keys((a.1, &a.0), (b.1, &b.0)));
            prop_assert_eq!(members(&z), sorted.clone());
            for (r, (m, s)) in sorted.iter().enumerate() {
                prop_assert_eq!(z.rank(m, false), Some((r, *s)));
                prop_assert_eq!(z.rank(m, true), Some((sorted.len() - 1 - r, *s)));
                prop_assert_eq!(z.score(m), Some(*s));
            }
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                cursor = z.scan(cursor, 3, |m, _| seen.push(m.to_vec()));
                if cursor == 0 { break; }
            }
            seen.sort();
            prop_assert_eq!(seen, model.keys().cloned().collect::<Vec<_>>());
        }
    }
}
