//! The list type: a chunked deque of compact nodes, modelled on Redis's quicklist of
//! listpacks.
//!
//! Each node is one contiguous byte buffer of entries in listpack's entry format
//! (an encoding header, the data, then a "backlen" so the buffer can be walked from
//! either end), holding integers that are the canonical form of an i64 in 1–9 bytes
//! and strings with a 1, 2 or 5 byte length prefix. Node buffers are sized exactly
//! (no spare capacity), so memory stays close to the bytes stored. The entry format
//! and the size accounting are the same as Redis's, so that the thresholds of
//! `list-max-listpack-size` (node limits, and the switch between the `listpack` and
//! `quicklist` encodings with its hysteresis) trigger on the same inputs as in Redis.
//!
//! A small list is a single node and reports `listpack`; once an addition would make
//! that node exceed the limit the list becomes a `quicklist` whose nodes each respect
//! the limit, and it goes back to `listpack` when it shrinks to one node at most half
//! the limit. Elements larger than a node's limit get a node of their own ("plain").
//!
//! Nodes sit in a small vector (inline when there is one): pushing and popping at
//! either end touch one node (O(1) in the list's length, O(node) memmove within the
//! node, as Redis), and positional operations walk node counts, then entries of one
//! node from its nearer end.
//!
//! With `list-compress-depth` N > 0, every node more than N nodes from both ends is
//! kept LZF-compressed where that pays (`node.rs`), as Redis does: reads decompress a
//! copy, changes decompress the node in place, and `settle` restores the layout after
//! a change that touched or moved nodes. Pushes and pops that stay within the end
//! nodes never look at compression.

mod node;

use std::sync::atomic::{AtomicUsize, Ordering};

use node::{decode, int_of, offset_of, prev_start, Node};
#[cfg(test)]
use node::{encode_entry, entry_size};
use smallvec::SmallVec;

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl End {
    pub fn other(self) -> End {
        match self {
            End::Head => End::Tail,
            End::Tail => End::Head,
        }
    }
}

/// One element as stored: a string, or an integer kept in binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// The element's bytes (an integer rendered in decimal).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.append_to(&mut v);
        v
    }

    pub fn append_to(&self, out: &mut Vec<u8>) {
        match *self {
            Elem::Str(s) => out.extend_from_slice(s),
            Elem::Int(n) => crate::util::numeric::format_i64(n, out),
        }
    }

    /// Whether the element equals `b` byte for byte.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match *self {
            Elem::Str(s) => s == b,
            Elem::Int(n) => b.len() <= 20 && int_of(b) == Some(n),
        }
    }
}

// ----- node limits (list-max-listpack-size) -----------------------------------------

/// Node byte limits for fill -1..-5.
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// With a count limit (positive fill), nodes are still kept under this many bytes.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Added to an element's length to estimate its encoded size, as Redis does.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// A listpack's header (total bytes + count) and end marker, counted in node sizes.
const LP_OVERHEAD: usize = 7;

/// (byte limit, count limit) for a fill value.
fn node_limit(fill: i64) -> (usize, usize) {
    if fill >= 0 {
        (usize::MAX, if fill == 0 { 1 } else { fill as usize })
    } else {
        let off = ((-fill - 1) as usize).min(OPTIMIZATION_LEVEL.len() - 1);
        (OPTIMIZATION_LEVEL[off], usize::MAX)
    }
}

fn exceeds_limit(fill: i64, new_sz: usize, new_count: usize) -> bool {
    let (sz_limit, count_limit) = node_limit(fill);
    if sz_limit != usize::MAX {
        new_sz > sz_limit
    } else {
        new_sz > SIZE_SAFETY_LIMIT || new_count > count_limit
    }
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD: when not 0, elements of at least this many
/// bytes get a plain node whatever the fill (a test hook, process-wide as in Redis).
static PACKED_THRESHOLD: AtomicUsize = AtomicUsize::new(0);

/// Sets the plain-node threshold (0 restores the fill-based rule). Values from 4 GiB
/// less 1 MiB up are refused, as Redis does.
pub fn set_packed_threshold(sz: u64) -> bool {
    if sz > (1u64 << 32) - (1 << 20) {
        return false;
    }
    PACKED_THRESHOLD.store(sz as usize, Ordering::Relaxed);
    true
}

/// Elements this large get a node of their own.
fn is_large(sz: usize, fill: i64) -> bool {
    let threshold = PACKED_THRESHOLD.load(Ordering::Relaxed);
    if threshold != 0 {
        return sz >= threshold;
    }
    if fill >= 0 {
        sz > SIZE_SAFETY_LIMIT
    } else {
        sz > node_limit(fill).0
    }
}

// ----- the list ---------------------------------------------------------------------

/// The settings a list change follows: `list-max-listpack-size` (`fill`) and
/// `list-compress-depth` (`depth`: how many nodes at each end stay uncompressed; 0
/// compresses nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packing {
    pub fill: i64,
    pub depth: usize,
}

impl Packing {
    /// Node limits only, no compression.
    pub const fn fill(fill: i64) -> Packing {
        Packing { fill, depth: 0 }
    }
}

/// A list of byte strings.
#[derive(Debug, Clone, Default)]
pub struct List {
    nodes: SmallVec<[Node; 1]>,
    /// The element count, and in the top bit (`QUICK`) whether the list is in
    /// `quicklist` encoding (node limits apply) rather than a single `listpack`: one
    /// word for both keeps `List`, and so every collection's `Object`, smaller.
    meta: usize,
}

