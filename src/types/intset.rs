//! A sorted array of integers stored at the narrowest width that holds them all
//! (16, 32 or 64 bits), as Redis's intset: sets of integers cost 2-8 bytes per member
//! with O(log n) lookup. Widening is one-way, as in Redis.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntSet {
    W16(Vec<i16>),
    W32(Vec<i32>),
    W64(Vec<i64>),
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::W16(Vec::new())
    }
}

impl IntSet {
    pub fn new() -> IntSet {
        IntSet::default()
    }

    pub fn len(&self) -> usize {
        match self {
            IntSet::W16(v) => v.len(),
            IntSet::W32(v) => v.len(),
            IntSet::W64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> i64 {
        match self {
            IntSet::W16(v) => v[i] as i64,
            IntSet::W32(v) => v[i] as i64,
            IntSet::W64(v) => v[i],
        }
    }

    pub fn contains(&self, n: i64) -> bool {
        match self {
            IntSet::W16(v) => i16::try_from(n).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::W32(v) => i32::try_from(n).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::W64(v) => v.binary_search(&n).is_ok(),
        }
    }

    fn widen_for(&mut self, n: i64) {
        let need = if i16::try_from(n).is_ok() {
            16
        } else if i32::try_from(n).is_ok() {
            32
        } else {
            64
        };
        match self {
            IntSet::W16(v) if need > 16 => {
                *self = if need == 32 {
                    IntSet::W32(v.iter().map(|&x| x as i32).collect())
                } else {
                    IntSet::W64(v.iter().map(|&x| x as i64).collect())
                }
            }
            IntSet::W32(v) if need > 32 => {
                *self = IntSet::W64(v.iter().map(|&x| x as i64).collect())
            }
            _ => {}
        }
    }

    /// Adds `n`; returns whether it was new.
    pub fn insert(&mut self, n: i64) -> bool {
        if self.contains(n) {
            return false;
        }
        self.widen_for(n);
        fn ins<T: Ord + Copy>(v: &mut Vec<T>, x: T) {
            let i = v.binary_search(&x).unwrap_or_else(|i| i);
            v.reserve_exact(1);
            v.insert(i, x);
        }
        match self {
            IntSet::W16(v) => ins(v, n as i16),
            IntSet::W32(v) => ins(v, n as i32),
            IntSet::W64(v) => ins(v, n),
        }
        true
    }

    /// Removes `n`; returns whether it was present.
    pub fn remove(&mut self, n: i64) -> bool {
        fn rem<T: Ord + Copy>(v: &mut Vec<T>, x: Option<T>) -> bool {
            match x.map(|x| v.binary_search(&x)) {
                Some(Ok(i)) => {
                    v.remove(i);
                    true
                }
                _ => false,
            }
        }
        match self {
            IntSet::W16(v) => rem(v, i16::try_from(n).ok()),
            IntSet::W32(v) => rem(v, i32::try_from(n).ok()),
            IntSet::W64(v) => rem(v, Some(n)),
        }
    }

    /// Removes and returns the member at index `i`.
    pub fn remove_at(&mut self, i: usize) -> i64 {
        match self {
            IntSet::W16(v) => v.remove(i) as i64,
            IntSet::W32(v) => v.remove(i) as i64,
            IntSet::W64(v) => v.remove(i),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Heap bytes used.
    pub fn heap_size(&self) -> usize {
        match self {
            IntSet::W16(v) => v.capacity() * 2,
            IntSet::W32(v) => v.capacity() * 4,
            IntSet::W64(v) => v.capacity() * 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn widens() {
        let mut s = IntSet::new();
        assert!(s.insert(5));
        assert!(matches!(s, IntSet::W16(_)));
        assert!(s.insert(70000));
        assert!(matches!(s, IntSet::W32(_)));
        assert!(s.insert(i64::MIN));
        assert!(matches!(s, IntSet::W64(_)));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![i64::MIN, 5, 70000]);
        assert!(!s.insert(5));
        assert!(s.remove(70000));
        assert!(!s.contains(70000));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreeset(ops in proptest::collection::vec((any::<bool>(), prop_oneof![-300i64..300, any::<i64>()]), 0..200)) {
            let mut s = IntSet::new();
            let mut m = BTreeSet::new();
            for (add, n) in ops {
                if add {
                    prop_assert_eq!(s.insert(n), m.insert(n));
                } else {
                    prop_assert_eq!(s.remove(n), m.remove(&n));
                }
                prop_assert_eq!(s.len(), m.len());
            }
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), m.into_iter().collect::<Vec<_>>());
        }
    }
}
