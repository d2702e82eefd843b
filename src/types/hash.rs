//! The hash type: field → value, with Redis 7.4's per-field expiry.
//!
//! Two encodings, switched where Redis switches: a `listpack` of alternating
//! field/value entries while the hash has at most `hash-max-listpack-entries` fields
//! and no field or value longer than `hash-max-listpack-value` bytes, a `hashtable`
//! (`ScanTable`, so HSCAN keeps its guarantee) beyond. Conversion is one-way.
//!
//! Field expiry times live in a side index allocated only once a field gets a TTL, so
//! hashes that never use HEXPIRE pay one null pointer. The index caches a lower bound
//! of its earliest expiry, which makes "is anything due?" O(1) on every access; a
//! listpack hash that has ever had a TTL reports `listpackex`, as Redis 7.4 does.

use std::collections::HashMap;

use super::listpack::ListPack;
use super::scantable::{Members, Pairs, ScanTable};

/// The configured thresholds (read from the config for each command).
#[derive(Debug, Clone, Copy)]
pub struct HashLimits {
    pub listpack_entries: usize,
    pub listpack_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            listpack_entries: 128,
            listpack_value: 64,
        }
    }
}

#[derive(Debug, Clone)]
enum Repr {
    Pack(ListPack),
    // Boxed: a table header is 48 bytes and every small hash would pay for it.
    Table(Box<ScanTable<Pairs>>),
}

/// Expiry times of the fields that have one.
#[derive(Debug, Clone, Default)]
struct FieldTtls {
    at: HashMap<Box<[u8]>, i64, foldhash::fast::RandomState>,
    /// No field expires before this (a lower bound; exact after a purge).
    next: i64,
}

#[derive(Debug, Clone)]
pub struct Hash {
    repr: Repr,
    ttl: Option<Box<FieldTtls>>,
}

impl Default for Hash {
    fn default() -> Self {
        Hash::new()
    }
}

