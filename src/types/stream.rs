//! Streams: entries indexed by ID in compact byte blocks, plus consumer groups.
//!
//! Layout follows Redis's radix tree of listpacks: a `BTreeMap` from a block's first
//! ("master") ID to a `Block`, a contiguous byte buffer holding up to
//! `stream-node-max-entries` entries (or about `stream-node-max-bytes` bytes). Each
//! block stores the field names of its first entry once (the master fields); an entry
//! with exactly those field names stores only its values (Redis's SAMEFIELDS flag).
//! IDs are stored as varint deltas from the master ID. Deletion (XDEL, exact trims)
//! only sets a flag on the entry, as in Redis; a block whose entries are all deleted
//! is dropped, and approximate trims drop whole blocks.
//!
//! Entry encoding inside a block:
//! `flags:u8 | body_len:varint | dms:varint | dseq:varint | [n:varint fields…] values…`
//! where strings are `len:varint bytes`. `body_len` lets a scan skip entries without
//! decoding them.
//!
//! Consumer groups (`Group`, `Consumer`, `Nack`) are plain ordered maps: groups and
//! consumers are listed by name as Redis's rax orders them, the PEL by ID.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The next ID, `None` at the maximum.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, `None` at 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// Parses `ms-seq` or `ms` (the sequence then is `missing_seq`). The second value
    /// says whether the sequence was `*` (XADD's `ms-*`), allowed only when `seq_star`.
    pub fn parse(s: &[u8], missing_seq: u64, seq_star: bool) -> Option<(StreamId, bool)> {
        match s.iter().position(|&b| b == b'-') {
            None => Some((StreamId::new(parse_u64(s)?, missing_seq), false)),
            Some(p) => {
                let ms = parse_u64(&s[..p])?;
                let rest = &s[p + 1..];
                if seq_star && rest == b"*" {
                    return Some((StreamId::new(ms, 0), true));
                }
                Some((StreamId::new(ms, parse_u64(rest)?), false))
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut buf = [0u8; 41];
        self.format_into(&mut buf).to_vec()
    }

    /// Writes `ms-seq` into `buf` and returns the written part: IDs are formatted per
    /// entry in replies, where `format!` would cost an allocation and the fmt machinery.
    pub fn format_into<'b>(&self, buf: &'b mut [u8; 41]) -> &'b [u8] {
        let mut tmp = [0u8; 20];
        let ms = fmt_u64(self.ms, &mut tmp);
        let n = ms.len();
        buf[..n].copy_from_slice(ms);
        buf[n] = b'-';
        let seq = fmt_u64(self.seq, &mut tmp);
        buf[n + 1..n + 1 + seq.len()].copy_from_slice(seq);
        &buf[..n + 1 + seq.len()]
    }
}

/// Decimal digits of `v`, written at the end of `tmp`.
fn fmt_u64(mut v: u64, tmp: &mut [u8; 20]) -> &[u8] {
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &tmp[i..];
        }
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Redis's string2ull: decimal digits only, no sign, no overflow.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

// ----- varints ----------------------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn get_str<'a>(b: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let n = get_varint(b, pos) as usize;
    let s = &b[*pos..*pos + n];
    *pos += n;
    s
}

const FLAG_DELETED: u8 = 1;
const FLAG_SAMEFIELDS: u8 = 2;

/// One entry as returned to commands: its ID and its field/value pairs, flattened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: StreamId,
    pub fields: Vec<Vec<u8>>,
}

/// A compact block of entries (see the module comment for the encoding).
#[derive(Clone, Debug)]
struct Block {
    data: Vec<u8>,
    /// Entries not marked deleted.
    live: u32,
    /// All entries, deleted ones included.
    total: u32,
    /// Offset of the first entry (just past the master fields).
    entries_at: u32,
}

/// Buffers reused across the blocks of one range walk.
#[derive(Default)]
struct Scratch<'a> {
    master: Vec<&'a [u8]>,
    pairs: Vec<&'a [u8]>,
}

