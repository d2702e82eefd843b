//! Prefetching ahead of a batch of commands (a pipeline's, net/mod.rs, or the first
//! commands of an I/O-thread turn's clients, net/io_phases.rs): the cache lines their
//! lookups will touch are asked for together, a level at a time, so that their misses
//! overlap instead of following one another (Valkey 8's interleaved prefetch).

use super::Executor;
use crate::keyspace::value::{ObjRef, ValueRef};
use crate::types::set::Set;

/// Commands whose third argument is a member (or field) looked up in a set's (or a
/// hash's) hash table.
const MEMBER_COMMANDS: &[&[u8]] = &[
    b"sadd",
    b"srem",
    b"sismember",
    b"smismember",
    b"hset",
    b"hsetnx",
    b"hget",
    b"hmget",
    b"hmset",
    b"hdel",
    b"hexists",
    b"hincrby",
    b"hincrbyfloat",
    b"hstrlen",
];

impl Executor {
    /// Prefetches the key table entries the client's next commands will look up
    /// (`KeyTable::prefetch`), in the database it has selected now.
    pub fn prefetch_keys<'k>(&self, slot: usize, keys: impl Iterator<Item = &'k [u8]>) {
        self.prefetch_in_db(self.client(slot).db, keys);
    }

    /// `prefetch_keys` in database `db`.
    pub fn prefetch_in_db<'k>(&self, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        if let Some(d) = self.ks.dbs.get(db) {
            d.table.prefetch(keys);
        }
    }

    /// After `prefetch_keys`: for the commands of `cmds` (name, key, third argument)
    /// that look a member up in a set or hash kept as a hash table, that table's
    /// bucket, then what the bucket points to. A pipeline of SADDs or HSETs into one
    /// big collection misses there, not in the key table.
    pub fn prefetch_members<'k>(
        &self,
        slot: usize,
        cmds: impl Iterator<Item = (&'k [u8], &'k [u8], &'k [u8])>,
    ) {
        let Some(d) = self.ks.dbs.get(self.client(slot).db) else {
            return;
        };
        let mut words: smallvec::SmallVec<[*const usize; crate::keyspace::table::PREFETCH_BATCH]> =
            smallvec::SmallVec::new();
        for (name, key, member) in cmds {
            if words.len() == words.inline_size() {
                break;
            }
            // Every member command starts with S or H: others skip the list.
            let first = name.first().map_or(0, |b| b | 0x20);
            if !matches!(first, b's' | b'h')
                || !MEMBER_COMMANDS.iter().any(|c| name.eq_ignore_ascii_case(c))
            {
                continue;
            }
            let Some(entry) = d.table.get(key) else {
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
    #[test]
    fn member_commands_start_with_s_or_h() {
        // `prefetch_members` skips the list for names starting otherwise.
        for name in super::MEMBER_COMMANDS {
            assert!(matches!(name[0], b's' | b'h'), "{name:?}");
        }
    }
}
