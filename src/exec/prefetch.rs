//! Prefetching ahead of a batch of commands (a pipeline's, net/mod.rs, or the first
//! commands of an I/O-thread turn's clients, net/io_phases.rs): the cache lines their
//! lookups will touch are asked for together, a level at a time, so that their misses
//! overlap instead of following one another (Valkey 8's interleaved prefetch).

use super::Executor;
use crate::keyspace::table::EntryRef;
use crate::keyspace::value::{ObjRef, ValueRef};
use crate::types::set::Set;

/// Whether command `name` (any letter case) looks its third argument up as a member
/// of a set's or a field of a hash's hash table (SADD, HSET, ...). Letters are folded by
/// setting bit 5, which maps a byte onto a lowercase letter only if it is that letter
/// in either case, so the test is exact for these all-letter names.
fn looks_up_member(name: &[u8]) -> bool {
    const LONGEST: usize = 12;
    // Every such name starts with S or H: most commands are turned away by their
    // length or first letter.
    if !(4..=LONGEST).contains(&name.len()) || !matches!(name[0] | 0x20, b's' | b'h') {
        return false;
    }
    let mut lower = [0u8; LONGEST];
    for (l, &c) in lower.iter_mut().zip(name) {
        *l = c | 0x20;
    }
    matches!(
        &lower[..name.len()],
        b"sadd"
            | b"srem"
            | b"sismember"
            | b"smismember"
            | b"hset"
            | b"hsetnx"
            | b"hget"
            | b"hmget"
            | b"hmset"
            | b"hdel"
            | b"hexists"
            | b"hincrby"
            | b"hincrbyfloat"
            | b"hstrlen"
    )
}

impl Executor {
    /// Keys (or members) a table needs before prefetching into it pays: a smaller one
    /// stays in cache under use, and its prefetch would only add instructions
    /// (`prefetch-min-keys`; -1: `util::cache_resident_keys`).
    fn prefetch_min_keys(&self) -> usize {
        usize::try_from(self.config.prefetch_min_keys)
            .unwrap_or_else(|_| crate::util::cache_resident_keys())
    }

    /// Prefetches the key table entries that keys `keys` will look up
    /// (`KeyTable::prefetch`), in database `db`, when its table is big enough to miss.
    pub fn prefetch_in_db<'k>(&self, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        if let Some(d) = self.ks.dbs.get(db) {
            if d.table.len() >= self.prefetch_min_keys() {
                d.table.prefetch(keys);
            }
        }
    }

    /// Prefetches for the next `n` commands of client `slot` (at most a batch of them),
    /// in the database it has selected now; `arg(i, j)` is command `i`'s argument `j`.
    /// First their keys' entries (`KeyTable::prefetch`), then, for those that look a
    /// member up in a set or hash kept as a hash table, that table's bucket and what
    /// the bucket points to: a pipeline of SADDs or HSETs into one big collection
    /// misses there, not in the key table. Each level only where its table is big
    /// enough to miss (`prefetch_min_keys`). A small key table is not prefetched, and a
    /// member command's collection is then found by a plain lookup (which hits the
    /// cache), once for a run of commands on the same key; a big key table's guesses
    /// are used as they are (a key not guessed gets no member prefetch).
    pub fn prefetch_batch<'k>(
        &self,
        slot: usize,
        n: usize,
        arg: impl Fn(usize, usize) -> Option<&'k [u8]>,
    ) {
        let Some(d) = self.ks.dbs.get(self.client(slot).db) else {
            return;
        };
        let n = n.min(crate::keyspace::table::PREFETCH_BATCH);
        let min = self.prefetch_min_keys();
        // A command without a key (PING) holds its place with an empty one.
        let likely = (d.table.len() >= min).then(|| {
            d.table
                .prefetch((0..n).map(|i| arg(i, 1).unwrap_or_default()))
        });
        let mut words: smallvec::SmallVec<[*const usize; crate::keyspace::table::PREFETCH_BATCH]> =
            smallvec::SmallVec::new();
        // The collection found for the last member command without a guess, by key.
        let mut last: Option<(&[u8], Option<EntryRef<'_>>)> = None;
        for i in 0..n {
            if words.len() == words.inline_size() {
                break;
            }
            if !arg(i, 0).is_some_and(looks_up_member) {
                continue;
            }
            let (Some(key), Some(member)) = (arg(i, 1), arg(i, 2)) else {
                continue;
            };
            let entry = match &likely {
                Some(likely) => likely.entry(i, key),
                None => match last {
                    Some((k, e)) if k == key => e,
                    _ => {
                        let e = d.table.get(key);
                        last = Some((key, e));
                        e
                    }
                },
            };
            let Some(entry) = entry else {
                continue;
            };
            let word = match entry.value() {
                ValueRef::Obj(ObjRef::Set(Set::Table(t))) if t.len() >= min => {
                    t.prefetch_bucket(member)
                }
                ValueRef::Obj(ObjRef::Hash(h)) => match h.table() {
                    Some(t) if t.len() >= min => t.prefetch_bucket(member),
                    _ => continue,
                },
                _ => continue,
            };
            words.push(word);
        }
        for &w in &words {
            // SAFETY: each word came from `prefetch_bucket` just above, and nothing
            // has changed the keyspace since (`&self`).
            unsafe { crate::types::scantable::prefetch_bucket_contents(w) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::looks_up_member;

    #[test]
    fn member_commands_are_told_apart_in_any_case() {
        for name in [
            "sadd",
            "SREM",
            "SisMember",
            "smismember",
            "hset",
            "HSETNX",
            "hget",
            "hmget",
            "hmset",
            "hdel",
            "hexists",
            "hincrby",
            "HINCRBYFLOAT",
            "hstrlen",
        ] {
            assert!(looks_up_member(name.as_bytes()), "{name}");
        }
        for name in [
            "",
            "set",
            "get",
            "sad",
            "saddx",
            "smembers",
            "hgetall",
            "hincrbyfloatx",
            "lpush",
            "zadd",
            "sadD\0",
            "s@dd",
            "hse\x14",
        ] {
            assert!(!looks_up_member(name.as_bytes()), "{name}");
        }
        // Bytes that are not letters never fold onto one.
        assert!(!looks_up_member(b"\x13add"));
        assert!(!looks_up_member(b"h\x05et"));
    }
}