/// Position of one entry inside a block.
#[derive(Clone, Copy)]
struct Slot {
    id: StreamId,
    /// Offset of the flags byte.
    at: usize,
    /// Offset of the body (past `body_len`) and its end.
    body: usize,
    end: usize,
    flags: u8,
}

impl Block {
    fn new(master: &[&[u8]]) -> Block {
        let mut data = Vec::with_capacity(64);
        put_varint(&mut data, master.len() as u64);
        for f in master {
            put_str(&mut data, f);
        }
        let entries_at = data.len() as u32;
        Block {
            data,
            live: 0,
            total: 0,
            entries_at,
        }
    }

    /// Gives a full block its exact size. A copy rather than `shrink_to_fit`: the
    /// allocator may shrink in place by keeping the larger block (mimalloc does when
    /// the new size is at least half the old), which would leave the slack resident.
    fn seal(&mut self) {
        if self.data.capacity() > self.data.len() {
            self.data = self.data.as_slice().to_vec();
        }
    }

    fn master_fields(&self) -> Vec<&[u8]> {
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos);
        (0..n).map(|_| get_str(&self.data, &mut pos)).collect()
    }

    fn same_fields(&self, pairs: &[&[u8]]) -> bool {
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos) as usize;
        if n * 2 != pairs.len() {
            return false;
        }
        (0..n).all(|i| get_str(&self.data, &mut pos) == pairs[i * 2])
    }

    fn append(&mut self, base: StreamId, id: StreamId, pairs: &[&[u8]]) {
        let same = self.same_fields(pairs);
        let mut body = Vec::with_capacity(16);
        put_varint(&mut body, id.ms - base.ms);
        // The sequence delta wraps when ms moved on; it is decoded with wrapping too.
        put_varint(&mut body, id.seq.wrapping_sub(base.seq));
        if !same {
            put_varint(&mut body, (pairs.len() / 2) as u64);
        }
        for (i, s) in pairs.iter().enumerate() {
            if same && i % 2 == 0 {
                continue;
            }
            put_str(&mut body, s);
        }
        self.data.push(if same { FLAG_SAMEFIELDS } else { 0 });
        put_varint(&mut self.data, body.len() as u64);
        self.data.extend_from_slice(&body);
        self.live += 1;
        self.total += 1;
    }

    fn slots(&self, base: StreamId) -> Vec<Slot> {
        let mut out = Vec::with_capacity(self.total as usize);
        let mut pos = self.entries_at as usize;
        let d = &self.data;
        while pos < d.len() {
            let at = pos;
            let flags = d[pos];
            pos += 1;
            let len = get_varint(d, &mut pos) as usize;
            let body = pos;
            let end = pos + len;
            let mut p = body;
            let dms = get_varint(d, &mut p);
            let dseq = get_varint(d, &mut p);
            out.push(Slot {
                id: StreamId::new(base.ms + dms, base.seq.wrapping_add(dseq)),
                at,
                body,
                end,
                flags,
            });
            pos = end;
        }
        out
    }

    fn fields(&self, s: &Slot) -> Vec<Vec<u8>> {
        let d = &self.data;
        let mut p = s.body;
        get_varint(d, &mut p);
        get_varint(d, &mut p);
        let mut out = Vec::new();
        if s.flags & FLAG_SAMEFIELDS != 0 {
            for f in self.master_fields() {
                out.push(f.to_vec());
                out.push(get_str(d, &mut p).to_vec());
            }
        } else {
            let n = get_varint(d, &mut p);
            for _ in 0..n * 2 {
                out.push(get_str(d, &mut p).to_vec());
            }
        }
        debug_assert_eq!(p, s.end);
        out
    }

    /// Appends an entry loaded from a file, keeping its deleted flag.
    fn append_loaded(&mut self, base: StreamId, id: StreamId, pairs: &[&[u8]], deleted: bool) {
        let flags_at = self.data.len();
        self.append(base, id, pairs);
        if deleted {
            self.data[flags_at] |= FLAG_DELETED;
            self.live -= 1;
        }
    }

    /// Calls `f(id, deleted, same_fields, strings)` for every entry, deleted ones
    /// included, in ID order. `strings` holds the values only when `same_fields`
    /// (the names are the master fields), else the field/value pairs flattened.
    fn for_each_raw(&self, base: StreamId, mut f: impl FnMut(StreamId, bool, bool, &[&[u8]])) {
        let d = &self.data;
        let mut strings: Vec<&[u8]> = Vec::new();
        let mut pos = 0;
        let master_n = get_varint(d, &mut pos) as usize;
        for s in self.slots(base) {
            strings.clear();
            let mut p = s.body;
            get_varint(d, &mut p);
            get_varint(d, &mut p);
            let same = s.flags & FLAG_SAMEFIELDS != 0;
            let n = if same {
                master_n
            } else {
                get_varint(d, &mut p) as usize * 2
            };
            for _ in 0..n {
                strings.push(get_str(d, &mut p));
            }
            f(s.id, s.flags & FLAG_DELETED != 0, same, &strings);
        }
    }

    /// The master field names into `out`.
    fn master_into<'a>(&'a self, out: &mut Vec<&'a [u8]>) {
        out.clear();
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos);
        for _ in 0..n {
            out.push(get_str(&self.data, &mut pos));
        }
    }

    /// The field/value pairs of the entry whose body starts at `body`, flattened into
    /// `out` (the names of a SAMEFIELDS entry come from `master`).
    fn pairs_into<'a>(
        &'a self,
        body: usize,
        flags: u8,
        master: &[&'a [u8]],
        out: &mut Vec<&'a [u8]>,
    ) {
        let d = &self.data;
        let mut p = body;
        get_varint(d, &mut p);
        get_varint(d, &mut p);
        out.clear();
        if flags & FLAG_SAMEFIELDS != 0 {
            for f in master {
                out.push(f);
                out.push(get_str(d, &mut p));
            }
        } else {
            let n = get_varint(d, &mut p);
            for _ in 0..n * 2 {
                out.push(get_str(d, &mut p));
            }
        }
    }

    /// Visits the live entries with `start <= id <= end` in ascending order, walking
    /// the buffer once (no slot table). Returns false once `f` says stop or an entry
    /// past `end` is met (later blocks hold only larger IDs).
    fn visit_fwd<'a>(
        &'a self,
        base: StreamId,
        start: StreamId,
        end: StreamId,
        sc: &mut Scratch<'a>,
        f: &mut impl FnMut(StreamId, &[&'a [u8]]) -> bool,
    ) -> bool {
        let d = &self.data;
        let mut pos = self.entries_at as usize;
        let mut master_read = false;
        while pos < d.len() {
            let flags = d[pos];
            pos += 1;
            let len = get_varint(d, &mut pos) as usize;
            let body = pos;
            pos += len;
            if flags & FLAG_DELETED != 0 {
                continue;
            }
            let mut p = body;
            let dms = get_varint(d, &mut p);
            let dseq = get_varint(d, &mut p);
            let id = StreamId::new(base.ms + dms, base.seq.wrapping_add(dseq));
            if id < start {
                continue;
            }
            if id > end {
                return false;
            }
            if !master_read && flags & FLAG_SAMEFIELDS != 0 {
                self.master_into(&mut sc.master);
                master_read = true;
            }
            self.pairs_into(body, flags, &sc.master, &mut sc.pairs);
            if !f(id, &sc.pairs) {
                return false;
            }
        }
        true
    }

    /// As `visit_fwd`, in descending order.
    fn visit_rev<'a>(
        &'a self,
        base: StreamId,
        start: StreamId,
        end: StreamId,
        sc: &mut Scratch<'a>,
        f: &mut impl FnMut(StreamId, &[&'a [u8]]) -> bool,
    ) -> bool {
        self.master_into(&mut sc.master);
        for s in self.slots(base).iter().rev() {
            if s.flags & FLAG_DELETED != 0 || s.id > end {
                continue;
            }
            if s.id < start {
                return false;
            }
            self.pairs_into(s.body, s.flags, &sc.master, &mut sc.pairs);
            if !f(s.id, &sc.pairs) {
                return false;
            }
        }
        true
    }

    fn mark_deleted(&mut self, s: &Slot) {
        self.data[s.at] |= FLAG_DELETED;
        self.live -= 1;
    }
}

/// A read-only view of one block for the RDB writer.
pub struct NodeRef<'a> {
    pub master: StreamId,
    block: &'a Block,
}