impl Hash {
    pub fn new() -> Hash {
        Hash {
            repr: Repr::Pack(ListPack::new()),
            ttl: None,
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(lp) => lp.len() / 2,
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hash table of a big hash (DEBUG HTSTATS-KEY).
    pub fn table(&self) -> Option<&ScanTable<Pairs>> {
        match &self.repr {
            Repr::Table(t) => Some(t),
            Repr::Pack(_) => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match (&self.repr, &self.ttl) {
            (Repr::Pack(_), None) => "listpack",
            (Repr::Pack(_), Some(_)) => "listpackex",
            (Repr::Table(_), _) => "hashtable",
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Pack(lp) => lp.find(field, 2).map(|off| {
                let next = lp.get(off).1;
                lp.get(next).0
            }),
            Repr::Table(t) => t.get(field).map(|e| Pairs::split(e).1),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        match &self.repr {
            Repr::Pack(lp) => lp.find(field, 2).is_some(),
            Repr::Table(t) => t.contains(field),
        }
    }

    /// A compact hash about to take `new_fields` fields in one command is converted up
    /// front when they would be too many for it, even if some are already there (Redis
    /// 7.4's hashTypeTryConversion).
    pub fn prepare_for(&mut self, new_fields: usize, lim: HashLimits) {
        if new_fields > lim.listpack_entries {
            self.convert_to_table();
        }
    }

    fn convert_to_table(&mut self) {
        if let Repr::Pack(lp) = &self.repr {
            let mut t = ScanTable::with_capacity(lp.len() / 2 + 1);
            let mut it = lp.iter();
            while let (Some((_, f)), Some((_, v))) = (it.next(), it.next()) {
                let mut hdr = [0u8; 10];
                t.insert_new(&Pairs::parts(&mut hdr, f, v));
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }

    /// Sets `field` to `value`, dropping any TTL the field had (an overwrite clears it,
    /// as in Redis). Returns whether the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: HashLimits) -> bool {
        if let Repr::Pack(_) = self.repr {
            if field.len() > lim.listpack_value || value.len() > lim.listpack_value {
                self.convert_to_table();
            }
        }
        if let Some(ttl) = &mut self.ttl {
            ttl.at.remove(field);
        }
        let new = match &mut self.repr {
            Repr::Pack(lp) => match lp.find(field, 2) {
                Some(off) => {
                    let next = lp.get(off).1;
                    lp.replace(next, value);
                    false
                }
                None => {
                    lp.push(field);
                    lp.push(value);
                    true
                }
            },
            Repr::Table(t) => {
                let mut hdr = [0u8; 10];
                t.upsert(field, &Pairs::parts(&mut hdr, field, value))
            }
        };
        if new && matches!(self.repr, Repr::Pack(_)) && self.len() > lim.listpack_entries {
            self.convert_to_table();
        }
        new
    }

    /// Removes `field`; returns whether it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.repr {
            Repr::Pack(lp) => match lp.find(field, 2) {
                Some(off) => {
                    lp.remove(off, 2);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(field),
        };
        if removed {
            if let Some(ttl) = &mut self.ttl {
                ttl.at.remove(field);
            }
        }
        removed
    }

    /// Calls `f` with every (field, value), in the encoding's order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.repr {
            Repr::Pack(lp) => {
                let mut it = lp.iter();
                while let (Some((_, k)), Some((_, v))) = (it.next(), it.next()) {
                    f(k, v);
                }
            }
            Repr::Table(t) => t.iter().map(Pairs::split).for_each(|(k, v)| f(k, v)),
        }
    }

    pub fn pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|k, v| out.push((k.to_vec(), v.to_vec())));
        out
    }

    fn pack_pair(lp: &ListPack, i: usize) -> (Vec<u8>, Vec<u8>) {
        let off = lp.offset_of(i * 2).expect("index in range");
        let (k, next) = lp.get(off);
        (k.to_vec(), lp.get(next).0.to_vec())
    }

    /// A uniformly random (field, value).
    pub fn random(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        if self.is_empty() {
            return None;
        }
        match &self.repr {
            Repr::Pack(lp) => Some(Self::pack_pair(lp, fastrand::usize(..self.len()))),
            Repr::Table(t) => t
                .random()
                .map(Pairs::split)
                .map(|(k, v)| (k.to_vec(), v.to_vec())),
        }
    }

    /// `count` distinct random pairs (count < len): in hash order for a listpack
    /// (selection sampling, as lpRandomPairsUnique), by Redis's CASE 3 / CASE 4 for a
    /// table.
    pub fn random_distinct(&self, count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let n = self.len();
        if count >= n {
            return self.pairs();
        }
        match &self.repr {
            Repr::Table(t) => {
                if count * 3 > n {
                    let mut all = self.pairs();
                    while all.len() > count {
                        let i = fastrand::usize(..all.len());
                        all.swap_remove(i);
                    }
                    all
                } else {
                    let mut picked: ScanTable<Members> = ScanTable::with_capacity(count);
                    let mut out = Vec::with_capacity(count);
                    while out.len() < count {
                        let (k, v) = Pairs::split(t.random().expect("non-empty"));
                        if !picked.contains(k) {
                            picked.insert_new(&[k]);
                            out.push((k.to_vec(), v.to_vec()));
                        }
                    }
                    out
                }
            }
            Repr::Pack(_) => {
                let mut out = Vec::with_capacity(count);
                let mut needed = count;
                let mut i = 0;
                self.for_each(|k, v| {
                    if needed > 0 && fastrand::usize(..n - i) < needed {
                        out.push((k.to_vec(), v.to_vec()));
                        needed -= 1;
                    }
                    i += 1;
                });
                out
            }
        }
    }

    /// One step of HSCAN: a listpack returns everything with cursor 0.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Pack(_) => {
                self.for_each(f);
                0
            }
            Repr::Table(t) => {
                let mut cursor = cursor;
                let mut seen = 0usize;
                let mut steps = count.saturating_mul(10).max(1);
                loop {
                    cursor = t.scan(cursor, |e| {
                        seen += 1;
                        let (k, v) = Pairs::split(e);
                        f(k, v)
                    });
                    steps -= 1;
                    if cursor == 0 || steps == 0 || seen >= count {
                        return cursor;
                    }
                }
            }
        }
    }

    // ----- field expiry -------------------------------------------------------------

    /// The field's expiry time (unix ms), if it has one.
    pub fn expire_of(&self, field: &[u8]) -> Option<i64> {
        self.ttl.as_ref().and_then(|t| t.at.get(field).copied())
    }

    /// Sets the expiry of an existing field.
    pub fn set_expire(&mut self, field: &[u8], at: i64) {
        debug_assert!(self.contains(field));
        let ttl = self.ttl.get_or_insert_with(|| {
            Box::new(FieldTtls {
                at: HashMap::default(),
                next: i64::MAX,
            })
        });
        ttl.at.insert(field.into(), at);
        ttl.next = ttl.next.min(at);
    }

    /// Removes the field's expiry; returns whether it had one.
    pub fn persist(&mut self, field: &[u8]) -> bool {
        self.ttl
            .as_mut()
            .is_some_and(|t| t.at.remove(field).is_some())
    }

    /// Whether any field carries an expiry.
    pub fn has_field_ttls(&self) -> bool {
        self.ttl.as_ref().is_some_and(|t| !t.at.is_empty())
    }

    /// The earliest field expiry, exactly.
    pub fn next_expire(&self) -> Option<i64> {
        self.ttl.as_ref().and_then(|t| t.at.values().min().copied())
    }

    /// Deletes the fields whose time has come (expiry <= `now`) and returns them.
    /// O(1) when nothing is due, thanks to the cached lower bound.
    pub fn expire_due(&mut self, now: i64) -> Vec<Vec<u8>> {
        let due: Vec<Box<[u8]>> = match &mut self.ttl {
            Some(t) if t.next <= now => {
                // Earliest first, as Redis deletes (and propagates) them.
                let mut due: Vec<(i64, Box<[u8]>)> =
                    t.at.iter()
                        .filter(|(_, &at)| at <= now)
                        .map(|(f, &at)| (at, f.clone()))
                        .collect();
                due.sort_unstable();
                let due: Vec<Box<[u8]>> = due.into_iter().map(|(_, f)| f).collect();
                t.next =
                    t.at.values()
                        .filter(|&&at| at > now)
                        .min()
                        .copied()
                        .unwrap_or(i64::MAX);
                due
            }
            _ => return Vec::new(),
        };
        due.into_iter()
            .map(|f| {
                self.remove(&f);
                f.into_vec()
            })
            .collect()
    }

    /// Whether `field` has an expiry at or before `now` (expired, not yet deleted).
    pub fn is_expired(&self, field: &[u8], now: i64) -> bool {
        self.ttl
            .as_ref()
            .is_some_and(|t| t.next <= now && t.at.get(field).is_some_and(|&at| at <= now))
    }

    /// Calls `f` with every (field, value) that has not expired by `now`: the view of
    /// HGETALL, HKEYS, HVALS and HSCAN, which skip expired fields without deleting them.
    pub fn for_each_live(&self, now: i64, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.ttl {
            Some(t) if t.next <= now => self.for_each(|k, v| {
                if t.at.get(k).is_none_or(|&at| at > now) {
                    f(k, v)
                }
            }),
            _ => self.for_each(f),
        }
    }

    /// Deletes those of `fields` that expired by `now` and returns them (the lazy
    /// expiry of a field when it is read by name, as HGET does).
    pub fn expire_named(&mut self, fields: &[&[u8]], now: i64) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for f in fields {
            if self.is_expired(f, now) && !out.iter().any(|o| o == f) {
                self.remove(f);
                out.push(f.to_vec());
            }
        }
        out
    }

    /// Heap bytes owned by the hash.
    pub fn heap_size(&self) -> usize {
        let repr = match &self.repr {
            Repr::Pack(lp) => lp.bytes(),
            Repr::Table(t) => t.heap_size(),
        };
        let ttl = self.ttl.as_ref().map_or(0, |t| {
            std::mem::size_of::<FieldTtls>()
                + t.at.capacity() * (std::mem::size_of::<(Box<[u8]>, i64)>() + 1)
                + t.at.keys().map(|k| k.len()).sum::<usize>()
        });
        std::mem::size_of::<Hash>() + repr + ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap as Model;

    #[test]
    fn encodings_switch_at_thresholds() {
        let lim = HashLimits::default();
        let mut h = Hash::new();
        for i in 0..128 {
            h.set(format!("f{i}").as_bytes(), b"v", lim);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f0", b"w", lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f128", b"v", lim);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 129);

        let mut h = Hash::new();
        h.set(&[b'f'; 64], &[b'v'; 64], lim);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"x", &[b'v'; 65], lim);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(&[b'f'; 64]), Some(&[b'v'; 64][..]));
        // One-way: removing fields does not convert back.
        h.remove(b"x");
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn field_expiry() {
        let lim = HashLimits::default();
        let mut h = Hash::new();
        h.set(b"a", b"1", lim);
        h.set(b"b", b"2", lim);
        h.set_expire(b"a", 100);
        assert_eq!(h.encoding(), "listpackex");
        assert_eq!(h.expire_of(b"a"), Some(100));
        assert!(h.expire_due(99).is_empty());
        assert_eq!(h.expire_due(100), vec![b"a".to_vec()]);
        assert!(!h.contains(b"a"));
        h.set_expire(b"b", 200);
        h.set(b"b", b"3", lim);
        assert_eq!(h.expire_of(b"b"), None);
        assert!(h.expire_due(1000).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_hashmap(
            ops in proptest::collection::vec(
                (0u8..3, "[a-e]{1,2}", prop_oneof!["[0-9]{0,3}", "[a-z]{60,70}"]),
                0..200),
            small in any::<bool>(),
        ) {
            let lim = if small {
                HashLimits { listpack_entries: 8, listpack_value: 64 }
            } else {
                HashLimits::default()
            };
            let mut h = Hash::new();
            let mut model: Model<Vec<u8>, Vec<u8>> = Model::new();
            for (op, f, v) in ops {
                let (f, v) = (f.into_bytes(), v.into_bytes());
                match op {
                    0 | 1 => prop_assert_eq!(h.set(&f, &v, lim), model.insert(f.clone(), v.clone()).is_none()),
                    _ => prop_assert_eq!(h.remove(&f), model.remove(&f).is_some()),
                }
                prop_assert_eq!(h.len(), model.len());
                for (k, v) in &model {
                    prop_assert_eq!(h.get(k), Some(&v[..]));
                }
                let got: Model<Vec<u8>, Vec<u8>> = h.pairs().into_iter().collect();
                prop_assert_eq!(&got, &model);
                // A full scan returns every pair.
                let mut scanned = Model::new();
                let mut c = 0;
                loop {
                    c = h.scan(c, 3, |k, v| { scanned.insert(k.to_vec(), v.to_vec()); });
                    if c == 0 { break; }
                }
                prop_assert_eq!(&scanned, &model);
            }
        }
    }
}
