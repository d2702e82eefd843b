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

/// Elements this large get a node of their own.
fn is_large(sz: usize, fill: i64) -> bool {
    if fill >= 0 {
        sz > SIZE_SAFETY_LIMIT
    } else {
        sz > node_limit(fill).0
    }
}

// ----- entry encoding ---------------------------------------------------------------

/// The integer a string canonically spells, if any (stored in binary then).
fn int_of(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    crate::util::numeric::parse_i64(v)
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Appends the header and data of `v` (without backlen).
fn encode_body(v: &[u8], out: &mut Vec<u8>) {
    if let Some(n) = int_of(v) {
        if (0..=127).contains(&n) {
            out.push(n as u8);
        } else if (-4096..=4095).contains(&n) {
            let u = (n as u16) & 0x1fff;
            out.push(0xC0 | (u >> 8) as u8);
            out.push(u as u8);
        } else if (i16::MIN as i64..=i16::MAX as i64).contains(&n) {
            out.push(0xF1);
            out.extend_from_slice(&(n as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&n) {
            out.push(0xF2);
            out.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&n) {
            out.push(0xF3);
            out.extend_from_slice(&(n as i32).to_le_bytes());
        } else {
            out.push(0xF4);
            out.extend_from_slice(&n.to_le_bytes());
        }
        return;
    }
    let len = v.len();
    if len < 64 {
        out.push(0x80 | len as u8);
    } else if len < 4096 {
        out.push(0xE0 | (len >> 8) as u8);
        out.push(len as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(v);
}

fn body_size(v: &[u8]) -> usize {
    if let Some(n) = int_of(v) {
        return match n {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8388608..=8388607 => 4,
            -2147483648..=2147483647 => 5,
            _ => 9,
        };
    }
    let len = v.len();
    len + if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    }
}

/// The whole encoded size of an entry holding `v`.
fn entry_size(v: &[u8]) -> usize {
    let b = body_size(v);
    b + backlen_size(b)
}

/// Appends a complete entry (header, data, backlen).
fn encode_entry(v: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    encode_body(v, out);
    let l = out.len() - start;
    let n = backlen_size(l);
    out.push((l >> (7 * (n - 1))) as u8 & 127);
    for i in 1..n {
        out.push(((l >> (7 * (n - 1 - i))) as u8 & 127) | 128);
    }
}

/// Decodes the entry starting at `p`: the element and the entry's total size.
fn decode(buf: &[u8], p: usize) -> (Elem<'_>, usize) {
    let b = buf[p];
    let (elem, body) = if b & 0x80 == 0 {
        (Elem::Int(b as i64), 1)
    } else if b & 0xC0 == 0x80 {
        let len = (b & 0x3f) as usize;
        (Elem::Str(&buf[p + 1..p + 1 + len]), 1 + len)
    } else if b & 0xE0 == 0xC0 {
        let u = (((b & 0x1f) as i64) << 8) | buf[p + 1] as i64;
        let n = if u >= 1 << 12 { u - (1 << 13) } else { u };
        (Elem::Int(n), 2)
    } else if b & 0xF0 == 0xE0 {
        let len = (((b & 0x0f) as usize) << 8) | buf[p + 1] as usize;
        (Elem::Str(&buf[p + 2..p + 2 + len]), 2 + len)
    } else {
        match b {
            0xF0 => {
                let len =
                    u32::from_le_bytes([buf[p + 1], buf[p + 2], buf[p + 3], buf[p + 4]]) as usize;
                (Elem::Str(&buf[p + 5..p + 5 + len]), 5 + len)
            }
            0xF1 => (
                Elem::Int(i16::from_le_bytes([buf[p + 1], buf[p + 2]]) as i64),
                3,
            ),
            0xF2 => {
                let n = i32::from_le_bytes([0, buf[p + 1], buf[p + 2], buf[p + 3]]) >> 8;
                (Elem::Int(n as i64), 4)
            }
            0xF3 => (
                Elem::Int(
                    i32::from_le_bytes([buf[p + 1], buf[p + 2], buf[p + 3], buf[p + 4]]) as i64,
                ),
                5,
            ),
            _ => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&buf[p + 1..p + 9]);
                (Elem::Int(i64::from_le_bytes(a)), 9)
            }
        }
    };
    (elem, body + backlen_size(body))
}

/// The start of the entry that ends at `end` (exclusive), read through its backlen.
fn prev_start(buf: &[u8], end: usize) -> usize {
    let mut p = end - 1;
    let mut l = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        l |= ((b & 127) as usize) << shift;
        if b & 128 == 0 {
            break;
        }
        p -= 1;
        shift += 7;
    }
    end - l - backlen_size(l)
}

// ----- nodes ------------------------------------------------------------------------

/// One compact node: entries back to back, sized exactly.
#[derive(Debug, Clone, Default)]
struct Node {
    buf: Box<[u8]>,
    count: u32,
    /// Holds one large element; nothing else is ever added to it.
    plain: bool,
}

impl Node {
    /// Size as Redis accounts a listpack (header and end marker included).
    fn sz(&self) -> usize {
        self.buf.len() + LP_OVERHEAD
    }

    /// Inserts an encoded entry for `v` at byte offset `at`.
    fn insert_at(&mut self, at: usize, v: &[u8]) {
        let mut b = std::mem::take(&mut self.buf).into_vec();
        let mut e = Vec::with_capacity(entry_size(v));
        encode_entry(v, &mut e);
        b.reserve_exact(e.len());
        b.splice(at..at, e);
        self.buf = b.into_boxed_slice();
        self.count += 1;
    }

    /// Removes bytes `from..to` holding `n` entries.
    fn remove_bytes(&mut self, from: usize, to: usize, n: u32) {
        let mut b = std::mem::take(&mut self.buf).into_vec();
        b.drain(from..to);
        self.buf = b.into_boxed_slice();
        self.count -= n;
    }

    /// Byte offset of the entry at `idx` (< count), walking from the nearer end.
    fn offset_of(&self, idx: usize) -> usize {
        let count = self.count as usize;
        if idx <= count / 2 {
            let mut p = 0;
            for _ in 0..idx {
                p += decode(&self.buf, p).1;
            }
            p
        } else {
            let mut p = self.buf.len();
            for _ in idx..count {
                p = prev_start(&self.buf, p);
            }
            p
        }
    }

    /// Splits off the entries from byte offset `at` (entry index `idx`) into a new node.
    fn split_off(&mut self, at: usize, idx: usize) -> Node {
        let mut b = std::mem::take(&mut self.buf).into_vec();
        let tail = b.split_off(at);
        self.buf = b.into_boxed_slice();
        let n = Node {
            buf: tail.into_boxed_slice(),
            count: self.count - idx as u32,
            plain: false,
        };
        self.count = idx as u32;
        n
    }

    fn from_elem(v: &[u8], plain: bool) -> Node {
        let mut b = Vec::with_capacity(entry_size(v));
        encode_entry(v, &mut b);
        Node {
            buf: b.into_boxed_slice(),
            count: 1,
            plain,
        }
    }
}

// ----- the list ---------------------------------------------------------------------

/// A list of byte strings. `fill` arguments are the current `list-max-listpack-size`.
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

    /// Heap bytes owned by the list (node buffers and the node array if spilled).
    pub fn heap_size(&self) -> usize {
        let bufs: usize = self.nodes.iter().map(|n| n.buf.len()).sum();
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
        let Some(n) = self.nodes.first() else {
            return;
        };
        if n.plain {
            return;
        }
        let (sz_limit, count_limit) = node_limit(fill);
        if n.sz() > sz_limit / 2 || self.len() > count_limit / 2 {
            return;
        }
        self.meta &= !QUICK;
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
    pub fn push(&mut self, end: End, items: &[&[u8]], fill: i64) {
        let bytes: usize = items.iter().map(|i| i.len()).sum();
        self.grow_check(bytes, items.len(), fill);
        for v in items {
            self.push_one(end, v, fill);
        }
    }

    fn push_one(&mut self, end: End, v: &[u8], fill: i64) {
        self.meta += 1;
        if !self.is_quick() {
            if self.nodes.is_empty() {
                self.nodes.push(Node::default());
            }
            let n = &mut self.nodes[0];
            let at = if end == End::Head { 0 } else { n.buf.len() };
            n.insert_at(at, v);
            return;
        }
        if is_large(v.len(), fill) {
            let node = Node::from_elem(v, true);
            match end {
                End::Head => self.nodes.insert(0, node),
                End::Tail => self.nodes.push(node),
            }
            return;
        }
        let idx = match end {
            End::Head => 0,
            End::Tail => self.nodes.len().wrapping_sub(1),
        };
        match self.nodes.get_mut(idx) {
            Some(n) if Self::allow_insert(n, fill, v.len()) => {
                let at = if end == End::Head { 0 } else { n.buf.len() };
                n.insert_at(at, v);
            }
            _ => {
                let node = Node::from_elem(v, false);
                match end {
                    End::Head => self.nodes.insert(0, node),
                    End::Tail => self.nodes.push(node),
                }
            }
        }
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End, fill: i64) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let idx = match end {
            End::Head => 0,
            End::Tail => self.nodes.len() - 1,
        };
        let n = &mut self.nodes[idx];
        let (from, v) = match end {
            End::Head => {
                let (e, sz) = decode(&n.buf, 0);
                (0..sz, e.to_vec())
            }
            End::Tail => {
                let s = prev_start(&n.buf, n.buf.len());
                (s..n.buf.len(), decode(&n.buf, s).0.to_vec())
            }
        };
        n.remove_bytes(from.start, from.end, 1);
        if n.count == 0 {
            self.nodes.remove(idx);
        }
        self.meta -= 1;
        self.shrink_check(fill);
        Some(v)
    }

    /// Normalizes a possibly negative index; `None` when out of range.
    pub fn index(&self, i: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if i < 0 { len + i } else { i };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Finds the entry at index `i` (< len): walks node counts from the nearer end.
    fn locate(&self, i: usize) -> Pos {
        let (node, within) = if i < self.len() / 2 {
            let mut acc = 0;
            let mut k = 0;
            loop {
                let c = self.nodes[k].count as usize;
                if i < acc + c {
                    break (k, i - acc);
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
                    break (k, i - (acc - c));
                }
                acc -= c;
                k -= 1;
            }
        };
        Pos {
            node,
            off: self.nodes[node].offset_of(within),
        }
    }

    fn elem_at(&self, p: Pos) -> Elem<'_> {
        decode(&self.nodes[p.node].buf, p.off).0
    }

    /// The element at index `i` (negative counts from the tail).
    pub fn get(&self, i: i64) -> Option<Elem<'_>> {
        let i = self.index(i)?;
        Some(self.elem_at(self.locate(i)))
    }

    /// Calls `f` for `count` elements from index `start` (< len) towards the tail.
    pub fn range(&self, start: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        if count == 0 || start >= self.len() {
            return;
        }
        let mut p = self.locate(start);
        for _ in 0..count {
            let buf = &self.nodes[p.node].buf;
            let (e, sz) = decode(buf, p.off);
            f(e);
            p.off += sz;
            if p.off == buf.len() {
                p.node += 1;
                p.off = 0;
                if p.node == self.nodes.len() {
                    return;
                }
            }
        }
    }

    /// Calls `f` for `count` elements from index `start` (< len) towards the head.
    pub fn range_rev(&self, start: usize, count: usize, mut f: impl FnMut(Elem<'_>)) {
        if count == 0 || start >= self.len() {
            return;
        }
        let p = self.locate(start);
        let mut node = p.node;
        let mut end = p.off + decode(&self.nodes[node].buf, p.off).1;
        for _ in 0..count {
            let buf = &self.nodes[node].buf;
            let s = prev_start(buf, end);
            f(decode(buf, s).0);
            end = s;
            if end == 0 {
                if node == 0 {
                    return;
                }
                node -= 1;
                end = self.nodes[node].buf.len();
            }
        }
    }

    /// Iterates all elements head to tail, stopping when `f` returns false.
    pub fn for_each(&self, mut f: impl FnMut(Elem<'_>) -> bool) {
        for n in &self.nodes {
            let mut p = 0;
            while p < n.buf.len() {
                let (e, sz) = decode(&n.buf, p);
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
            let mut end = n.buf.len();
            while end > 0 {
                let s = prev_start(&n.buf, end);
                if !f(decode(&n.buf, s).0) {
                    return;
                }
                end = s;
            }
        }
    }

    /// Inserts `v` so that it becomes the element at position `p` (before the entry
    /// at `p`), or after it when `after`.
    fn insert_at(&mut self, p: Pos, after: bool, v: &[u8], fill: i64) {
        self.meta += 1;
        let node = &self.nodes[p.node];
        let at = if after {
            p.off + decode(&node.buf, p.off).1
        } else {
            p.off
        };
        if !self.is_quick() {
            self.nodes[0].insert_at(at, v);
            return;
        }
        let at_tail = at == node.buf.len();
        let at_head = at == 0;
        let large = is_large(v.len(), fill);
        if !large && Self::allow_insert(node, fill, v.len()) {
            self.nodes[p.node].insert_at(at, v);
            return;
        }
        if !large && at_tail {
            if let Some(next) = self.nodes.get_mut(p.node + 1) {
                if Self::allow_insert(next, fill, v.len()) {
                    next.insert_at(0, v);
                    return;
                }
            }
        }
        if !large && at_head && p.node > 0 {
            let prev = &mut self.nodes[p.node - 1];
            if Self::allow_insert(prev, fill, v.len()) {
                let end = prev.buf.len();
                prev.insert_at(end, v);
                return;
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
                q += decode(&self.nodes[p.node].buf, q).1;
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
                    let end = n.buf.len();
                    n.insert_at(end, v);
                } else if right_ok {
                    self.nodes[p.node + 1].insert_at(0, v);
                } else if left_ok {
                    let n = &mut self.nodes[p.node];
                    let end = n.buf.len();
                    n.insert_at(end, v);
                } else {
                    self.nodes.insert(p.node + 1, new);
                }
            }
        }
    }

    /// LINSERT: inserts `v` before or after the first element equal to `pivot`.
    /// Returns false when the pivot is not found.
    pub fn insert(&mut self, pivot: &[u8], after: bool, v: &[u8], fill: i64) -> bool {
        // As Redis, the encoding may change even when the pivot is then not found.
        self.grow_check(v.len(), 1, fill);
        let mut found = None;
        'outer: for (k, n) in self.nodes.iter().enumerate() {
            let mut off = 0;
            while off < n.buf.len() {
                let (e, sz) = decode(&n.buf, off);
                if e.eq_bytes(pivot) {
                    found = Some(Pos { node: k, off });
                    break 'outer;
                }
                off += sz;
            }
        }
        let Some(p) = found else { return false };
        self.insert_at(p, after, v, fill);
        true
    }

    /// Removes the entry at `p`.
    fn remove_at(&mut self, p: Pos) {
        let n = &mut self.nodes[p.node];
        let sz = decode(&n.buf, p.off).1;
        n.remove_bytes(p.off, p.off + sz, 1);
        if n.count == 0 {
            self.nodes.remove(p.node);
        }
        self.meta -= 1;
    }

    /// LSET: replaces the element at index `i`. Returns false when out of range.
    pub fn set(&mut self, i: i64, v: &[u8], fill: i64) -> bool {
        let Some(i) = self.index(i) else {
            return false;
        };
        self.grow_check(v.len(), 1, fill);
        let p = self.locate(i);
        let node = &self.nodes[p.node];
        let old = decode(&node.buf, p.off).1;
        let fits = !self.is_quick()
            || (!node.plain
                && !is_large(v.len(), fill)
                && !exceeds_limit(
                    fill,
                    node.sz() - old + v.len() + SIZE_ESTIMATE_OVERHEAD,
                    node.count as usize,
                ));
        if fits {
            let n = &mut self.nodes[p.node];
            n.remove_bytes(p.off, p.off + old, 1);
            n.insert_at(p.off, v);
        } else {
            self.remove_at(p);
            if i == self.len() {
                self.push_one(End::Tail, v, fill);
            } else {
                let q = self.locate(i);
                self.insert_at(q, false, v, fill);
            }
        }
        self.shrink_check(fill);
        true
    }

    /// Removes `count` elements from index `start`.
    pub fn delete_range(&mut self, start: usize, count: usize, fill: i64) {
        let count = count.min(self.len().saturating_sub(start));
        if count == 0 {
            return;
        }
        let mut left = count;
        let mut p = self.locate(start);
        while left > 0 {
            let n = &mut self.nodes[p.node];
            // Index of the entry at p.off within the node is only needed for counting.
            let mut end = p.off;
            let mut removed = 0u32;
            while end < n.buf.len() && left > 0 {
                end += decode(&n.buf, end).1;
                removed += 1;
                left -= 1;
            }
            if p.off == 0 && end == n.buf.len() {
                self.nodes.remove(p.node);
            } else {
                n.remove_bytes(p.off, end, removed);
                p.node += 1;
            }
            p.off = 0;
        }
        self.meta -= count;
        self.shrink_check(fill);
    }

    /// LTRIM: keeps only elements `start..=stop` (already normalized, may be empty).
    pub fn keep_range(&mut self, start: usize, stop: Option<usize>, fill: i64) {
        match stop {
            Some(stop) if start <= stop && start < self.len() => {
                let stop = stop.min(self.len() - 1);
                let tail = self.len() - 1 - stop;
                self.delete_range(stop + 1, tail, fill);
                self.delete_range(0, start, fill);
            }
            _ => {
                self.nodes.clear();
                self.meta = 0;
            }
        }
    }

    /// LREM: removes up to `count` elements equal to `v` (all when 0; from the tail
    /// when negative). Returns how many were removed.
    pub fn remove(&mut self, count: i64, v: &[u8], fill: i64) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut removed = 0;
        if count >= 0 {
            let mut k = 0;
            while k < self.nodes.len() && removed < limit {
                let mut off = 0;
                while off < self.nodes[k].buf.len() && removed < limit {
                    let (e, sz) = decode(&self.nodes[k].buf, off);
                    if e.eq_bytes(v) {
                        self.nodes[k].remove_bytes(off, off + sz, 1);
                        removed += 1;
                    } else {
                        off += sz;
                    }
                }
                if self.nodes[k].count == 0 {
                    self.nodes.remove(k);
                } else {
                    k += 1;
                }
            }
        } else {
            let mut k = self.nodes.len();
            while k > 0 && removed < limit {
                k -= 1;
                let mut end = self.nodes[k].buf.len();
                while end > 0 && removed < limit {
                    let s = prev_start(&self.nodes[k].buf, end);
                    if decode(&self.nodes[k].buf, s).0.eq_bytes(v) {
                        self.nodes[k].remove_bytes(s, end, 1);
                        removed += 1;
                    }
                    end = s;
                }
                if self.nodes[k].count == 0 {
                    self.nodes.remove(k);
                }
            }
        }
        self.meta -= removed;
        if removed > 0 {
            self.shrink_check(fill);
        }
        removed
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
    pub fn check(&self, fill: i64) {
        let mut total = 0;
        for n in &self.nodes {
            assert!(n.count > 0, "empty node");
            let mut p = 0;
            let mut c = 0;
            while p < n.buf.len() {
                let (_, sz) = decode(&n.buf, p);
                p += sz;
                c += 1;
                assert_eq!(prev_start(&n.buf, p), p - sz);
            }
            assert_eq!(p, n.buf.len());
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
        let fill = -2;
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
        let mut l = List::new();
        for i in 0..5 {
            l.push(End::Head, &[format!("e{i}").as_bytes()], 4);
        }
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.node_count(), 2);
        l.check(4);
        l.pop(End::Head, 4);
        l.pop(End::Head, 4);
        l.pop(End::Head, 4);
        assert_eq!(l.encoding(), "listpack");
    }

    #[test]
    fn big_list_nodes_respect_limit() {
        let mut l = List::new();
        for i in 0..20000 {
            l.push(End::Tail, &[format!("element-{i}").as_bytes()], -2);
        }
        l.check(-2);
        assert!(l.node_count() > 20);
        assert_eq!(l.get(12345).unwrap().to_vec(), b"element-12345");
        assert_eq!(l.get(-1).unwrap().to_vec(), b"element-19999");
        let mut got = Vec::new();
        l.range(9998, 4, |e| got.push(e.to_vec()));
        assert_eq!(got[0], b"element-9998");
        assert_eq!(got[3], b"element-10001");
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
            ops in proptest::collection::vec(op(), 1..200),
        ) {
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
                prop_assert_eq!(&l.get(i as i64).unwrap().to_vec(), want);
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
}
