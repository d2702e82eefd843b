//! The hash table behind big hashes and sets (OBJECT ENCODING `hashtable`).
//!
//! A chained table with a power-of-two bucket count, so that HSCAN/SSCAN can use
//! Redis's reverse-binary cursor: every element present for a whole iteration is
//! returned at least once even if the table grows or shrinks between calls (a
//! std `HashMap` offers no such cursor). Buckets are small vectors of entries; the
//! table doubles when it holds more entries than buckets and halves below 1/8 full.

use std::hash::BuildHasher;
use std::sync::OnceLock;

/// An entry stored in a `ScanTable`, found by its key bytes.
pub trait Keyed {
    fn key(&self) -> &[u8];
}

impl Keyed for Box<[u8]> {
    fn key(&self) -> &[u8] {
        self
    }
}

impl<V> Keyed for (Box<[u8]>, V) {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

fn hasher() -> &'static foldhash::fast::FixedState {
    static H: OnceLock<foldhash::fast::FixedState> = OnceLock::new();
    H.get_or_init(|| foldhash::fast::FixedState::with_seed(fastrand::u64(..)))
}

#[inline]
fn hash(key: &[u8]) -> u64 {
    hasher().hash_one(key)
}

const MIN_BUCKETS: usize = 4;

#[derive(Debug, Clone)]
pub struct ScanTable<E> {
    buckets: Vec<Vec<E>>,
    len: usize,
}

impl<E: Keyed> Default for ScanTable<E> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<E: Keyed> ScanTable<E> {
    pub fn with_capacity(n: usize) -> Self {
        let size = n.next_power_of_two().max(MIN_BUCKETS);
        ScanTable {
            buckets: (0..size).map(|_| Vec::new()).collect(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn slot(&self, key: &[u8]) -> usize {
        (hash(key) as usize) & (self.buckets.len() - 1)
    }

    pub fn get(&self, key: &[u8]) -> Option<&E> {
        self.buckets[self.slot(key)].iter().find(|e| e.key() == key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut E> {
        let s = self.slot(key);
        self.buckets[s].iter_mut().find(|e| e.key() == key)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Inserts an entry whose key is known to be absent.
    pub fn insert_new(&mut self, e: E) {
        if self.len >= self.buckets.len() {
            self.resize(self.buckets.len() * 2);
        }
        let s = self.slot(e.key());
        self.buckets[s].push(e);
        self.len += 1;
    }

    /// Removes and returns the entry with `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<E> {
        let s = self.slot(key);
        let b = &mut self.buckets[s];
        let i = b.iter().position(|e| e.key() == key)?;
        let e = b.swap_remove(i);
        if b.is_empty() {
            *b = Vec::new();
        }
        self.len -= 1;
        if self.buckets.len() > MIN_BUCKETS && self.len * 8 < self.buckets.len() {
            self.resize((self.len * 2).next_power_of_two().max(MIN_BUCKETS));
        }
        Some(e)
    }

    fn resize(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.buckets, (0..size).map(|_| Vec::new()).collect());
        for b in old {
            for e in b {
                let s = self.slot(e.key());
                self.buckets[s].push(e);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &E> {
        self.buckets.iter().flatten()
    }

    /// Visits one bucket at `cursor` and returns the next cursor (0 when done),
    /// using Redis's reverse-binary increment so resizes between calls lose nothing.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&E)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mask = (self.buckets.len() - 1) as u64;
        for e in &self.buckets[(cursor & mask) as usize] {
            f(e);
        }
        let mut v = cursor | !mask;
        v = v.reverse_bits().wrapping_add(1).reverse_bits();
        v
    }

    /// A uniformly random entry: a random non-empty bucket, then a random entry of it
    /// weighted by trying again (buckets are short, so the bias is small, as in Redis).
    pub fn random(&self) -> Option<&E> {
        if self.len == 0 {
            return None;
        }
        loop {
            let b = &self.buckets[fastrand::usize(..self.buckets.len())];
            if !b.is_empty() {
                return Some(&b[fastrand::usize(..b.len())]);
            }
        }
    }

    /// Heap bytes: the bucket array and each bucket's vector.
    pub fn heap_size(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Vec<E>>()
            + self
                .buckets
                .iter()
                .map(|b| b.capacity() * std::mem::size_of::<E>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn k(i: usize) -> Box<[u8]> {
        format!("k{i}").into_bytes().into_boxed_slice()
    }

    #[test]
    fn insert_remove_resize() {
        let mut t: ScanTable<Box<[u8]>> = ScanTable::default();
        for i in 0..1000 {
            t.insert_new(k(i));
        }
        assert_eq!(t.len(), 1000);
        for i in 0..1000 {
            assert!(t.contains(&k(i)));
        }
        for i in 0..990 {
            assert!(t.remove(&k(i)).is_some());
        }
        assert_eq!(t.len(), 10);
        assert!(t.buckets.len() <= 64);
        assert!(t.remove(&k(0)).is_none());
    }

    #[test]
    fn scan_survives_growth_and_shrink() {
        let mut t: ScanTable<Box<[u8]>> = ScanTable::default();
        for i in 0..100 {
            t.insert_new(k(i));
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = t.scan(cursor, |e| {
                seen.insert(e.to_vec());
            });
            step += 1;
            // Grow, then shrink, in the middle of the iteration.
            if step == 5 {
                for i in 100..2000 {
                    t.insert_new(k(i));
                }
            }
            if step == 40 {
                for i in 100..2000 {
                    t.remove(&k(i));
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..100 {
            assert!(seen.contains(&k(i).to_vec()), "missed {i}");
        }
    }
}