impl<'a> NodeRef<'a> {
    pub fn master_fields(&self) -> Vec<&'a [u8]> {
        self.block.master_fields()
    }

    /// Entries not marked deleted.
    pub fn live(&self) -> u32 {
        self.block.live
    }

    /// Entries marked deleted (tombstones still in the block).
    pub fn deleted(&self) -> u32 {
        self.block.total - self.block.live
    }

    /// See `Block::for_each_raw`.
    pub fn for_each_entry(&self, f: impl FnMut(StreamId, bool, bool, &[&[u8]])) {
        self.block.for_each_raw(self.master, f)
    }
}

/// How XADD/XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// A pending entry: delivered to a consumer, not yet acknowledged.
#[derive(Clone, Debug)]
pub struct Nack {
    pub delivery_time: i64,
    pub delivery_count: u64,
    /// The owner's name, shared with the group's consumer map (its key): delivering
    /// and acknowledging then allocate and free nothing per entry.
    pub consumer: Arc<[u8]>,
}

#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Last time the consumer was seen (any interaction).
    pub seen_time: i64,
    /// Last time it read or claimed successfully (-1: never).
    pub active_time: i64,
    pub pel: BTreeSet<StreamId>,
}

/// `entries_read` value meaning "unknown".
pub const ENTRIES_READ_INVALID: i64 = -1;

