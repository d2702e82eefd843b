//! A list node's bytes: listpack-format entries (an encoding header, the data, then a
//! "backlen" so a node can be walked from either end), and the node itself, which
//! may hold its bytes LZF-compressed (`list-compress-depth`).
//!
//! A compressed node keeps exactly what Redis would compress: a whole listpack
//! (header, entries, end byte) for a packed node, the element's bytes for a plain
//! one. An RDB snapshot can then write the compressed bytes as they are, as Redis
//! does. Reading a compressed node decompresses a copy; changing one decompresses it
//! in place, and the list compresses it again when it is done (`List::settle`).

use std::borrow::Cow;

use super::{Elem, LP_OVERHEAD};

// ----- entry encoding ---------------------------------------------------------------

/// The integer a string canonically spells, if any (stored in binary then).
pub(super) fn int_of(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    crate::util::numeric::parse_i64(v)
}

pub(super) fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Where an entry is encoded: the end of a vector, or a slice sized for it exactly
/// (the room at a node's front).
pub(super) trait EntryOut {
    fn push(&mut self, b: u8);
    fn extend_from_slice(&mut self, s: &[u8]);
    fn len(&self) -> usize;
}

impl EntryOut for Vec<u8> {
    #[inline(always)]
    fn push(&mut self, b: u8) {
        Vec::push(self, b)
    }
    #[inline(always)]
    fn extend_from_slice(&mut self, s: &[u8]) {
        Vec::extend_from_slice(self, s)
    }
    #[inline(always)]
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// Fills a slice front to back; writing past its end panics (the caller sized it
/// with `entry_size`).
struct SliceOut<'a> {
    dst: &'a mut [u8],
    pos: usize,
}

impl EntryOut for SliceOut<'_> {
    #[inline(always)]
    fn push(&mut self, b: u8) {
        self.dst[self.pos] = b;
        self.pos += 1;
    }
    #[inline(always)]
    fn extend_from_slice(&mut self, s: &[u8]) {
        self.dst[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }
    #[inline(always)]
    fn len(&self) -> usize {
        self.pos
    }
}

