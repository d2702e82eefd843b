//! DUMP payloads of big collections, built a slice at a time.
//!
//! Serializing a million-field hash takes a few hundred milliseconds; done at once on
//! the event loop (as Redis's MIGRATE does) it stalls every client for that long.
//! `SlicedDump` writes such a value in steps of a bounded number of elements and
//! resumes where it stopped: a SCAN cursor for hash and set tables (a table only
//! rehashes on insert or remove, so one nobody writes to is visited exactly once), a
//! rank for sorted sets, a node index for lists. The caller keeps writers away from
//! the key between steps (MIGRATE's key lock); each step still checks that it is
//! handed the same collection with the same length, and reports `Changed` otherwise
//! (a field expired, the dataset was reloaded), so the caller can fall back to a
//! whole encoding. The CRC-64 is folded in step by step, so finishing costs nothing
//! proportional to the payload.

use super::{
    write_hash_field, write_hash_head, write_list_node, write_zset_member, Crc64Digest, HashLayout,
    Out, Plain, RDB_VERSION, TYPE_LIST_QUICKLIST_2, TYPE_SET, TYPE_ZSET_2,
};
use crate::keyspace::{ObjRef, ValueRef};

/// Below this many elements a value is encoded whole (it takes well under a
/// millisecond).
pub const MIN_ELEMENTS: usize = 4096;

/// Where the next step resumes.
#[derive(Debug, Clone, Copy)]
enum Resume {
    /// A hash or set table's SCAN cursor (0 at the start).
    Cursor(u64),
    /// The next ascending rank of a sorted set.
    Rank(usize),
    /// The next list node.
    Node(usize),
    Done,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Elements remain.
    More,
    /// The value is written; `finish` gives the payload.
    Done,
    /// The value is not the one the encoding began with (another object, or another
    /// length): the bytes so far are useless.
    Changed,
}

/// The payload is kept in pieces of about this size: one vector doubling to tens of
/// megabytes would copy itself on the event loop at each doubling.
const PIECE: usize = 1 << 20;

/// A DUMP payload in the making.
pub struct SlicedDump {
    /// Pieces written, each at least `PIECE` long.
    done: Vec<Vec<u8>>,
    /// The piece being written (the type byte and value bytes, at first).
    out: Vec<u8>,
    digest: Crc64Digest,
    /// How much of `out` the digest has seen.
    hashed: usize,
    min_version: u16,
    at: Resume,
    hash_layout: HashLayout,
    /// The collection's address and length when the encoding began.
    identity: (usize, usize),
}

/// A collection's address and length: the same object of the same length is taken
/// to hold the same elements (writers are kept away by the caller).
fn identity(v: ValueRef<'_>) -> Option<(usize, usize)> {
    let ValueRef::Obj(o) = v else {
        return None;
    };
    Some(match o {
        ObjRef::Hash(h) => (h as *const _ as usize, h.len()),
        ObjRef::Set(s) => (s as *const _ as usize, s.len()),
        ObjRef::ZSet(z) => (z as *const _ as usize, z.len()),
        ObjRef::List(l) => (l as *const _ as usize, l.len()),
        ObjRef::Stream(s) => (s as *const _ as usize, s.len() as usize),
    })
}