#[derive(Clone, Debug)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Finds or creates a consumer; returns whether it was created.
    pub fn consumer(&mut self, name: &[u8], now: i64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        if created {
            self.consumers.insert(
                Arc::from(name),
                Consumer {
                    seen_time: now,
                    active_time: -1,
                    pel: BTreeSet::new(),
                },
            );
        }
        (self.consumers.get_mut(name).expect("consumer"), created)
    }

    /// Acknowledges `id`; returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            None => false,
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
        }
    }

    /// Records `id` as delivered to `consumer` at `now` (moving it from its previous
    /// owner when needed), with the given delivery count.
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], now: i64, count: u64) {
        let name = match self.consumers.get_key_value(consumer) {
            Some((k, _)) => k.clone(),
            None => Arc::from(consumer),
        };
        match self.pel.get_mut(&id) {
            Some(old) => {
                if *old.consumer != *consumer {
                    if let Some(c) = self.consumers.get_mut(&old.consumer) {
                        c.pel.remove(&id);
                    }
                }
                *old = Nack {
                    delivery_time: now,
                    delivery_count: count,
                    consumer: name,
                };
            }
            None => {
                self.pel.insert(
                    id,
                    Nack {
                        delivery_time: now,
                        delivery_count: count,
                        consumer: name,
                    },
                );
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Deletes a consumer; returns the number of its pending entries (dropped too).
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }
}

/// A stream value.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    blocks: BTreeMap<StreamId, Block>,
    len: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of blocks (XINFO STREAM `radix-tree-nodes` approximation).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    pub fn heap_size(&self) -> usize {
        let blocks: usize = self
            .blocks
            .values()
            .map(|b| b.data.capacity() + std::mem::size_of::<Block>() + 32)
            .sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(k, g)| {
                k.len()
                    + std::mem::size_of::<Group>()
                    + g.pel.len() * (std::mem::size_of::<Nack>() + 48)
                    + g.consumers
                        .iter()
                        .map(|(n, c)| n.len() + 64 + c.pel.len() * 24)
                        .sum::<usize>()
            })
            .sum();
        std::mem::size_of::<Stream>() + blocks + groups
    }

    /// The ID XADD `*` generates at time `now_ms`; `None` when the stream is exhausted.
    pub fn next_id(&self, now_ms: u64) -> Option<StreamId> {
        if now_ms > self.last_id.ms {
            Some(StreamId::new(now_ms, 0))
        } else {
            self.last_id.incr()
        }
    }

    /// Appends an entry with `id` (which must exceed `last_id`); `pairs` are the
    /// flattened field/value pairs. A new block starts when the tail block reached
    /// `max_bytes` or `max_entries` (0 = no limit).
    pub fn append(&mut self, id: StreamId, pairs: &[&[u8]], max_bytes: usize, max_entries: usize) {
        debug_assert!(id > self.last_id || (self.entries_added == 0 && id > StreamId::MIN));
        let add_len: usize = pairs.iter().map(|p| p.len()).sum();
        let max_bytes = if max_bytes == 0 { 1 << 30 } else { max_bytes };
        let mut new_block = true;
        if let Some((_, b)) = self.blocks.iter().next_back() {
            new_block = b.data.len() + add_len >= max_bytes
                || (max_entries != 0 && b.total as usize >= max_entries);
        }
        if new_block {
            if let Some((_, b)) = self.blocks.iter_mut().next_back() {
                b.seal();
            }
            let master: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
            self.blocks.insert(id, Block::new(&master));
        }
        let (base, b) = self.blocks.iter_mut().next_back().expect("tail block");
        b.append(*base, id, pairs);
        if self.len == 0 {
            self.first_id = id;
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    fn block_of(&self, id: StreamId) -> Option<(StreamId, &Block)> {
        self.blocks.range(..=id).next_back().map(|(k, b)| (*k, b))
    }

    /// The entry with `id`, if present and not deleted.
    pub fn get(&self, id: StreamId) -> Option<Entry> {
        let (base, b) = self.block_of(id)?;
        let s = b
            .slots(base)
            .into_iter()
            .find(|s| s.id == id && s.flags & FLAG_DELETED == 0)?;
        Some(Entry {
            id,
            fields: b.fields(&s),
        })
    }

    pub fn contains(&self, id: StreamId) -> bool {
        match self.block_of(id) {
            None => false,
            Some((base, b)) => b
                .slots(base)
                .iter()
                .any(|s| s.id == id && s.flags & FLAG_DELETED == 0),
        }
    }

    /// Live entries with `start <= id <= end`, ascending (or descending when `rev`),
    /// at most `count` of them (0 = all).
    pub fn range(&self, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<Entry> {
        let mut out = Vec::new();
        self.range_each(start, end, count, rev, |id, pairs| {
            out.push(Entry {
                id,
                fields: pairs.iter().map(|p| p.to_vec()).collect(),
            })
        });
        out
    }

    /// Calls `f(id, pairs)` for the entries `range` would return, in the same order,
    /// with the field/value pairs flattened and borrowed from the blocks; returns how
    /// many there were. Replies are encoded straight from here, without an `Entry`
    /// (and its allocations) per entry.
    pub fn range_each<'s>(
        &'s self,
        start: StreamId,
        end: StreamId,
        count: usize,
        rev: bool,
        mut f: impl FnMut(StreamId, &[&'s [u8]]),
    ) -> usize {
        if start > end {
            return 0;
        }
        let first_block = self
            .blocks
            .range(..=start)
            .next_back()
            .map(|(k, _)| *k)
            .unwrap_or(StreamId::MIN);
        let mut n = 0;
        let mut scratch = Scratch::default();
        let mut visit = |id: StreamId, pairs: &[&'s [u8]]| {
            f(id, pairs);
            n += 1;
            count == 0 || n < count
        };
        if rev {
            for (base, b) in self.blocks.range(first_block..=end).rev() {
                if !b.visit_rev(*base, start, end, &mut scratch, &mut visit) {
                    break;
                }
            }
        } else {
            for (base, b) in self.blocks.range(first_block..=end) {
                if !b.visit_fwd(*base, start, end, &mut scratch, &mut visit) {
                    break;
                }
            }
        }
        n
    }

    /// The ID of the last live entry, without copying the entry out.
    pub fn last_live_id(&self) -> Option<StreamId> {
        let mut last = None;
        self.range_each(StreamId::MIN, StreamId::MAX, 1, true, |id, _| {
            last = Some(id)
        });
        last
    }

    /// The first or last live entry.
    pub fn edge(&self, last: bool) -> Option<Entry> {
        if last {
            self.range(StreamId::MIN, StreamId::MAX, 1, true).pop()
        } else {
            self.range(StreamId::MIN, StreamId::MAX, 1, false).pop()
        }
    }

    /// Marks the entry `id` deleted; returns whether it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((base, _)) = self.block_of(id) else {
            return false;
        };
        let b = self.blocks.get_mut(&base).expect("block");
        let Some(s) = b
            .slots(base)
            .into_iter()
            .find(|s| s.id == id && s.flags & FLAG_DELETED == 0)
        else {
            return false;
        };
        b.mark_deleted(&s);
        if b.live == 0 {
            self.blocks.remove(&base);
        }
        self.len -= 1;
        if id > self.max_deleted {
            self.max_deleted = id;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.first_id = self.edge(false).map(|e| e.id).unwrap_or_default();
        }
        true
    }

    /// Trims as XADD/XTRIM do; `limit` (0 = none) caps the entries removed, and
    /// approximate trims remove whole blocks only. Returns the number removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(n) = how {
                if self.len <= n {
                    break;
                }
            }
            let Some((&base, b)) = self.blocks.iter().next() else {
                break;
            };
            let entries = b.live as u64;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove = match how {
                Trim::MaxLen(n) => self.len - entries >= n,
                Trim::MinId(min) => {
                    let last = b.slots(base).last().map(|s| s.id).unwrap_or(base);
                    last < min
                }
            };
            if remove {
                self.blocks.remove(&base);
                self.len -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let b = self.blocks.get_mut(&base).expect("block");
            for s in b.slots(base) {
                if s.flags & FLAG_DELETED != 0 {
                    continue;
                }
                let stop = match how {
                    Trim::MaxLen(n) => self.len <= n,
                    Trim::MinId(min) => s.id >= min,
                };
                if stop {
                    break;
                }
                b.mark_deleted(&s);
                self.len -= 1;
                deleted += 1;
            }
            if b.live == 0 {
                self.blocks.remove(&base);
            }
            break;
        }
        if deleted > 0 {
            self.first_id = self.edge(false).map(|e| e.id).unwrap_or_default();
        }
        deleted
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry: the logical read counter of
    /// `id`, or `ENTRIES_READ_INVALID` when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.len == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return added - self.len as i64;
            }
            if id == self.first_id {
                return added - self.len as i64 + 1;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// Redis's streamRangeHasTombstones for `start..=MAX`.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// The lag of a group (XINFO GROUPS), `None` when unknown.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.has_tombstones_from(g.last_id) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        if read != ENTRIES_READ_INVALID {
            Some(self.entries_added as i64 - read)
        } else {
            None
        }
    }

    /// Moves a group's last-delivered ID forward to `id` (delivery with `>`),
    /// keeping its read counter as Redis does.
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let tomb = self.has_tombstones_from(id);
        let est = self.estimate_distance(id);
        let added = self.entries_added;
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        if id > g.last_id {
            if g.entries_read != ENTRIES_READ_INVALID && !tomb {
                g.entries_read += 1;
            } else if added != 0 {
                g.entries_read = est;
            }
            g.last_id = id;
        }
    }

    // ----- persistence (RDB) ------------------------------------------------------

    /// The blocks in ID order, as the RDB writer walks them (Redis's rax nodes).
    pub fn nodes(&self) -> impl Iterator<Item = NodeRef<'_>> {
        self.blocks.iter().map(|(k, b)| NodeRef {
            master: *k,
            block: b,
        })
    }

    /// Adds a node read from a file. The caller has checked that `master` and every
    /// entry ID exceed all IDs already loaded and that IDs ascend; entries are
    /// `(id, deleted, flattened field/value pairs)`. A node without live entries is
    /// dropped, as Redis drops such nodes. Metadata is set by `set_loaded_meta`.
    pub fn push_loaded_node(
        &mut self,
        master: StreamId,
        master_fields: &[&[u8]],
        entries: &[(StreamId, bool, Vec<&[u8]>)],
    ) {
        debug_assert!(entries.iter().all(|e| e.0 >= master));
        if entries.iter().all(|e| e.1) {
            return;
        }
        let mut b = Block::new(master_fields);
        for (id, deleted, pairs) in entries {
            b.append_loaded(master, *id, pairs, *deleted);
        }
        b.seal();
        self.len += b.live as u64;
        self.blocks.insert(master, b);
    }

    /// Live entries held by the loaded nodes (checked against the file's length).
    pub fn loaded_len(&self) -> u64 {
        self.len
    }

    /// Sets the metadata read from a file.
    pub fn set_loaded_meta(
        &mut self,
        last_id: StreamId,
        first_id: StreamId,
        max_deleted: StreamId,
        entries_added: u64,
    ) {
        self.last_id = last_id;
        self.first_id = first_id;
        self.max_deleted = max_deleted;
        self.entries_added = entries_added;
    }

    /// Total size in bytes of the entry blocks (for tests and measurements).
    pub fn block_bytes(&self) -> usize {
        self.blocks.values().map(|b| b.data.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn append_range_delete() {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            let pairs: Vec<&[u8]> = if i % 3 == 0 {
                vec![b"other", v.as_bytes()]
            } else {
                vec![b"f", v.as_bytes(), b"g", b"x"]
            };
            s.append(id(i, 0), &pairs, 4096, 100);
        }
        assert_eq!(s.len(), 250);
        assert_eq!(s.block_count(), 3);
        let r = s.range(id(10, 0), id(12, 0), 0, false);
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[1].fields,
            vec![b"f".to_vec(), b"11".to_vec(), b"g".to_vec(), b"x".to_vec()]
        );
        assert_eq!(r[2].fields, vec![b"other".to_vec(), b"12".to_vec()]);
        let r = s.range(StreamId::MIN, StreamId::MAX, 2, true);
        assert_eq!(r[0].id, id(250, 0));
        assert!(s.delete(id(1, 0)));
        assert!(!s.delete(id(1, 0)));
        assert_eq!(s.first_id, id(2, 0));
        assert_eq!(s.max_deleted, id(1, 0));
        assert_eq!(s.trim(Trim::MaxLen(100), true, 0), 99);
        assert_eq!(s.len(), 150);
        assert_eq!(s.trim(Trim::MaxLen(100), false, 0), 50);
        assert_eq!(s.first_id, id(151, 0));
    }

    #[test]
    fn id_parse() {
        assert_eq!(StreamId::parse(b"5", 0, false), Some((id(5, 0), false)));
        assert_eq!(StreamId::parse(b"5-7", 0, false), Some((id(5, 7), false)));
        assert_eq!(StreamId::parse(b"5-*", 0, true), Some((id(5, 0), true)));
        assert_eq!(StreamId::parse(b"5-*", 0, false), None);
        assert_eq!(StreamId::parse(b"-1", 0, false), None);
        assert_eq!(StreamId::parse(b"18446744073709551616", 0, false), None);
        assert_eq!(
            StreamId::parse(b"18446744073709551615", u64::MAX, false),
            Some((StreamId::MAX, false))
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, u8),
        Del(usize),
        TrimLen(u64, bool),
        TrimMin(usize, bool),
        Range(usize, usize, usize, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1u8..4, 0u8..3).prop_map(|(g, f)| Op::Add(g, f)),
            2 => (0usize..400).prop_map(Op::Del),
            1 => (0u64..120, any::<bool>()).prop_map(|(n, a)| Op::TrimLen(n, a)),
            1 => (0usize..400, any::<bool>()).prop_map(|(n, a)| Op::TrimMin(n, a)),
            2 => (0usize..400, 0usize..400, 0usize..5, any::<bool>())
                .prop_map(|(a, b, c, r)| Op::Range(a, b, c, r)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreemap_model(ops in proptest::collection::vec(op(), 1..300)) {
            let mut s = Stream::new();
            let mut model: BTreeMap<StreamId, Vec<Vec<u8>>> = BTreeMap::new();
            let mut next = 1u64;
            for o in ops {
                match o {
                    Op::Add(gap, shape) => {
                        let i = id(next, (gap as u64) * 7);
                        next += gap as u64;
                        let v = next.to_string().into_bytes();
                        let fields: Vec<Vec<u8>> = match shape {
                            0 => vec![b"a".to_vec(), v.clone()],
                            1 => vec![b"a".to_vec(), v.clone(), b"b".to_vec(), b"".to_vec()],
                            _ => vec![b"zz".to_vec(), v.repeat(30)],
                        };
                        let pairs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
                        s.append(i, &pairs, 300, 7);
                        model.insert(i, fields);
                    }
                    Op::Del(k) => {
                        let target = model.keys().nth(k % (model.len() + 1)).copied();
                        match target {
                            Some(t) => {
                                prop_assert!(s.delete(t));
                                model.remove(&t);
                            }
                            None => prop_assert!(!s.delete(id(k as u64, 3))),
                        }
                    }
                    Op::TrimLen(n, approx) => {
                        let before = model.len() as u64;
                        let removed = s.trim(Trim::MaxLen(n), approx, 0);
                        prop_assert_eq!(s.len(), before - removed);
                        if !approx {
                            prop_assert_eq!(s.len(), before.min(n));
                        } else {
                            prop_assert!(s.len() >= before.min(n));
                        }
                        // Trims remove from the head.
                        while model.len() as u64 > s.len() {
                            model.pop_first();
                        }
                    }
                    Op::TrimMin(k, approx) => {
                        let min = id(k as u64, 0);
                        let removed = s.trim(Trim::MinId(min), approx, 0);
                        let before = model.len() as u64;
                        prop_assert!(model.keys().take(removed as usize).all(|f| *f < min));
                        for _ in 0..removed {
                            model.pop_first();
                        }
                        prop_assert_eq!(s.len(), before - removed);
                        if !approx {
                            prop_assert!(model.keys().next().is_none_or(|f| *f >= min));
                        }
                    }
                    Op::Range(a, b, c, rev) => {
                        let (lo, hi) = (id(a as u64, 0), id(b as u64, 99));
                        let got = s.range(lo, hi, c, rev);
                        let mut want: Vec<Entry> = model
                            .range(lo..=hi.max(lo))
                            .filter(|_| lo <= hi)
                            .map(|(k, v)| Entry { id: *k, fields: v.clone() })
                            .collect();
                        if rev {
                            want.reverse();
                        }
                        if c != 0 {
                            want.truncate(c);
                        }
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(s.len(), model.len() as u64);
                prop_assert_eq!(s.first_id, model.keys().next().copied().unwrap_or_default());
                prop_assert_eq!(s.edge(true).map(|e| e.id), model.keys().next_back().copied());
                prop_assert_eq!(s.last_live_id(), model.keys().next_back().copied());
            }
        }
    }
}
