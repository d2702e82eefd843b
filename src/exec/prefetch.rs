//! Prefetching ahead of a batch of commands (a pipeline's, net/mod.rs, or the first
//! commands of an I/O-thread turn's clients, net/io_phases.rs): the cache lines their
//! lookups will touch are asked for together, a level at a time, so that their misses
//! overlap instead of following one another (Valkey 8's interleaved prefetch).

use super::Executor;
use crate::keyspace::value::{ObjRef, ValueRef};
use crate::types::set::Set;

/// Whether command `name` (any letter case) looks its third argument up as a member
/// of a set's or a field of a hash's hash table (SADD, HSET, ...). Letters are folded by
/// setting bit 5, which maps a byte onto a lowercase letter only if it is that letter
/// in either case, so the test is exact for these all-letter names.
fn looks_up_member(name: &[u8]) -> bool {
    const LONGEST: usize = 12;
    if !(4..=LONGEST).contains(&name.len()) {
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

/// A command of a batch to prefetch for: its name, key and third argument (if any).
pub type PrefetchCmd<'k> = (&'k [u8], &'k [u8], Option<&'k [u8]>);

impl Executor {
    /// Prefetches the key table entries that keys `keys` will look up
    /// (`KeyTable::prefetch`), in database `db`.
    pub fn prefetch_in_db<'k>(&self, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        if let Some(d) = self.ks.dbs.get(db) {
            d.table.prefetch(keys);
        }
    }

    /// Prefetches for the next commands of client `slot` (at most a batch of them), in
    /// the database it has selected now: their keys' entries (`KeyTable::prefetch`),
    /// then, for those that look a member up in a set or hash kept as a hash table,
    /// that table's bucket and what the bucket points to. A pipeline of SADDs or HSETs
    /// into one big collection misses there, not in the key table. The key table's
    /// guesses are used as they are (a key not guessed gets no member prefetch).
    pub fn prefetch_batch(&self, slot: usize, cmds: &[PrefetchCmd<'_>]) {
        let Some(d) = self.ks.dbs.get(self.client(slot).db) else {
            return;
        };
        let likely = d.table.prefetch(cmds.iter().map(|c| c.1));
        let mut words: smallvec::SmallVec<[*const usize; crate::keyspace::table::PREFETCH_BATCH]> =
            smallvec::SmallVec::new();
        for (i, &(name, key, member)) in cmds.iter().enumerate() {
            let Some(member) = member else {
                continue;
            };
            if words.len() == words.inline_size() {
                break;
            }
            if !looks_up_member(name) {
                continue;
            }
            let Some(entry) = likely.entry(i, key) else {
                continue;
            };
            let word = match entry.value() {
                ValueRef::Obj(ObjRef::Set(Set::Table(t))) => t.prefetch_bucket(member),
                ValueRef::Obj(ObjRef::Hash(h)) => match h.table() {
                    Some(t) => t.prefetch_bucket(member),
                    None => continue,
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
