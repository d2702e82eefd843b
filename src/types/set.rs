//! The set type and its three encodings, switched exactly where Redis 7.2+ switches:
//! an `intset` while every member is an integer (up to `set-max-intset-entries`), a
//! `listpack` while small (`set-max-listpack-entries` members of at most
//! `set-max-listpack-value` bytes), a `hashtable` beyond. Conversions are one-way.
//!
//! Commands see members as byte strings through `for_each`, `contains`, `add`… and
//! never branch on the encoding; they only pass the limits in force (`SetLimits`).

use super::intset::IntSet;
use super::listpack::ListPack;
use super::scantable::{Members, ScanTable};
use crate::util::numeric::{format_i64, parse_i64};

/// The configured thresholds (read from the config for each command).
#[derive(Debug, Clone, Copy)]
pub struct SetLimits {
    pub intset_entries: usize,
    pub listpack_entries: usize,
    pub listpack_value: usize,
}

impl Default for SetLimits {
    fn default() -> Self {
        SetLimits {
            intset_entries: 512,
            listpack_entries: 128,
            listpack_value: 64,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Set {
    Int(IntSet),
    Pack(ListPack),
    // Boxed: a table header is 48 bytes and every small set would pay for it.
    Table(Box<ScanTable<Members>>),
}

impl Set {
    /// An empty set in the encoding Redis picks for a new set whose first member is
    /// `first` and that is about to receive `size_hint` members (setTypeCreate).
    pub fn create(first: &[u8], size_hint: usize, lim: SetLimits) -> Set {
        if parse_i64(first).is_some() && size_hint <= lim.intset_entries {
            Set::Int(IntSet::new())
        } else if size_hint <= lim.listpack_entries {
            Set::Pack(ListPack::new())
        } else {
            Set::Table(Box::new(ScanTable::with_capacity(size_hint)))
        }
    }

    /// An empty intset, the starting point of SINTERSTORE/SUNIONSTORE/SDIFFSTORE results.
    pub fn new_intset() -> Set {
        Set::Int(IntSet::new())
    }

    /// Converts to a hash table ahead of adding `size_hint` members if the compact
    /// encoding could not hold them (setTypeMaybeConvert).
    pub fn maybe_convert(&mut self, size_hint: usize, lim: SetLimits) {
        let convert = match self {
            Set::Int(_) => size_hint > lim.intset_entries,
            Set::Pack(_) => size_hint > lim.listpack_entries,
            Set::Table(_) => false,
        };
        if convert {
            self.convert_to_table(size_hint);
        }
    }

    fn convert_to_table(&mut self, extra: usize) {
        let mut t = ScanTable::with_capacity(self.len() + extra);
        self.for_each(|m| t.insert_new(&[m]));
        *self = Set::Table(Box::new(t));
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Int(s) => s.len(),
            Set::Pack(lp) => lp.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hash table of a big set (DEBUG HTSTATS-KEY).
    pub fn table(&self) -> Option<&ScanTable<Members>> {
        match self {
            Set::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Int(_) => "intset",
            Set::Pack(_) => "listpack",
            Set::Table(_) => "hashtable",
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Int(s) => parse_i64(m).is_some_and(|n| s.contains(n)),
            Set::Pack(lp) => lp.find(m, 1).is_some(),
            Set::Table(t) => t.contains(m),
        }
    }

    /// Adds `m`; returns whether it was new (setTypeAdd, with its conversions).
    pub fn add(&mut self, m: &[u8], lim: SetLimits) -> bool {
        match self {
            Set::Table(t) => t.insert_if_absent(m, &[m]),
            Set::Pack(lp) => {
                if lp.find(m, 1).is_some() {
                    return false;
                }
                if lp.len() < lim.listpack_entries && m.len() <= lim.listpack_value {
                    lp.push(m);
                } else {
                    self.convert_to_table(1);
                    self.add(m, lim);
                }
                true
            }
            Set::Int(s) => {
                if let Some(n) = parse_i64(m) {
                    if !s.insert(n) {
                        return false;
                    }
                    if s.len() > lim.intset_entries {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                // A non-integer member: to a listpack if everything fits, else a table.
                let maxlen = s
                    .iter()
                    .map(|n| {
                        let mut b = Vec::with_capacity(20);
                        format_i64(n, &mut b);
                        b.len()
                    })
                    .max()
                    .unwrap_or(0);
                if s.len() < lim.listpack_entries
                    && m.len() <= lim.listpack_value
                    && maxlen <= lim.listpack_value
                {
                    let mut lp = ListPack::new();
                    self.for_each(|x| lp.push(x));
                    lp.push(m);
                    *self = Set::Pack(lp);
                } else {
                    self.convert_to_table(1);
                    self.add(m, lim);
                }
                true
            }
        }
    }

    /// Removes `m`; returns whether it was present.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Int(s) => parse_i64(m).is_some_and(|n| s.remove(n)),
            Set::Pack(lp) => match lp.find(m, 1) {
                Some(off) => {
                    lp.remove(off, 1);
                    true
                }
                None => false,
            },
            Set::Table(t) => t.remove(m),
        }
    }

    /// Calls `f` with every member, in the encoding's order (sorted for an intset,
    /// insertion order for a listpack).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match self {
            Set::Int(s) => {
                let mut buf = Vec::with_capacity(20);
                for n in s.iter() {
                    buf.clear();
                    format_i64(n, &mut buf);
                    f(&buf);
                }
            }
            Set::Pack(lp) => lp.iter().for_each(|(_, m)| f(m)),
            Set::Table(t) => t.iter().for_each(f),
        }
    }

    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// The member at index `i` of a compact encoding (for random picks).
    fn compact_at(&self, i: usize) -> Vec<u8> {
        match self {
            Set::Int(s) => {
                let mut b = Vec::new();
                format_i64(s.get(i), &mut b);
                b
            }
            Set::Pack(lp) => {
                let off = lp.offset_of(i).expect("index in range");
                lp.get(off).0.to_vec()
            }
            Set::Table(_) => unreachable!("compact_at on a table"),
        }
    }

    /// A uniformly random member.
    pub fn random(&self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        Some(match self {
            Set::Table(t) => t.random().map(|m| m.to_vec()).unwrap_or_default(),
            _ => self.compact_at(fastrand::usize(..self.len())),
        })
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self) -> Option<Vec<u8>> {
        let m = self.random()?;
        self.remove(&m);
        Some(m)
    }

    /// `count` distinct members picked at random, in the set's order for the compact
    /// encodings (as Redis's lpRandomPairsUnique), arbitrary for a table.
    pub fn random_distinct(&self, count: usize) -> Vec<Vec<u8>> {
        let n = self.len();
        if count >= n {
            return self.members();
        }
        match self {
            Set::Table(t) => {
                if count * 3 > n {
                    // Many wanted: copy and drop random members (Redis's CASE 3).
                    let mut all = self.members();
                    while all.len() > count {
                        let i = fastrand::usize(..all.len());
                        all.swap_remove(i);
                    }
                    all
                } else {
                    let mut picked: ScanTable<Members> = ScanTable::with_capacity(count);
                    let mut out = Vec::with_capacity(count);
                    while out.len() < count {
                        let m = t.random().expect("non-empty");
                        if !picked.contains(m) {
                            picked.insert_new(&[m]);
                            out.push(m.to_vec());
                        }
                    }
                    out
                }
            }
            _ => {
                // Selection sampling: each index kept with probability needed/remaining.
                let mut out = Vec::with_capacity(count);
                let mut needed = count;
                let mut i = 0;
                self.for_each(|m| {
                    let remaining = n - i;
                    if needed > 0 && fastrand::usize(..remaining) < needed {
                        out.push(m.to_vec());
                        needed -= 1;
                    }
                    i += 1;
                });
                out
            }
        }
    }

    /// One step of SSCAN: compact encodings return everything with cursor 0.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match self {
            Set::Table(t) => {
                let mut cursor = cursor;
                let mut seen = 0usize;
                let mut steps = count.saturating_mul(10).max(1);
                loop {
                    cursor = t.scan(cursor, |m| {
                        seen += 1;
                        f(m)
                    });
                    steps -= 1;
                    if cursor == 0 || steps == 0 || seen >= count {
                        return cursor;
                    }
                }
            }
            _ => {
                self.for_each(f);
                0
            }
        }
    }

