//! Which hashes have fields with an expiry, ordered by when the earliest one is due:
//! what the active expiry of hash fields (Redis 7.4's `db->hexpires`) walks.
//!
//! Entries are hints, (time, key) per database: a hash is registered when it gets a
//! field TTL earlier than any it had. The cron pops due hints, expires the key's due
//! fields and re-registers it at its next expiry. A hint whose key was deleted,
//! renamed or overwritten is simply dropped when popped, so no other code path has to
//! keep this index exact. Whatever puts a hash with field TTLs under a new name or
//! database (RENAME, MOVE, COPY, RESTORE, loading) registers it there; SWAPDB swaps
//! the databases' hints with their contents.

use std::collections::BTreeSet;

#[derive(Default, Debug)]
pub struct FieldExpiry {
    due: Vec<BTreeSet<(i64, Vec<u8>)>>,
}

impl FieldExpiry {
    /// Registers `key` in `db` as having a field that expires at `at`.
    pub fn register(&mut self, db: usize, at: i64, key: &[u8]) {
        if self.due.len() <= db {
            self.due.resize_with(db + 1, BTreeSet::new);
        }
        self.due[db].insert((at, key.to_vec()));
    }

    /// Pops a key of `db` whose registered time is at or before `now`.
    pub fn pop_due(&mut self, db: usize, now: i64) -> Option<Vec<u8>> {
        let set = self.due.get_mut(db)?;
        match set.first() {
            Some((at, _)) if *at <= now => set.pop_first().map(|(_, k)| k),
            _ => None,
        }
    }

    /// Exchanges two databases' hints (SWAPDB moves the hashes with them).
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        let n = a.max(b) + 1;
        if self.due.len() < n {
            self.due.resize_with(n, BTreeSet::new);
        }
        self.due.swap(a, b);
    }

    /// The registered keys of `db` for which `live` holds, each once: with `live`
    /// "is a hash with a field TTL", INFO's `subexpiry` (every such hash is
    /// registered; stale hints are skipped). Costs the hints, not the keyspace.
    pub fn count_keys(&self, db: usize, mut live: impl FnMut(&[u8]) -> bool) -> usize {
        let Some(set) = self.due.get(db) else {
            return 0;
        };
        let mut seen = std::collections::HashSet::with_capacity(set.len());
        set.iter()
            .filter(|(_, k)| seen.insert(k.as_slice()) && live(k))
            .count()
    }

    /// Databases with registered hashes.
    pub fn dbs(&self) -> usize {
        self.due.len()
    }

    pub fn is_empty(&self) -> bool {
        self.due.iter().all(|s| s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order() {
        let mut f = FieldExpiry::default();
        f.register(1, 20, b"b");
        f.register(1, 10, b"a");
        assert_eq!(f.pop_due(0, 100), None);
        assert_eq!(f.pop_due(1, 5), None);
        assert_eq!(f.pop_due(1, 15), Some(b"a".to_vec()));
        assert_eq!(f.pop_due(1, 15), None);
        assert_eq!(f.pop_due(1, 20), Some(b"b".to_vec()));
        assert!(f.is_empty());
    }

    #[test]
    fn counts_each_live_key_once() {
        let mut f = FieldExpiry::default();
        f.register(0, 10, b"a");
        f.register(0, 5, b"a");
        f.register(0, 7, b"stale");
        assert_eq!(f.count_keys(0, |k| k != b"stale"), 1);
        assert_eq!(f.count_keys(4, |_| true), 0);
    }

    #[test]
    fn swap_moves_hints() {
        let mut f = FieldExpiry::default();
        f.register(0, 10, b"a");
        f.swap_dbs(0, 3);
        assert_eq!(f.pop_due(0, 100), None);
        assert_eq!(f.pop_due(3, 100), Some(b"a".to_vec()));
    }
}
