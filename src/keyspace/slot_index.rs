//! The per-slot key index of cluster mode: which keys of a table hash to each of the
//! 16,384 cluster slots, so CLUSTER COUNTKEYSINSLOT is O(1) and GETKEYSINSLOT (and the
//! deletion of a lost slot's keys) costs the keys of that slot, not the keyspace.
//!
//! Redis keeps one dictionary per slot. Here the key table stays one table and the
//! index records, per slot, the table hashes of its keys (8 bytes a key, never the key
//! itself): the table finds the keys back by walking the chain each hash selects. Two
//! keys of one slot with the same 64-bit hash (astronomically rare) are kept exact by
//! a collision count, so removing one leaves the other indexed.
//!
//! `KeyTable` maintains it at its only three membership changes (a new key inserted,
//! a key removed, the table cleared); a table without an index pays one `None` test.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::util::hashslot::{key_slot, SLOTS};
use crate::util::FastMap;

/// The table hashes are already well mixed: the per-slot sets use them as they are.
#[derive(Default)]
pub struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type HashSetOf = HashSet<u64, BuildHasherDefault<PassThrough>>;

pub struct SlotIndex {
    /// Keys per slot.
    counts: Box<[u32]>,
    /// Distinct table hashes of each slot's keys.
    hashes: Box<[HashSetOf]>,
    /// (slot, hash) → keys beyond the first sharing that hash in that slot.
    collisions: FastMap<(u16, u64), u32>,
}

impl Default for SlotIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl SlotIndex {
    pub fn new() -> Self {
        SlotIndex {
            counts: vec![0; SLOTS].into_boxed_slice(),
            hashes: (0..SLOTS).map(|_| HashSetOf::default()).collect(),
            collisions: FastMap::default(),
        }
    }

    /// A new key with table hash `h`.
    pub fn add(&mut self, key: &[u8], h: u64) {
        let s = key_slot(key);
        self.counts[s as usize] += 1;
        if !self.hashes[s as usize].insert(h) {
            *self.collisions.entry((s, h)).or_insert(0) += 1;
        }
    }

    /// A removed key with table hash `h`.
    pub fn remove(&mut self, key: &[u8], h: u64) {
        let s = key_slot(key);
        self.counts[s as usize] -= 1;
        if !self.collisions.is_empty() {
            if let Some(n) = self.collisions.get_mut(&(s, h)) {
                *n -= 1;
                if *n == 0 {
                    self.collisions.remove(&(s, h));
                }
                return;
            }
        }
        self.hashes[s as usize].remove(&h);
        let set = &mut self.hashes[s as usize];
        // Give memory back once a slot empties (a resharded-away slot).
        if set.is_empty() && set.capacity() > 0 {
            *set = HashSetOf::default();
        }
    }

    pub fn count(&self, slot: usize) -> usize {
        self.counts[slot] as usize
    }

    /// The distinct table hashes of a slot's keys.
    pub fn hashes(&self, slot: usize) -> impl Iterator<Item = u64> + '_ {
        self.hashes[slot].iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_collisions_stay_exact() {
        let mut ix = SlotIndex::new();
        let s = key_slot(b"a") as usize;
        ix.add(b"a", 7);
        ix.add(b"{a}", 7); // same slot, same hash: a collision
        assert_eq!(ix.count(s), 2);
        assert_eq!(ix.hashes(s).collect::<Vec<_>>(), vec![7]);
        ix.remove(b"a", 7);
        assert_eq!(ix.count(s), 1);
        assert_eq!(ix.hashes(s).collect::<Vec<_>>(), vec![7]);
        ix.remove(b"{a}", 7);
        assert_eq!(ix.count(s), 0);
        assert_eq!(ix.hashes(s).count(), 0);
    }
}
