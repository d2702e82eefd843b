//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a SHA-1 based fingerprint of the dataset or
//! of single values, with Redis's construction, so tests (ours and Redis's suite)
//! can compare datasets across restarts, replicas and COPY in one call.
//!
//! Two operations build it. `xor` folds SHA-1(data) into a digest, so the result does
//! not depend on order (set members, hash fields, keys). `mix` replaces the digest
//! with SHA-1(digest xor SHA-1(data)), so order matters (list elements, stream
//! entries). A key's digest mixes its name, its type and its value; a key with a TTL
//! also folds in a marker, as a hash field with a TTL does; a database's keys are
//! xored together after its number is mixed in.

use crate::keyspace::value::{ObjRef, ValueRef};
use crate::types::stream::StreamId;

pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    sha1_smol::Sha1::from(data).digest().bytes()
}

fn xor(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(data)) {
        *a ^= b;
    }
}

fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = sha1(d);
}

/// Redis's type numbers (OBJ_STRING … OBJ_STREAM), mixed in big-endian.
fn type_code(v: &ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Int(_) | ValueRef::Emb(_) | ValueRef::Raw(_) => 0,
        ValueRef::Obj(ObjRef::List(_)) => 1,
        ValueRef::Obj(ObjRef::Set(_)) => 2,
        ValueRef::Obj(ObjRef::ZSet(_)) => 3,
        ValueRef::Obj(ObjRef::Hash(_)) => 4,
        ValueRef::Obj(ObjRef::Stream(_)) => 6,
    }
}

fn score_text(score: f64) -> Vec<u8> {
    crate::util::numeric::format_f64(score).into_bytes()
}

/// Folds one value (and whether its key has a TTL) into `d`.
pub fn value_digest(d: &mut Digest, v: ValueRef<'_>, has_ttl: bool) {
    mix(d, &type_code(&v).to_be_bytes());
    match v {
        ValueRef::Int(n) => {
            let mut b = Vec::with_capacity(20);
            crate::util::numeric::format_i64(n, &mut b);
            mix(d, &b);
        }
        ValueRef::Emb(s) | ValueRef::Raw(s) => mix(d, s),
        ValueRef::Obj(ObjRef::List(l)) => {
            let mut b = Vec::new();
            l.for_each(|e| {
                b.clear();
                e.append_to(&mut b);
                mix(d, &b);
                true
            });
        }
        ValueRef::Obj(ObjRef::Set(s)) => s.for_each(|m| xor(d, m)),
        ValueRef::Obj(ObjRef::ZSet(z)) => z.for_each(|m, score| {
            let mut e = [0u8; 20];
            mix(&mut e, m);
            mix(&mut e, &score_text(score));
            xor(d, &e);
        }),
        ValueRef::Obj(ObjRef::Hash(h)) => h.for_each(|f, v| {
            let mut e = [0u8; 20];
            mix(&mut e, f);
            mix(&mut e, v);
            if h.expire_of(f).is_some() {
                xor(&mut e, b"!!hexpire!!");
            }
            xor(d, &e);
        }),
        ValueRef::Obj(ObjRef::Stream(s)) => {
            s.range_each(StreamId::MIN, StreamId::MAX, 0, false, |id, pairs| {
                mix(d, format!("{}.{}", id.ms, id.seq).as_bytes());
                for p in pairs {
                    mix(d, p);
                }
            });
        }
    }
    if has_ttl {
        xor(d, b"!!expire!!");
    }
}

/// The digest of one key (name and value), as DEBUG DIGEST folds it.
fn key_digest(key: &[u8], v: ValueRef<'_>, has_ttl: bool) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, key);
    value_digest(&mut d, v, has_ttl);
    d
}

/// The whole dataset's digest: all zeros when it is empty.
pub fn dataset_digest(ks: &crate::keyspace::Keyspace) -> Digest {
    let mut out = [0u8; 20];
    for (n, db) in ks.dbs.iter().enumerate() {
        if db.table.is_empty() {
            continue;
        }
        mix(&mut out, &(n as u32).to_be_bytes());
        let mut cursor = 0;
        loop {
            cursor = db.table.scan(cursor, |e| {
                // Folded with `xor` like any datum (Redis's xorDigest hashes what
                // it folds in), not xored in raw.
                xor(
                    &mut out,
                    &key_digest(e.key(), e.value(), e.expire().is_some()),
                );
            });
            if cursor == 0 {
                break;
            }
        }
    }
    out
}

pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_ignores_order_and_mix_keeps_it() {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(&mut a, b"x");
        xor(&mut a, b"y");
        xor(&mut b, b"y");
        xor(&mut b, b"x");
        assert_eq!(a, b);
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        mix(&mut a, b"x");
        mix(&mut a, b"y");
        mix(&mut b, b"y");
        mix(&mut b, b"x");
        assert_ne!(a, b);
    }
}