/// Appends the header and data of `v` (without backlen).
pub(super) fn encode_body(v: &[u8], out: &mut impl EntryOut) {
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

pub(super) fn body_size(v: &[u8]) -> usize {
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
pub(super) fn entry_size(v: &[u8]) -> usize {
    let b = body_size(v);
    b + backlen_size(b)
}

/// Appends a complete entry (header, data, backlen).
pub(super) fn encode_entry(v: &[u8], out: &mut impl EntryOut) {
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
pub(super) fn decode(buf: &[u8], p: usize) -> (Elem<'_>, usize) {
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
pub(super) fn prev_start(buf: &[u8], end: usize) -> usize {
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

/// Redis compresses no node smaller than this (MIN_COMPRESS_BYTES)...
const MIN_COMPRESS_BYTES: usize = 48;
/// ...and keeps a compressed form only if it saves this much (MIN_COMPRESS_IMPROVE).
const MIN_COMPRESS_IMPROVE: usize = 8;
/// A compressed buffer starts with the uncompressed size, little-endian.
const LZF_PREFIX: usize = 8;

/// One compact node: `gap` unused bytes, then the entries back to back; or, when
/// `lzf`, the uncompressed size (8 bytes) then the LZF-compressed listpack or plain
/// element (no gap).
///
/// The gap is room for pushes at the head: a listpack inserts there by moving every
/// byte of the node (Redis's LPUSH does), here an entry that fits is written into
/// the gap. When it does not fit, the node is rebuilt with an eighth of its size (at
/// most `MAX_GAP`) free at the front, so a run of LPUSHes moves the node's bytes once
/// per that many bytes pushed, for about an eighth more memory; nodes that are never
/// pushed at the head keep none. LPOP widens the gap instead of moving the rest while
/// it stays within an eighth of what is left (and `MAX_GAP`); past that, the pop
/// moves the rest and drops the gap. (Removals elsewhere leave the gap as it is.)
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    buf: Box<[u8]>,
    pub(super) count: u32,
    gap: u16,
    /// Holds one large element; nothing else is ever added to it.
    pub(super) plain: bool,
    lzf: bool,
}

/// The most room a node keeps at its front.
const MAX_GAP: usize = 1024;

impl Node {
    /// The entry bytes of a node that is not compressed (callers decompress first).
    #[inline]
    pub(super) fn buf(&self) -> &[u8] {
        debug_assert!(!self.lzf);
        self.data()
    }

    /// The entries (or the compressed form), after the gap.
    #[inline(always)]
    fn data(&self) -> &[u8] {
        &self.buf[self.gap as usize..]
    }

    pub(super) fn is_compressed(&self) -> bool {
        self.lzf
    }

    /// Heap bytes held (compressed size when compressed), the gap included.
    pub(super) fn heap_len(&self) -> usize {
        self.buf.len()
    }

    /// Size as Redis accounts a listpack (header and end marker included).
    pub(super) fn sz(&self) -> usize {
        if self.lzf && !self.plain {
            self.lzf_raw_len()
        } else {
            self.data().len() + LP_OVERHEAD
        }
    }

    /// Redis's node size: the listpack's bytes, or a plain node's element length.
    pub(super) fn redis_sz(&self) -> usize {
        if self.lzf {
            self.lzf_raw_len()
        } else if self.plain {
            element_len(decode(self.data(), 0).0)
        } else {
            self.data().len() + LP_OVERHEAD
        }
    }

    fn lzf_raw_len(&self) -> usize {
        let mut n = [0u8; LZF_PREFIX];
        n.copy_from_slice(&self.data()[..LZF_PREFIX]);
        u64::from_le_bytes(n) as usize
    }

    /// The entries, decompressed into a copy when the node is compressed.
    pub(super) fn entries(&self) -> Cow<'_, [u8]> {
        if self.lzf {
            Cow::Owned(self.decompressed_entries())
        } else {
            Cow::Borrowed(self.data())
        }
    }

    fn decompressed_entries(&self) -> Vec<u8> {
        let raw_len = self.lzf_raw_len();
        // The buffer was produced by `compress` from these very bytes: failing to
        // decompress it would be memory corruption, not bad input.
        let raw = crate::util::lzf::decompress(&self.data()[LZF_PREFIX..], raw_len)
            .expect("a compressed list node decompresses");
        if self.plain {
            let mut e = Vec::with_capacity(entry_size(&raw));
            encode_entry(&raw, &mut e);
            e
        } else {
            let mut v = raw;
            v.truncate(raw_len - 1);
            v.drain(..LP_HEADER);
            v
        }
    }

    /// Makes the node's bytes plain entries again (before changing it).
    #[inline(always)]
    pub(super) fn make_raw(&mut self) {
        if self.lzf {
            self.decompress_in_place();
        }
    }

    // Out of line: pushes and pops call `make_raw` on every change of an end node.
    #[cold]
    #[inline(never)]
    fn decompress_in_place(&mut self) {
        self.buf = self.decompressed_entries().into_boxed_slice();
        self.gap = 0;
        self.lzf = false;
    }

    /// Compresses the node as Redis would: not below MIN_COMPRESS_BYTES, and only
    /// when that saves at least MIN_COMPRESS_IMPROVE bytes.
    pub(super) fn compress(&mut self) {
        if self.lzf {
            return;
        }
        let sz = self.redis_sz();
        if sz < MIN_COMPRESS_BYTES {
            return;
        }
        let src = self.redis_bytes();
        // Kept only when it saves at least MIN_COMPRESS_IMPROVE bytes.
        let Some(c) = crate::util::lzf::compress(&src, sz - MIN_COMPRESS_IMPROVE - 1) else {
            return;
        };
        let mut b = Vec::with_capacity(LZF_PREFIX + c.len());
        b.extend_from_slice(&(sz as u64).to_le_bytes());
        b.extend_from_slice(&c);
        self.buf = b.into_boxed_slice();
        self.gap = 0;
        self.lzf = true;
    }

    /// The bytes Redis keeps for this node: a listpack, or a plain node's element.
    pub(super) fn redis_bytes(&self) -> Cow<'_, [u8]> {
        if self.lzf {
            let raw_len = self.lzf_raw_len();
            return Cow::Owned(
                crate::util::lzf::decompress(&self.data()[LZF_PREFIX..], raw_len)
                    .expect("a compressed list node decompresses"),
            );
        }
        if self.plain {
            return match decode(self.data(), 0).0 {
                Elem::Str(s) => Cow::Borrowed(s),
                e => Cow::Owned(e.to_vec()),
            };
        }
        let total = self.data().len() + LP_OVERHEAD;
        let mut lp = Vec::with_capacity(total);
        lp.extend_from_slice(&(total as u32).to_le_bytes());
        lp.extend_from_slice(&(self.count.min(u16::MAX as u32) as u16).to_le_bytes());
        lp.extend_from_slice(self.data());
        lp.push(0xFF);
        Cow::Owned(lp)
    }

    /// The compressed form as an RDB LZF string takes it: (LZF bytes, uncompressed
    /// length), when the node is compressed.
    pub(super) fn lzf_blob(&self) -> Option<(&[u8], usize)> {
        self.lzf
            .then(|| (&self.data()[LZF_PREFIX..], self.lzf_raw_len()))
    }

    /// Inserts an encoded entry for `v` at byte offset `at` (of the entries).
    pub(super) fn insert_at(&mut self, at: usize, v: &[u8]) {
        debug_assert!(!self.lzf);
        if at == 0 {
            return self.push_front(v);
        }
        let gap = self.gap as usize;
        let mut b = std::mem::take(&mut self.buf).into_vec();
        let old_len = b.len();
        b.reserve_exact(entry_size(v));
        // Encoded at the end and rotated into place: no buffer for the entry alone.
        encode_entry(v, &mut b);
        let n = b.len() - old_len;
        b[gap + at..].rotate_right(n);
        self.buf = b.into_boxed_slice();
        self.count += 1;
    }

    /// Inserts `v` before the first entry: into the gap when it fits, else into a
    /// rebuilt buffer with room in front (see the type's comment).
    fn push_front(&mut self, v: &[u8]) {
        let n = entry_size(v);
        let gap = self.gap as usize;
        if n <= gap {
            let mut out = SliceOut {
                dst: &mut self.buf[gap - n..gap],
                pos: 0,
            };
            encode_entry(v, &mut out);
            self.gap = (gap - n) as u16;
        } else {
            let len = self.buf.len() - gap;
            let room = (len / 8).min(MAX_GAP);
            let mut b = Vec::with_capacity(room + n + len);
            b.resize(room, 0);
            encode_entry(v, &mut b);
            b.extend_from_slice(&self.buf[gap..]);
            self.buf = b.into_boxed_slice();
            self.gap = room as u16;
        }
        self.count += 1;
    }

    /// Appends entries for `vs` at the end, reallocating once for all of them.
    pub(super) fn append_all(&mut self, vs: &[&[u8]]) {
        debug_assert!(!self.lzf);
        let extra: usize = vs.iter().map(|v| entry_size(v)).sum();
        let mut b = Vec::with_capacity(self.buf.len() + extra);
        b.extend_from_slice(&self.buf);
        for v in vs {
            encode_entry(v, &mut b);
        }
        self.buf = b.into_boxed_slice();
        self.count += vs.len() as u32;
    }

    /// Removes bytes `from..to` (of the entries) holding `n` entries.
    pub(super) fn remove_bytes(&mut self, from: usize, to: usize, n: u32) {
        debug_assert!(!self.lzf);
        let gap = self.gap as usize;
        self.count -= n;
        let left = self.buf.len() - gap - (to - from);
        if from == 0 && left > 0 && gap + to <= (left / 8).min(MAX_GAP) {
            // From the front: the gap takes the bytes, nothing moves.
            self.gap = (gap + to) as u16;
            return;
        }
        let mut b = std::mem::take(&mut self.buf).into_vec();
        if from == 0 {
            // The gap goes with the removed bytes, in the same move.
            b.drain(..gap + to);
            self.gap = 0;
        } else {
            b.drain(gap + from..gap + to);
        }
        self.buf = b.into_boxed_slice();
    }

    /// Splits off the entries from byte offset `at` (entry index `idx`) into a new node.
    pub(super) fn split_off(&mut self, at: usize, idx: usize) -> Node {
        debug_assert!(!self.lzf);
        let mut b = std::mem::take(&mut self.buf).into_vec();
        let tail = b.split_off(self.gap as usize + at);
        self.buf = b.into_boxed_slice();
        let n = Node {
            buf: tail.into_boxed_slice(),
            count: self.count - idx as u32,
            gap: 0,
            plain: false,
            lzf: false,
        };
        self.count = idx as u32;
        n
    }

    pub(super) fn from_elem(v: &[u8], plain: bool) -> Node {
        let mut b = Vec::with_capacity(entry_size(v));
        encode_entry(v, &mut b);
        Node {
            buf: b.into_boxed_slice(),
            count: 1,
            gap: 0,
            plain,
            lzf: false,
        }
    }
}

/// Byte offset of the entry at `idx` (< count) in `buf`, walking from the nearer end.
pub(super) fn offset_of(buf: &[u8], count: usize, idx: usize) -> usize {
    if idx <= count / 2 {
        let mut p = 0;
        for _ in 0..idx {
            p += decode(buf, p).1;
        }
        p
    } else {
        let mut p = buf.len();
        for _ in idx..count {
            p = prev_start(buf, p);
        }
        p
    }
}

/// The length of an element's bytes (an integer's decimal digits).
fn element_len(e: Elem<'_>) -> usize {
    match e {
        Elem::Str(s) => s.len(),
        Elem::Int(n) => {
            let mut v = Vec::with_capacity(20);
            crate::util::numeric::format_i64(n, &mut v);
            v.len()
        }
    }
}

/// A listpack's header: total bytes (4) and element count (2).
const LP_HEADER: usize = 6;

#[cfg(test)]
mod tests {
    use super::*;

    fn elems(n: &Node) -> Vec<Vec<u8>> {
        let buf = n.entries();
        let mut out = Vec::new();
        let mut p = 0;
        while p < buf.len() {
            let (e, sz) = decode(&buf, p);
            out.push(e.to_vec());
            p += sz;
        }
        out
    }

    #[test]
    fn pushes_at_the_front_fill_the_gap_and_pops_widen_it() {
        let mut n = Node::from_elem(b"first", false);
        let mut model = vec![b"first".to_vec()];
        assert_eq!(n.gap, 0, "a new node keeps no room");
        for i in 0..600 {
            let v = format!("value-{i:04}").into_bytes();
            n.insert_at(0, &v);
            model.insert(0, v);
            let len = n.data().len();
            // Never more than an eighth (capped) spare, plus the entry that
            // triggered the last rebuild.
            assert!(
                n.gap as usize <= (len / 8).min(MAX_GAP),
                "gap {} len {len}",
                n.gap
            );
            assert_eq!(n.sz(), len + LP_OVERHEAD);
        }
        assert_eq!(elems(&n), model);
        assert_eq!(n.count as usize, model.len());
        assert!(n.gap > 0, "a run of pushes leaves room in front");
        // The listpack Redis would hold is the entries alone.
        let lp = n.redis_bytes();
        assert_eq!(lp.len(), n.data().len() + LP_OVERHEAD);
        assert_eq!(&lp[LP_HEADER..lp.len() - 1], n.data());
        // Pops from the front move nothing while the gap stays within an eighth of
        // what is left; past that, the rest moves and the gap is dropped.
        let mut moved = false;
        for _ in 0..100 {
            let before = (n.buf.as_ptr(), n.gap as usize);
            let first = decode(n.data(), 0).1;
            let within = before.1 + first <= ((n.data().len() - first) / 8).min(MAX_GAP);
            n.remove_bytes(0, first, 1);
            model.remove(0);
            if within {
                assert_eq!(
                    (n.buf.as_ptr(), n.gap as usize),
                    (before.0, before.1 + first)
                );
            } else {
                assert_eq!(n.gap, 0);
                moved = true;
            }
            assert!(n.gap as usize <= (n.data().len() / 8).min(MAX_GAP));
            assert_eq!(elems(&n), model);
        }
        assert!(moved, "100 pops pass the bound");
        let mut fresh = Node::from_elem(b"x", false);
        fresh.append_all(&[b"y".as_slice(); 200]);
        fresh.remove_bytes(0, decode(fresh.data(), 0).1, 1);
        assert_eq!(fresh.gap, 3, "a pop from a node without room makes some");
        // Inserting in the middle and splitting keep the entries in order.
        let mid = offset_of(n.data(), n.count as usize, 10);
        n.insert_at(mid, b"middle");
        model.insert(10, b"middle".to_vec());
        assert_eq!(elems(&n), model);
        let at = offset_of(n.data(), n.count as usize, 300);
        let tail = n.split_off(at, 300);
        assert_eq!(elems(&n), model[..300].to_vec());
        assert_eq!(elems(&tail), model[300..].to_vec());
        // Compressed and back: the gap is gone, the entries are the same.
        let mut c = n.clone();
        c.compress();
        assert!(c.is_compressed());
        assert_eq!(c.gap, 0);
        c.make_raw();
        assert_eq!(elems(&c), model[..300].to_vec());
        // Removing many from the front moves the rest and drops the gap.
        let end = offset_of(n.data(), n.count as usize, 200);
        n.remove_bytes(0, end, 200);
        assert_eq!(elems(&n), model[200..300].to_vec());
        assert_eq!(n.gap, 0);
    }
}