    /// Heap bytes owned by the set.
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Set>()
            + match self {
                Set::Int(s) => s.heap_size(),
                Set::Pack(lp) => lp.bytes(),
                Set::Table(t) => t.heap_size(),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn lim() -> SetLimits {
        SetLimits::default()
    }

    #[test]
    fn encodings_switch_at_thresholds() {
        let mut s = Set::create(b"1", 1, lim());
        for i in 0..512 {
            s.add(i.to_string().as_bytes(), lim());
        }
        assert_eq!(s.encoding(), "intset");
        s.add(b"512", lim());
        assert_eq!(s.encoding(), "hashtable");

        let mut s = Set::create(b"1", 1, lim());
        s.add(b"1", lim());
        s.add(b"a", lim());
        assert_eq!(s.encoding(), "listpack");
        for i in 0..126 {
            s.add(format!("m{i}").as_bytes(), lim());
        }
        assert_eq!(s.len(), 128);
        assert_eq!(s.encoding(), "listpack");
        s.add(b"one-more", lim());
        assert_eq!(s.encoding(), "hashtable");

        let mut s = Set::create(b"a", 1, lim());
        s.add(&[b'x'; 64], lim());
        assert_eq!(s.encoding(), "listpack");
        s.add(&[b'x'; 65], lim());
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 2);

        // An intset too big for a listpack goes straight to a table on a string.
        let mut s = Set::create(b"1", 1, lim());
        for i in 0..200 {
            s.add(i.to_string().as_bytes(), lim());
        }
        s.add(b"x", lim());
        assert_eq!(s.encoding(), "hashtable");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreeset(
            ops in proptest::collection::vec(
                (0u8..3, prop_oneof![(0i64..40).prop_map(|n| n.to_string()), "[a-c]{1,3}", "[a-z]{60,70}"]),
                0..300),
            small in any::<bool>(),
        ) {
            let lim = if small {
                SetLimits { intset_entries: 8, listpack_entries: 8, listpack_value: 64 }
            } else {
                SetLimits::default()
            };
            let mut s: Option<Set> = None;
            let mut model = BTreeSet::new();
            for (op, m) in ops {
                let m = m.into_bytes();
                match op {
                    0 | 1 => {
                        let set = s.get_or_insert_with(|| Set::create(&m, 1, lim));
                        prop_assert_eq!(set.add(&m, lim), model.insert(m.clone()));
                    }
                    _ => {
                        if let Some(set) = s.as_mut() {
                            prop_assert_eq!(set.remove(&m), model.remove(&m));
                        }
                    }
                }
                if let Some(set) = &s {
                    prop_assert_eq!(set.len(), model.len());
                    let got: BTreeSet<Vec<u8>> = set.members().into_iter().collect();
                    prop_assert_eq!(&got, &model);
                    for m in &model {
                        prop_assert!(set.contains(m));
                    }
                    let k = set.len() / 2;
                    let picked = set.random_distinct(k);
                    let distinct: BTreeSet<_> = picked.iter().cloned().collect();
                    prop_assert_eq!(distinct.len(), k);
                    prop_assert!(distinct.is_subset(&model));
                }
            }
        }
    }
}
