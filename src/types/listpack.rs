//! A compact, contiguous sequence of byte strings: the small-collection encoding that
//! Redis calls a listpack (OBJECT ENCODING `listpack`).
//!
//! Layout: one exactly sized byte buffer (a boxed slice: no spare capacity, and a
//! 24-byte `ListPack`) holding entries back to back, each a LEB128 length followed
//! by the bytes. There are no per-entry pointers or allocations, so a small hash or set
//! costs one allocation plus a byte or two per entry. Every operation is a linear walk,
//! which is what makes the encoding worth it only while collections stay small (the
//! `*-max-listpack-*` thresholds). Positions handed out are byte offsets into the
//! buffer and stay valid until the next mutation.

/// An ordered sequence of byte strings in one buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPack {
    buf: Box<[u8]>,
    len: u32,
}

/// Reads the entry at `off`: (bytes, offset of the next entry).
#[inline]
fn read_at(buf: &[u8], off: usize) -> (&[u8], usize) {
    let mut n: usize = 0;
    let mut shift = 0;
    let mut i = off;
    loop {
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&buf[i..i + n], i + n)
}

/// Where the bytes of the entry at `off` start, and how many there are; lengths
/// below 128 (one byte) are read without the general loop.
#[inline(always)]
fn span_at(buf: &[u8], off: usize) -> (usize, usize) {
    let b = buf[off];
    if b < 0x80 {
        return (off + 1, b as usize);
    }
    let (e, next) = read_at(buf, off);
    (next - e.len(), e.len())
}