const QUICK: usize = 1 << (usize::BITS - 1);

/// A position: node index and byte offset of an entry in it.
#[derive(Debug, Clone, Copy)]
struct Pos {
    node: usize,
    off: usize,
}

/// One node as RDB writes it (`List::for_each_node`).
pub enum NodeImage<'a> {
    /// A node's bytes as Redis holds them (a listpack, or a plain node's element).
    Raw { plain: bool, bytes: &'a [u8] },
    /// A compressed node: its LZF bytes and their uncompressed length.
    Lzf {
        plain: bool,
        data: &'a [u8],
        len: usize,
    },
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    pub fn len(&self) -> usize {
        self.meta & !QUICK
    }

    #[inline]
    fn is_quick(&self) -> bool {
        self.meta & QUICK != 0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        if self.is_quick() {
            "quicklist"
        } else {
            "listpack"
        }
    }

    /// Heap bytes owned by the list (node buffers, compressed ones at their compressed
    /// size, and the node array if spilled).
    pub fn heap_size(&self) -> usize {
        let bufs: usize = self.nodes.iter().map(|n| n.heap_len()).sum();
        let arr = if self.nodes.spilled() {
            self.nodes.capacity() * std::mem::size_of::<Node>()
        } else {
            0
        };
        bufs + arr
    }

    /// Number of nodes (for tests and DEBUG).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of compressed nodes (for tests).
    pub fn compressed_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_compressed()).count()
    }

    /// The nodes' sizes before compression, as Redis counts them (DEBUG OBJECT's
    /// `ql_uncompressed_size`).
    pub fn uncompressed_size(&self) -> usize {
        self.nodes.iter().map(|n| n.redis_sz()).sum()
    }

    /// Calls `f` with each node as Redis stores it, head to tail (RDB).
    pub fn for_each_node(&self, mut f: impl FnMut(NodeImage<'_>)) {
        self.for_each_node_in(0, self.nodes.len(), |n, _| f(n));
    }

    /// As `for_each_node` for nodes `start..end`, with each node's element count.
    pub fn for_each_node_in(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(NodeImage<'_>, usize),
    ) {
        let end = end.min(self.nodes.len());
        for n in self.nodes[start.min(end)..end].iter() {
            let count = n.count as usize;
            match n.lzf_blob() {
                Some((data, len)) => f(
                    NodeImage::Lzf {
                        plain: n.plain,
                        data,
                        len,
                    },
                    count,
                ),
                None => f(
                    NodeImage::Raw {
                        plain: n.plain,
                        bytes: &n.redis_bytes(),
                    },
                    count,
                ),
            }
        }
    }

    /// Converts a single listpack to a quicklist if adding `add_bytes` raw bytes in
    /// `add_count` elements would take it over the node limit.
    fn grow_check(&mut self, add_bytes: usize, add_count: usize, fill: i64) {
        if self.is_quick() {
            return;
        }
        let (sz, count) = match self.nodes.first() {
            Some(n) => (n.sz(), n.count as usize),
            None => (LP_OVERHEAD, 0),
        };
        if exceeds_limit(fill, sz + add_bytes, count + add_count) {
            self.meta |= QUICK;
            if self.is_empty() {
                self.nodes.clear();
            }
        }
    }

    /// Goes back to one listpack when one node at most half the limit remains.
    fn shrink_check(&mut self, fill: i64) {
        if !self.is_quick() || self.nodes.len() > 1 {
            return;
        }
        let len = self.len();
        let Some(n) = self.nodes.first_mut() else {
            return;
        };
        if n.plain {
            return;
        }
        let (sz_limit, count_limit) = node_limit(fill);
        if n.sz() > sz_limit / 2 || len > count_limit / 2 {
            return;
        }
        // A listpack is never compressed.
        n.make_raw();
        self.meta &= !QUICK;
    }

    /// Restores the compression layout after nodes `lo..hi` changed, as Redis's
    /// __quicklistCompress: the `depth` nodes at each end uncompressed, the first
    /// node past them on each side and the changed interior nodes compressed.
    fn settle(&mut self, lo: usize, hi: usize, depth: usize) {
        if depth == 0 || !self.is_quick() {
            return;
        }
        let n = self.nodes.len();
        for k in 0..depth.min(n) {
            self.nodes[k].make_raw();
        }
        for k in n.saturating_sub(depth)..n {
            self.nodes[k].make_raw();
        }
        if n <= 2 * depth {
            return;
        }
        self.nodes[depth].compress();
        self.nodes[n - 1 - depth].compress();
        for k in lo.max(depth + 1)..hi.min(n - 1 - depth) {
            self.nodes[k].compress();
        }
    }

    /// Settles all nodes (after loading or a wholesale change).
    fn settle_all(&mut self, depth: usize) {
        self.settle(0, self.nodes.len(), depth);
    }

    /// Whether a quicklist node may take one more element of `sz` raw bytes.
    fn allow_insert(node: &Node, fill: i64, sz: usize) -> bool {
        if node.plain || is_large(sz, fill) {
            return false;
        }
        !exceeds_limit(
            fill,
            node.sz() + sz + SIZE_ESTIMATE_OVERHEAD,
            node.count as usize + 1,
        )
    }

    /// Pushes `items` one by one at `end` (LPUSH a b c leaves c at the head).
    pub fn push(&mut self, end: End, items: &[&[u8]], pk: Packing) {
        let bytes: usize = items.iter().map(|i| i.len()).sum();
        self.grow_check(bytes, items.len(), pk.fill);
        let mut new_nodes = 0;
        if end == End::Tail {
            // Runs of elements bound for the tail node go in with one reallocation
            // (RPUSH of many elements, loading a list); the nodes come out as if
            // pushed one by one.
            let mut i = 0;
            while i < items.len() {
                let run = self.tail_run(&items[i..], pk.fill);
                if run > 0 {
                    let n = self.nodes.last_mut().expect("a tail node");
                    n.make_raw();
                    n.append_all(&items[i..i + run]);
                    self.meta += run;
                    i += run;
                } else {
                    new_nodes += self.push_one(end, items[i], pk.fill) as usize;
                    i += 1;
                }
            }
        } else {
            for v in items {
                new_nodes += self.push_one(end, v, pk.fill) as usize;
            }
        }
        if new_nodes > 0 && pk.depth > 0 {
            // The new nodes sit at `end`; the node next to them may now be interior.
            let n = self.nodes.len();
            let (lo, hi) = match end {
                End::Head => (0, new_nodes + 1),
                End::Tail => (n.saturating_sub(new_nodes + 1), n),
            };
            self.settle(lo, hi, pk.depth);
        }
    }

    /// How many of `items` `push_one` would put, one after the other, into the
    /// current tail node.
    fn tail_run(&self, items: &[&[u8]], fill: i64) -> usize {
        let Some(n) = self.nodes.last() else {
            return 0;
        };
        if !self.is_quick() {
            return items.len();
        }
        let (mut sz, mut count) = (n.sz(), n.count as usize);
        let mut run = 0;
        for v in items {
            if n.plain
                || is_large(v.len(), fill)
                || exceeds_limit(fill, sz + v.len() + SIZE_ESTIMATE_OVERHEAD, count + 1)
            {
                break;
            }
            sz += node::entry_size(v);
            count += 1;
            run += 1;
        }
        run
    }

    /// Pushes one element; true when it took a new node.
    fn push_one(&mut self, end: End, v: &[u8], fill: i64) -> bool {
        self.meta += 1;
        if !self.is_quick() {
            if self.nodes.is_empty() {
                self.nodes.push(Node::default());
            }
            let n = &mut self.nodes[0];
            n.make_raw();
            let at = if end == End::Head { 0 } else { n.buf().len() };
            n.insert_at(at, v);
            return false;
        }
        if is_large(v.len(), fill) {
            let node = Node::from_elem(v, true);
            match end {
                End::Head => self.nodes.insert(0, node),
                End::Tail => self.nodes.push(node),
            }
            return true;
        }
        let idx = match end {
            End::Head => 0,
            End::Tail => self.nodes.len().wrapping_sub(1),
        };
        match self.nodes.get_mut(idx) {
            Some(n) if Self::allow_insert(n, fill, v.len()) => {
                n.make_raw();
                let at = if end == End::Head { 0 } else { n.buf().len() };
                n.insert_at(at, v);
                false
            }
            _ => {
                let node = Node::from_elem(v, false);
                match end {
                    End::Head => self.nodes.insert(0, node),
                    End::Tail => self.nodes.push(node),
                }
                true
            }
        }
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End, pk: Packing) -> Option<Vec<u8>> {
        self.pop_with(end, pk, |e| e.to_vec())
    }

    /// Removes the element at `end`, handing it to `take` before its bytes go (a
    /// reply made from them needs no copy of its own in between).
    pub fn pop_with<R>(
        &mut self,
        end: End,
        pk: Packing,
        take: impl FnOnce(Elem<'_>) -> R,
    ) -> Option<R> {
        if self.is_empty() {
            return None;
        }
        let idx = match end {
            End::Head => 0,
            End::Tail => self.nodes.len() - 1,
        };
        let n = &mut self.nodes[idx];
        n.make_raw();
        let buf = n.buf();
        let (from, v) = match end {
            End::Head => {
                let (e, sz) = decode(buf, 0);
                (0..sz, take(e))
            }
            End::Tail => {
                let s = prev_start(buf, buf.len());
                (s..buf.len(), take(decode(buf, s).0))
            }
        };
        n.remove_bytes(from.start, from.end, 1);
        let emptied = n.count == 0;
        if emptied {
            self.nodes.remove(idx);
        }
        self.meta -= 1;
        self.shrink_check(pk.fill);
        if emptied {
            self.settle(0, 0, pk.depth);
        }
        Some(v)
    }

    /// Normalizes a possibly negative index; `None` when out of range.
    pub fn index(&self, i: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if i < 0 { len + i } else { i };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Finds the node holding index `i` (< len) and the index within it: walks node
    /// counts from the nearer end.
    fn locate_node(&self, i: usize) -> (usize, usize) {
        if i < self.len() / 2 {
            let mut acc = 0;
            let mut k = 0;
            loop {
                let c = self.nodes[k].count as usize;
                if i < acc + c {
                    return (k, i - acc);
                }
                acc += c;
                k += 1;
            }
        } else {
            let mut acc = self.len();
            let mut k = self.nodes.len() - 1;
            loop {
                let c = self.nodes[k].count as usize;
                if i >= acc - c {
                    return (k, i - (acc - c));
                }
                acc -= c;
                k -= 1;
            }
        }
    }

    /// Finds the entry at index `i` (< len), decompressing its node for a change.
    fn locate_mut(&mut self, i: usize) -> Pos {
        let (node, within) = self.locate_node(i);
        let n = &mut self.nodes[node];
        n.make_raw();
        Pos {
            node,
            off: offset_of(n.buf(), n.count as usize, within),
        }
    }

    /// Calls `f` with the element at index `i` (negative counts from the tail).
    pub fn get<R>(&self, i: i64, f: impl FnOnce(Elem<'_>) -> R) -> Option<R> {
        let i = self.index(i)?;
        let (node, within) = self.locate_node(i);
        let n = &self.nodes[node];
        let buf = n.entries();
        let off = offset_of(&buf, n.count as usize, within);
        Some(f(decode(&buf, off).0))
    }

    /// Calls `f` for `count` elements from index `start` (< len) towards the tail.
    pub fn range(&self, start: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        if count == 0 || start >= self.len() {
            return;
        }
        let (mut node, within) = self.locate_node(start);
        let mut left = count;
        let mut first = Some(within);
        while left > 0 && node < self.nodes.len() {
            let n = &self.nodes[node];
            let buf = n.entries();
            let mut p = match first.take() {
                Some(w) => offset_of(&buf, n.count as usize, w),
                None => 0,
            };
            while left > 0 && p < buf.len() {
                let (e, sz) = decode(&buf, p);
                f(e);
                p += sz;
                left -= 1;
            }
            node += 1;
        }
    }

    /// Calls `f` for `count` elements from index `start` (< len) towards the head.
    pub fn range_rev(&self, start: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        if count == 0 || start >= self.len() {
            return;
        }
        let (node, within) = self.locate_node(start);
        let mut left = count;
        let mut first = Some(within);
        for n in self.nodes[..=node].iter().rev() {
            let buf = n.entries();
            let mut end = match first.take() {
                Some(w) => {
                    let off = offset_of(&buf, n.count as usize, w);
                    off + decode(&buf, off).1
                }
                None => buf.len(),
            };
            while left > 0 && end > 0 {
                let s = prev_start(&buf, end);
                f(decode(&buf, s).0);
                end = s;
                left -= 1;
            }
            if left == 0 {
                return;
            }
        }
    }

    /// Iterates all elements head to tail, stopping when `f` returns false.
    pub fn for_each(&self, mut f: impl FnMut(Elem<'_>) -> bool) {
        for n in &self.nodes {
            let buf = n.entries();
            let mut p = 0;
            while p < buf.len() {
                let (e, sz) = decode(&buf, p);
                if !f(e) {
                    return;
                }
                p += sz;
            }
        }
    }

    /// Iterates all elements tail to head, stopping when `f` returns false.
    pub fn for_each_rev(&self, mut f: impl FnMut(Elem<'_>) -> bool) {
        for n in self.nodes.iter().rev() {
            let buf = n.entries();
            let mut end = buf.len();
            while end > 0 {
                let s = prev_start(&buf, end);
                if !f(decode(&buf, s).0) {
                    return;
                }
                end = s;
            }
        }
    }

    /// Inserts `v` so that it becomes the element at position `p` (before the entry
    /// at `p`), or after it when `after`. The node at `p` is uncompressed. Returns the
    /// range of nodes changed.
    fn insert_at(&mut self, p: Pos, after: bool, v: &[u8], fill: i64) -> (usize, usize) {
        self.meta += 1;
        let node = &self.nodes[p.node];
        let at = if after {
            p.off + decode(node.buf(), p.off).1
        } else {
            p.off
        };
        let changed = (p.node.saturating_sub(1), p.node + 3);
        if !self.is_quick() {
            self.nodes[0].insert_at(at, v);
            return changed;
        }
        let at_tail = at == node.buf().len();
        let at_head = at == 0;
        let large = is_large(v.len(), fill);
        if !large && Self::allow_insert(node, fill, v.len()) {
            self.nodes[p.node].insert_at(at, v);
            return changed;
        }
        if !large && at_tail {
            if let Some(next) = self.nodes.get_mut(p.node + 1) {
                if Self::allow_insert(next, fill, v.len()) {
                    next.make_raw();
                    next.insert_at(0, v);
                    return changed;
                }
            }
        }
        if !large && at_head && p.node > 0 {
            let prev = &mut self.nodes[p.node - 1];
            if Self::allow_insert(prev, fill, v.len()) {
                prev.make_raw();
                let end = prev.buf().len();
                prev.insert_at(end, v);
                return changed;
            }
        }
        let new = Node::from_elem(v, large);
        if at_tail {
            self.nodes.insert(p.node + 1, new);
        } else if at_head {
            self.nodes.insert(p.node, new);
        } else {
            // Split the full node at the insertion point and put the element between.
            let mut idx = 0;
            let mut q = 0;
            while q < at {
                q += decode(self.nodes[p.node].buf(), q).1;
                idx += 1;
            }
            let tail = self.nodes[p.node].split_off(at, idx);
            if large {
                self.nodes.insert(p.node + 1, new);
                self.nodes.insert(p.node + 2, tail);
            } else {
                // The element joins the smaller half when it fits there.
                self.nodes.insert(p.node + 1, tail);
                let (left_ok, right_ok) = (
                    Self::allow_insert(&self.nodes[p.node], fill, v.len()),
                    Self::allow_insert(&self.nodes[p.node + 1], fill, v.len()),
                );
                if left_ok && self.nodes[p.node].count <= self.nodes[p.node + 1].count {
                    let n = &mut self.nodes[p.node];
                    let end = n.buf().len();
                    n.insert_at(end, v);
                } else if right_ok {
                    self.nodes[p.node + 1].insert_at(0, v);
                } else if left_ok {
                    let n = &mut self.nodes[p.node];
                    let end = n.buf().len();
                    n.insert_at(end, v);
                } else {
                    self.nodes.insert(p.node + 1, new);
                }
            }
        }
        changed
    }

    /// LINSERT: inserts `v` before or after the first element equal to `pivot`.
    /// Returns false when the pivot is not found.
    pub fn insert(&mut self, pivot: &[u8], after: bool, v: &[u8], pk: Packing) -> bool {
        // As Redis, the encoding may change even when the pivot is then not found.
        self.grow_check(v.len(), 1, pk.fill);
        let mut found = None;
        'outer: for (k, n) in self.nodes.iter().enumerate() {
            let buf = n.entries();
            let mut off = 0;
            while off < buf.len() {
                let (e, sz) = decode(&buf, off);
                if e.eq_bytes(pivot) {
                    found = Some(Pos { node: k, off });
                    break 'outer;
                }
                off += sz;
            }
        }
        let Some(p) = found else { return false };
        self.nodes[p.node].make_raw();
        let (lo, hi) = self.insert_at(p, after, v, pk.fill);
        self.settle(lo, hi, pk.depth);
        true
    }

    /// Removes the entry at `p` (its node uncompressed).
    fn remove_at(&mut self, p: Pos) {
        let n = &mut self.nodes[p.node];
        let sz = decode(n.buf(), p.off).1;
        n.remove_bytes(p.off, p.off + sz, 1);
        if n.count == 0 {
            self.nodes.remove(p.node);
        }
        self.meta -= 1;
    }

    /// LSET: replaces the element at index `i`. Returns false when out of range.
    pub fn set(&mut self, i: i64, v: &[u8], pk: Packing) -> bool {
        let Some(i) = self.index(i) else {
            return false;
        };
        let fill = pk.fill;
        self.grow_check(v.len(), 1, fill);
        let p = self.locate_mut(i);
        let node = &self.nodes[p.node];
        let old = decode(node.buf(), p.off).1;
        let fits = !self.is_quick()
            || (!node.plain
                && !is_large(v.len(), fill)
                && !exceeds_limit(
                    fill,
                    node.sz() - old + v.len() + SIZE_ESTIMATE_OVERHEAD,
                    node.count as usize,
                ));
        let (lo, hi) = if fits {
            let n = &mut self.nodes[p.node];
            n.remove_bytes(p.off, p.off + old, 1);
            n.insert_at(p.off, v);
            (p.node, p.node + 1)
        } else {
            self.remove_at(p);
            if i == self.len() {
                self.push_one(End::Tail, v, fill);
                (self.nodes.len().saturating_sub(2), self.nodes.len())
            } else {
                let q = self.locate_mut(i);
                self.insert_at(q, false, v, fill)
            }
        };
        self.shrink_check(fill);
        self.settle(lo, hi, pk.depth);
        true
    }

    /// Removes `count` elements from index `start`.
    pub fn delete_range(&mut self, start: usize, count: usize, pk: Packing) {
        let count = count.min(self.len().saturating_sub(start));
        if count == 0 {
            return;
        }
        let mut left = count;
        let (first, within) = self.locate_node(start);
        let mut p = Pos {
            node: first,
            off: 0,
        };
        let mut skip = within;
        while left > 0 {
            let n = &mut self.nodes[p.node];
            let whole = skip == 0 && left >= n.count as usize;
            if whole {
                left -= n.count as usize;
                self.nodes.remove(p.node);
                continue;
            }
            n.make_raw();
            let buf = n.buf();
            p.off = offset_of(buf, n.count as usize, skip);
            let mut end = p.off;
            let mut removed = 0u32;
            while end < buf.len() && left > 0 {
                end += decode(buf, end).1;
                removed += 1;
                left -= 1;
            }
            n.remove_bytes(p.off, end, removed);
            p.node += 1;
            skip = 0;
        }
        self.meta -= count;
        self.shrink_check(pk.fill);
        self.settle(first.saturating_sub(1), first + 2, pk.depth);
    }

    /// LTRIM: keeps only elements `start..=stop` (already normalized, may be empty).
    pub fn keep_range(&mut self, start: usize, stop: Option<usize>, pk: Packing) {
        match stop {
            Some(stop) if start <= stop && start < self.len() => {
                let stop = stop.min(self.len() - 1);
                let tail = self.len() - 1 - stop;
                self.delete_range(stop + 1, tail, pk);
                self.delete_range(0, start, pk);
            }
            _ => {
                self.nodes.clear();
                self.meta = 0;
            }
        }
    }

    /// Whether node `k` holds an element equal to `v`.
    fn node_has(&self, k: usize, v: &[u8]) -> bool {
        let buf = self.nodes[k].entries();
        let mut off = 0;
        while off < buf.len() {
            let (e, sz) = decode(&buf, off);
            if e.eq_bytes(v) {
                return true;
            }
            off += sz;
        }
        false
    }

    /// LREM: removes up to `count` elements equal to `v` (all when 0; from the tail
    /// when negative). Returns how many were removed.
    pub fn remove(&mut self, count: i64, v: &[u8], pk: Packing) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut removed = 0;
        // Nodes are searched without decompressing them in place; a node that has a
        // match is decompressed, changed, and compressed again.
        if count >= 0 {
            let mut k = 0;
            while k < self.nodes.len() && removed < limit {
                if !self.node_has(k, v) {
                    k += 1;
                    continue;
                }
                let n = &mut self.nodes[k];
                n.make_raw();
                let mut off = 0;
                while off < n.buf().len() && removed < limit {
                    let (e, sz) = decode(n.buf(), off);
                    if e.eq_bytes(v) {
                        n.remove_bytes(off, off + sz, 1);
                        removed += 1;
                    } else {
                        off += sz;
                    }
                }
                if self.nodes[k].count == 0 {
                    self.nodes.remove(k);
                } else {
                    self.recompress_interior(k, pk.depth);
                    k += 1;
                }
            }
        } else {
            let mut k = self.nodes.len();
            while k > 0 && removed < limit {
                k -= 1;
                if !self.node_has(k, v) {
                    continue;
                }
                let n = &mut self.nodes[k];
                n.make_raw();
                let mut end = n.buf().len();
                while end > 0 && removed < limit {
                    let s = prev_start(n.buf(), end);
                    if decode(n.buf(), s).0.eq_bytes(v) {
                        n.remove_bytes(s, end, 1);
                        removed += 1;
                    }
                    end = s;
                }
                if self.nodes[k].count == 0 {
                    self.nodes.remove(k);
                } else {
                    self.recompress_interior(k, pk.depth);
                }
            }
        }
        self.meta -= removed;
        if removed > 0 {
            self.shrink_check(pk.fill);
            self.settle(0, 0, pk.depth);
        }
        removed
    }

    /// Compresses node `k` again if it lies beyond `depth` nodes from both ends.
    fn recompress_interior(&mut self, k: usize, depth: usize) {
        let n = self.nodes.len();
        if depth > 0 && self.is_quick() && k >= depth && k + depth < n {
            self.nodes[k].compress();
        }
    }

    /// DEBUG QUICKLIST / DEBUG LISTPACK's printout: one line per node (entries too
    /// when `full`).
    pub fn repr(&self, full: bool) -> String {
        use std::fmt::Write;
        let mut out = format!(
            "{{list {} nodes {} count {}}}\n",
            self.encoding(),
            self.nodes.len(),
            self.len()
        );
        for (k, n) in self.nodes.iter().enumerate() {
            let _ = writeln!(
                out,
                "{{node {k} container {} encoding {} size {} count {} bytes {}}}",
                if n.plain { "PLAIN" } else { "PACKED" },
                if n.is_compressed() { "LZF" } else { "RAW" },
                n.redis_sz(),
                n.count,
                n.heap_len()
            );
            if full {
                let buf = n.entries();
                let mut p = 0;
                while p < buf.len() {
                    let (e, sz) = decode(&buf, p);
                    let _ = writeln!(out, "  {:?}", String::from_utf8_lossy(&e.to_vec()));
                    p += sz;
                }
            }
        }
        out
    }

    /// Applies `list-compress-depth` to a list built or loaded elsewhere.
    pub fn compress_to(&mut self, depth: usize) {
        self.settle_all(depth);
    }

    /// All elements, head to tail (tests, DUMP-like uses).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        let mut v = Vec::with_capacity(self.len());
        self.for_each(|e| {
            v.push(e.to_vec());
            true
        });
        v
    }

    /// Checks internal invariants (tests).
    pub fn check(&self, pk: Packing) {
        let fill = pk.fill;
        let mut total = 0;
        let nodes = self.nodes.len();
        for (k, n) in self.nodes.iter().enumerate() {
            assert!(n.count > 0, "empty node");
            if n.is_compressed() {
                assert!(self.is_quick(), "compressed listpack");
                if pk.depth > 0 {
                    assert!(
                        k >= pk.depth && k + pk.depth < nodes,
                        "node {k} of {nodes} compressed within depth {}",
                        pk.depth
                    );
                }
            }
            let buf = n.entries();
            let mut p = 0;
            let mut c = 0;
            while p < buf.len() {
                let (_, sz) = decode(&buf, p);
                p += sz;
                c += 1;
                assert_eq!(prev_start(&buf, p), p - sz);
            }
            assert_eq!(p, buf.len());
            assert_eq!(c, n.count);
            total += c as usize;
            if self.is_quick() && !n.plain && n.count > 1 {
                let (sz_limit, _) = node_limit(fill);
                if sz_limit != usize::MAX {
                    assert!(n.sz() <= sz_limit + SIZE_ESTIMATE_OVERHEAD * 2 + 4096);
                }
            }
        }
        assert_eq!(total, self.len());
        if !self.is_quick() {
            assert!(self.nodes.len() <= 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn entry_roundtrip() {
        let samples: Vec<Vec<u8>> = [
            "0",
            "1",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-4097",
            "32767",
            "-32768",
            "32768",
            "8388607",
            "-8388608",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "01",
            "+1",
            "-0",
            "",
            "a",
            "hello",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 5000],
        ])
        .collect();
        for s in &samples {
            let mut b = Vec::new();
            encode_entry(s, &mut b);
            assert_eq!(b.len(), entry_size(s));
            let (e, sz) = decode(&b, 0);
            assert_eq!(sz, b.len());
            assert_eq!(e.to_vec(), *s);
            assert!(e.eq_bytes(s));
            assert_eq!(prev_start(&b, b.len()), 0);
        }
        let mut b = Vec::new();
        encode_entry(b"-0", &mut b);
        assert!(matches!(decode(&b, 0).0, Elem::Str(_)));
        assert!(!Elem::Int(1).eq_bytes(b"01"));
    }

    #[test]
    fn encodings_switch_like_redis() {
        let mut l = List::new();
        let fill = Packing::fill(-2);
        for i in 0..100 {
            l.push(End::Tail, &[format!("{i}").as_bytes()], fill);
        }
        assert_eq!(l.encoding(), "listpack");
        let big = vec![b'a'; 9000];
        l.push(End::Tail, &[&big], fill);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Tail, fill);
        assert_eq!(l.encoding(), "listpack");
        // Count-limited fill.
        let four = Packing::fill(4);
        let mut l = List::new();
        for i in 0..5 {
            l.push(End::Head, &[format!("e{i}").as_bytes()], four);
        }
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.node_count(), 2);
        l.check(four);
        l.pop(End::Head, four);
        l.pop(End::Head, four);
        l.pop(End::Head, four);
        assert_eq!(l.encoding(), "listpack");
    }

    #[test]
    fn big_list_nodes_respect_limit() {
        let mut l = List::new();
        for i in 0..20000 {
            l.push(
                End::Tail,
                &[format!("element-{i}").as_bytes()],
                Packing::fill(-2),
            );
        }
        l.check(Packing::fill(-2));
        assert!(l.node_count() > 20);
        assert_eq!(l.get(12345, |e| e.to_vec()).unwrap(), b"element-12345");
        assert_eq!(l.get(-1, |e| e.to_vec()).unwrap(), b"element-19999");
        let mut got = Vec::new();
        l.range(9998, 4, |e| got.push(e.to_vec()));
        assert_eq!(got[0], b"element-9998");
        assert_eq!(got[3], b"element-10001");
    }

    #[test]
    fn interior_nodes_are_compressed() {
        let pk = Packing { fill: -2, depth: 1 };
        let mut l = List::new();
        let mut flat = List::new();
        for i in 0..20000 {
            let v = format!("element-{i}");
            l.push(End::Tail, &[v.as_bytes()], pk);
            flat.push(End::Tail, &[v.as_bytes()], Packing::fill(-2));
        }
        l.check(pk);
        assert!(l.node_count() > 10);
        assert_eq!(l.compressed_nodes(), l.node_count() - 2);
        assert!(l.heap_size() * 2 < flat.heap_size());
        assert_eq!(l.uncompressed_size(), flat.uncompressed_size());
        assert_eq!(l.to_vecs(), flat.to_vecs());
        assert_eq!(l.get(2500, |e| e.to_vec()).unwrap(), b"element-2500");
        // Deeper settings uncompress the nodes now within reach of the ends.
        l.push(End::Head, &[b"x"], Packing { fill: -2, depth: 3 });
        l.check(Packing { fill: -2, depth: 3 });
        // Popping everything walks every node out to an end.
        let mut n = 0;
        while let Some(v) = l.pop(if n % 2 == 0 { End::Head } else { End::Tail }, pk) {
            n += 1;
            let _ = v;
            if n % 997 == 0 {
                l.check(pk);
            }
        }
        assert_eq!(n, 20001);
    }

    #[test]
    fn plain_nodes_are_compressed_and_small_nodes_are_not() {
        let pk = Packing { fill: -2, depth: 1 };
        let mut l = List::new();
        for c in [b'a', b'b', b'c'] {
            l.push(End::Tail, &[&vec![c; 10000]], pk);
        }
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.compressed_nodes(), 1);
        assert_eq!(l.get(1, |e| e.to_vec()).unwrap(), vec![b'b'; 10000]);
        assert_eq!(l.uncompressed_size(), 30000);
        l.check(pk);
        // Nodes under 48 bytes stay as they are.
        let four = Packing { fill: 1, depth: 1 };
        let mut s = List::new();
        for i in 0..10 {
            s.push(End::Tail, &[format!("{i}").as_bytes()], four);
        }
        assert_eq!(s.node_count(), 10);
        assert_eq!(s.compressed_nodes(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Set(i64, Vec<u8>),
        Insert(u8, bool, Vec<u8>),
        Rem(i64, Vec<u8>),
        Trim(i64, i64),
        DelRange(usize, usize),
    }

    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0u16..40).prop_map(|n| n.to_string().into_bytes()),
            (-70000i64..70000).prop_map(|n| n.to_string().into_bytes()),
            proptest::collection::vec(b'a'..b'e', 0..12),
            (0usize..3000).prop_map(|n| vec![b'q'; n]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<bool>(), elem()).prop_map(|(h, v)| Op::Push(h, v)),
            2 => any::<bool>().prop_map(Op::Pop),
            1 => (-50i64..50, elem()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (any::<u8>(), any::<bool>(), elem()).prop_map(|(p, a, v)| Op::Insert(p, a, v)),
            1 => (-3i64..3, elem()).prop_map(|(c, v)| Op::Rem(c, v)),
            1 => (-60i64..60, -60i64..60).prop_map(|(a, b)| Op::Trim(a, b)),
            1 => (0usize..40, 0usize..40).prop_map(|(a, b)| Op::DelRange(a, b)),
        ]
    }

    fn norm(i: i64, len: usize) -> i64 {
        if i < 0 {
            len as i64 + i
        } else {
            i
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_vecdeque(
            fill in prop_oneof![Just(-1i64), Just(-2), Just(1), Just(3), Just(0)],
            depth in 0usize..3,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let fill = Packing { fill, depth };
            let mut l = List::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for o in ops {
                match o {
                    Op::Push(h, v) => {
                        if h { l.push(End::Head, &[&v], fill); m.push_front(v); }
                        else { l.push(End::Tail, &[&v], fill); m.push_back(v); }
                    }
                    Op::Pop(h) => {
                        let (a, b) = if h { (l.pop(End::Head, fill), m.pop_front()) }
                            else { (l.pop(End::Tail, fill), m.pop_back()) };
                        prop_assert_eq!(a, b);
                    }
                    Op::Set(i, v) => {
                        let n = norm(i, m.len());
                        let ok = l.set(i, &v, fill);
                        prop_assert_eq!(ok, n >= 0 && (n as usize) < m.len());
                        if ok { m[n as usize] = v; }
                    }
                    Op::Insert(p, after, v) => {
                        let pivot = if m.is_empty() { b"nope".to_vec() }
                            else { m[p as usize % m.len()].clone() };
                        let found = l.insert(&pivot, after, &v, fill);
                        match m.iter().position(|x| *x == pivot) {
                            Some(at) => { prop_assert!(found); m.insert(if after { at + 1 } else { at }, v); }
                            None => prop_assert!(!found),
                        }
                    }
                    Op::Rem(c, v) => {
                        let n = l.remove(c, &v, fill);
                        let limit = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                        let mut k = 0;
                        if c >= 0 {
                            let mut i = 0;
                            while i < m.len() && k < limit { if m[i] == v { m.remove(i); k += 1; } else { i += 1; } }
                        } else {
                            let mut i = m.len();
                            while i > 0 && k < limit { i -= 1; if m[i] == v { m.remove(i); k += 1; } }
                        }
                        prop_assert_eq!(n, k);
                    }
                    Op::Trim(a, b) => {
                        let len = m.len() as i64;
                        let s = norm(a, m.len()).max(0);
                        let e = norm(b, m.len());
                        if s > e || s >= len || e < 0 {
                            l.keep_range(0, None, fill);
                            m.clear();
                        } else {
                            let e = e.min(len - 1);
                            l.keep_range(s as usize, Some(e as usize), fill);
                            m = m.into_iter().skip(s as usize).take((e - s + 1) as usize).collect();
                        }
                    }
                    Op::DelRange(s, c) => {
                        l.delete_range(s, c, fill);
                        if s < m.len() {
                            let c = c.min(m.len() - s);
                            m.drain(s..s + c);
                        }
                    }
                }
                l.check(fill);
                prop_assert_eq!(l.len(), m.len());
            }
            let all: Vec<Vec<u8>> = m.iter().cloned().collect();
            prop_assert_eq!(l.to_vecs(), all.clone());
            for (i, want) in all.iter().enumerate() {
                prop_assert_eq!(&l.get(i as i64, |e| e.to_vec()).unwrap(), want);
            }
            let mut rev = Vec::new();
            l.for_each_rev(|e| { rev.push(e.to_vec()); true });
            rev.reverse();
            prop_assert_eq!(rev, all.clone());
            if !m.is_empty() {
                let s = m.len() / 3;
                let mut got = Vec::new();
                l.range_rev(m.len() - 1 - s, m.len() - s, |e| got.push(e.to_vec()));
                got.reverse();
                prop_assert_eq!(got, all[..m.len() - s].to_vec());
            }
        }
    }

    /// A node's image as bytes, for comparing layouts.
    fn layout(l: &List) -> Vec<(bool, Vec<u8>)> {
        let mut v = Vec::new();
        l.for_each_node(|n| match n {
            NodeImage::Raw { plain, bytes } => v.push((plain, bytes.to_vec())),
            NodeImage::Lzf { plain, data, .. } => v.push((plain, data.to_vec())),
        });
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// A batch pushed at the tail (RPUSH a b c, loading) leaves exactly the nodes
        /// that pushing its elements one at a time leaves (after the batch's
        /// conversion check, as Redis's RPUSH).
        #[test]
        fn a_tail_batch_packs_as_single_pushes(
            fill in prop_oneof![Just(-1i64), Just(-2), Just(1), Just(3), Just(0), Just(5)],
            depth in 0usize..3,
            before in proptest::collection::vec(elem(), 0..30),
            batch in proptest::collection::vec(elem(), 0..300),
        ) {
            let pk = Packing { fill, depth };
            let (mut a, mut b) = (List::new(), List::new());
            for v in &before {
                a.push(End::Tail, &[v], pk);
                b.push(End::Tail, &[v], pk);
            }
            let refs: Vec<&[u8]> = batch.iter().map(|v| v.as_slice()).collect();
            a.push(End::Tail, &refs, pk);
            // The element-at-a-time path, after the conversion check for the whole batch.
            let bytes: usize = refs.iter().map(|i| i.len()).sum();
            b.grow_check(bytes, refs.len(), pk.fill);
            let mut new_nodes = 0;
            for v in &refs {
                new_nodes += b.push_one(End::Tail, v, pk.fill) as usize;
            }
            if new_nodes > 0 && pk.depth > 0 {
                let n = b.nodes.len();
                b.settle(n.saturating_sub(new_nodes + 1), n, pk.depth);
            }
            prop_assert_eq!(a.len(), b.len());
            prop_assert_eq!(layout(&a), layout(&b));
            prop_assert_eq!(a.to_vecs(), before.iter().chain(&batch).cloned().collect::<Vec<_>>());
        }
    }
}