impl SlicedDump {
    /// Starts the payload of `v` when it is a collection of at least `min_elements`
    /// in an encoding that can be walked in steps (hash and set tables, skiplist
    /// sorted sets, lists); None for anything else, which is encoded whole.
    pub fn begin(v: ValueRef<'_>, min_elements: usize) -> Option<SlicedDump> {
        let ValueRef::Obj(o) = v else {
            return None;
        };
        let mut out = vec![0u8];
        let mut plain = Plain {
            out: &mut out,
            compress: true,
        };
        let mut hash_layout = HashLayout(None);
        let (rdb_type, min_version, at) = match o {
            ObjRef::Hash(h) if h.len() >= min_elements && h.table().is_some() => {
                let (t, v, layout) = write_hash_head(&mut plain, h);
                hash_layout = layout;
                (t, v, Resume::Cursor(0))
            }
            ObjRef::Set(s) if s.len() >= min_elements && s.table().is_some() => {
                Out::length(&mut plain, s.len() as u64);
                (TYPE_SET, RDB_VERSION, Resume::Cursor(0))
            }
            ObjRef::ZSet(z) if z.len() >= min_elements && z.encoding() == "skiplist" => {
                Out::length(&mut plain, z.len() as u64);
                (TYPE_ZSET_2, RDB_VERSION, Resume::Rank(0))
            }
            ObjRef::List(l) if l.len() >= min_elements && l.node_count() > 1 => {
                Out::length(&mut plain, l.node_count() as u64);
                (TYPE_LIST_QUICKLIST_2, RDB_VERSION, Resume::Node(0))
            }
            _ => return None,
        };
        out[0] = rdb_type;
        Some(SlicedDump {
            done: Vec::new(),
            out,
            digest: super::crc64_digest(),
            hashed: 0,
            min_version,
            at,
            hash_layout,
            identity: identity(v)?,
        })
    }

    /// Writes about `budget` more elements of `v`, which must be the value `begin`
    /// was given.
    pub fn step(&mut self, v: ValueRef<'_>, budget: usize) -> Step {
        if identity(v) != Some(self.identity) {
            return Step::Changed;
        }
        let budget = budget.max(1);
        let layout = self.hash_layout;
        let mut plain = Plain {
            out: &mut self.out,
            compress: true,
        };
        let ValueRef::Obj(o) = v else {
            return Step::Changed;
        };
        self.at = match (self.at, o) {
            (Resume::Done, _) => Resume::Done,
            (Resume::Cursor(c), ObjRef::Hash(h)) => {
                match h.scan(c, budget, |f, x| {
                    write_hash_field(&mut plain, h, layout, f, x)
                }) {
                    0 => Resume::Done,
                    c => Resume::Cursor(c),
                }
            }
            (Resume::Cursor(c), ObjRef::Set(s)) => {
                match s.scan(c, budget, |m| Out::string(&mut plain, m)) {
                    0 => Resume::Done,
                    c => Resume::Cursor(c),
                }
            }
            (Resume::Rank(r), ObjRef::ZSet(z)) => {
                let end = r.saturating_add(budget).min(z.len());
                z.for_each_rank(r, end, false, |m, s| write_zset_member(&mut plain, m, s));
                if end >= z.len() {
                    Resume::Done
                } else {
                    Resume::Rank(end)
                }
            }
            (Resume::Node(mut i), ObjRef::List(l)) => {
                let mut written = 0;
                while written < budget && i < l.node_count() {
                    l.for_each_node_in(i, i + 1, |n, count| {
                        write_list_node(&mut plain, n);
                        written += count;
                    });
                    i += 1;
                }
                if i >= l.node_count() {
                    Resume::Done
                } else {
                    Resume::Node(i)
                }
            }
            _ => return Step::Changed,
        };
        self.digest.update(&self.out[self.hashed..]);
        self.hashed = self.out.len();
        if self.out.len() >= PIECE {
            let next = Vec::with_capacity(PIECE + PIECE / 4);
            self.done.push(std::mem::replace(&mut self.out, next));
            self.hashed = 0;
        }
        match self.at {
            Resume::Done => Step::Done,
            _ => Step::More,
        }
    }

    /// The DUMP payload (type, value, RDB version, CRC-64) in pieces, once `step`
    /// said `Done`.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        debug_assert!(matches!(self.at, Resume::Done));
        self.out.extend_from_slice(&self.min_version.to_le_bytes());
        self.digest.update(&self.out[self.hashed..]);
        let crc = self.digest.finalize();
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.done.push(self.out);
        self.done
    }
}