fn encode_len(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn len_size(mut n: usize) -> usize {
    let mut s = 1;
    while n >= 0x80 {
        n >>= 7;
        s += 1;
    }
    s
}

/// Iterator over the entries of a `ListPack`, yielding (offset, bytes).
pub struct Iter<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (usize, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(usize, &'a [u8])> {
        if self.off >= self.buf.len() {
            return None;
        }
        let at = self.off;
        let (s, next) = read_at(self.buf, at);
        self.off = next;
        Some((at, s))
    }
}

impl ListPack {
    pub fn new() -> ListPack {
        ListPack::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the buffer (its allocation).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Edits the buffer as a `Vec`, then puts it back sized exactly. The allocator
    /// resizes in place within a size class, so this costs about what `Vec`'s own
    /// exact growth did.
    fn edit<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        let r = f(&mut v);
        self.buf = v.into_boxed_slice();
        r
    }

    /// Entries with their offsets, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            off: 0,
        }
    }

    /// The entry at `off` and the offset of the following one.
    pub fn get(&self, off: usize) -> (&[u8], usize) {
        read_at(&self.buf, off)
    }

    /// Appends an entry. Capacity grows exactly, as small collections are many and
    /// doubling would waste up to half of each.
    pub fn push(&mut self, s: &[u8]) {
        self.edit(|buf| {
            buf.reserve_exact(len_size(s.len()) + s.len());
            encode_len(s.len(), buf);
            buf.extend_from_slice(s);
        });
        self.len += 1;
    }

    /// Removes `count` consecutive entries starting at `off`.
    pub fn remove(&mut self, off: usize, count: usize) {
        let mut end = off;
        for _ in 0..count {
            end = read_at(&self.buf, end).1;
        }
        self.edit(|buf| {
            buf.drain(off..end);
        });
        self.len -= count as u32;
    }

    /// Replaces the entry at `off` with `s`.
    pub fn replace(&mut self, off: usize, s: &[u8]) {
        let end = read_at(&self.buf, off).1;
        let mut enc = Vec::with_capacity(len_size(s.len()) + s.len());
        encode_len(s.len(), &mut enc);
        enc.extend_from_slice(s);
        self.edit(|buf| {
            buf.reserve_exact(enc.len().saturating_sub(end - off));
            buf.splice(off..end, enc);
        });
    }

    /// Offset of the first entry equal to `s` among entries at indexes 0, step,
    /// 2*step… (step 2 searches the fields of field/value pairs).
    pub fn find(&self, s: &[u8], step: usize) -> Option<usize> {
        let buf = &self.buf[..];
        let n = s.len();
        // Fields often share a prefix (`user:1001`, `user:1002`): their last bytes
        // tell them apart, so those are compared first, inline, before the memcmp.
        let last = s.last().copied();
        let mut off = 0;
        while off < buf.len() {
            let (start, len) = span_at(buf, off);
            if len == n
                && (n == 0 || buf[start + n - 1] == last.unwrap_or(0))
                && &buf[start..start + n] == s
            {
                return Some(off);
            }
            off = start + len;
            for _ in 1..step {
                if off >= buf.len() {
                    return None;
                }
                let (start, len) = span_at(buf, off);
                off = start + len;
            }
        }
        None
    }

    /// The offset of the entry with index `i` (O(i)).
    pub fn offset_of(&self, i: usize) -> Option<usize> {
        self.iter().nth(i).map(|(o, _)| o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn push_find_replace_remove() {
        let mut lp = ListPack::new();
        lp.push(b"a");
        lp.push(b"1");
        lp.push(&[b'x'; 200]);
        lp.push(b"");
        assert_eq!(lp.len(), 4);
        let off = lp.find(&[b'x'; 200], 2).unwrap();
        let (_, next) = lp.get(off);
        assert_eq!(lp.get(next).0, b"");
        lp.replace(off, b"short");
        assert_eq!(
            lp.iter().map(|(_, s)| s.to_vec()).collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"1".to_vec(), b"short".to_vec(), vec![]]
        );
        assert_eq!(lp.find(b"1", 2), None);
        assert_eq!(lp.find(b"1", 1), Some(2));
        lp.remove(0, 2);
        assert_eq!(lp.len(), 2);
        assert_eq!(lp.iter().next().unwrap().1, b"short");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_like_a_vec(ops in proptest::collection::vec((0u8..3, proptest::collection::vec(any::<u8>(), 0..300), any::<usize>()), 0..60)) {
            let mut lp = ListPack::new();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for (op, s, i) in ops {
                match op {
                    0 => { lp.push(&s); model.push(s); }
                    1 if !model.is_empty() => {
                        let i = i % model.len();
                        lp.replace(lp.offset_of(i).unwrap(), &s);
                        model[i] = s;
                    }
                    _ if !model.is_empty() => {
                        let i = i % model.len();
                        lp.remove(lp.offset_of(i).unwrap(), 1);
                        model.remove(i);
                    }
                    _ => {}
                }
                prop_assert_eq!(lp.len(), model.len());
                let got: Vec<Vec<u8>> = lp.iter().map(|(_, s)| s.to_vec()).collect();
                prop_assert_eq!(&got, &model);
            }
        }

        /// `find` agrees with a linear search of the model, at steps 1 and 2, for
        /// entries sharing prefixes and lengths on both sides of the one-byte length.
        #[test]
        fn find_matches_a_linear_search(
            entries in proptest::collection::vec((0usize..4, 0u8..4, prop_oneof![Just(0usize), Just(1), Just(127), Just(128), Just(200)]), 0..40),
            probe in (0usize..4, 0u8..4, prop_oneof![Just(0usize), Just(1), Just(127), Just(128), Just(200)]),
        ) {
            let make = |(prefix, last, len): (usize, u8, usize)| {
                let mut v = vec![b'p'; len];
                if len > 0 {
                    v[0] = b'a' + prefix as u8;
                    v[len - 1] = last;
                }
                v
            };
            let mut lp = ListPack::new();
            let model: Vec<Vec<u8>> = entries.into_iter().map(make).collect();
            for e in &model {
                lp.push(e);
            }
            let probe = make(probe);
            for step in [1, 2] {
                let want = model.iter().step_by(step).position(|e| *e == probe)
                    .map(|k| lp.offset_of(k * step).unwrap());
                prop_assert_eq!(lp.find(&probe, step), want);
            }
        }
    }
}
