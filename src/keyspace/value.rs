//! Values as the rest of the server sees them: an owned `Value` to store, a borrowed
//! `ValueRef` to read. How a value is laid out inside a key-table entry is hidden in
//! `entry.rs`; commands only ever see these types.

use crate::types::{hash::Hash, list::List, set::Set, stream::Stream, zset::ZSet};

/// Largest string stored inline in its key's entry; Redis reports such strings as
/// `embstr` (its OBJ_ENCODING_EMBSTR_SIZE_LIMIT).
pub const EMBSTR_MAX: usize = 44;

/// An owned value to store under a key.
#[derive(Debug)]
pub enum Value {
    /// A string that is the canonical form of a 64-bit integer (`int` encoding).
    Int(i64),
    /// A byte string: inline (`embstr`) when short, on the heap (`raw`) otherwise.
    Str(Vec<u8>),
    /// A byte string kept on the heap whatever its length: strings grown in place
    /// (APPEND, SETRANGE) are `raw` in Redis and keep spare capacity.
    RawStr(Vec<u8>),
    /// A non-string data type.
    Obj(Object),
}

/// The non-string data types, owned. Each lives in its own module under `types/`.
///
/// Every variant is its own box: a key entry stores the thin pointer and says in its
/// kind bits which type it points to (`entry.rs`), so a small zset's key pays for a
/// `ZSet`-sized block, not for the largest collection header.
#[derive(Debug)]
pub enum Object {
    ZSet(Box<ZSet>),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    Stream(Box<Stream>),
}

/// A borrowed collection, as a key's entry hands it out.
#[derive(Debug, Clone, Copy)]
pub enum ObjRef<'a> {
    ZSet(&'a ZSet),
    List(&'a List),
    Hash(&'a Hash),
    Set(&'a Set),
    Stream(&'a Stream),
}

/// A mutably borrowed collection (`EntryMut::object_mut`).
#[derive(Debug)]
pub enum ObjMut<'a> {
    ZSet(&'a mut ZSet),
    List(&'a mut List),
    Hash(&'a mut Hash),
    Set(&'a mut Set),
    Stream(&'a mut Stream),
}

impl Object {
    pub fn as_ref(&self) -> ObjRef<'_> {
        match self {
            Object::ZSet(z) => ObjRef::ZSet(z),
            Object::List(l) => ObjRef::List(l),
            Object::Hash(h) => ObjRef::Hash(h),
            Object::Set(s) => ObjRef::Set(s),
            Object::Stream(s) => ObjRef::Stream(s),
        }
    }

    pub fn as_mut(&mut self) -> ObjMut<'_> {
        match self {
            Object::ZSet(z) => ObjMut::ZSet(z),
            Object::List(l) => ObjMut::List(l),
            Object::Hash(h) => ObjMut::Hash(h),
            Object::Set(s) => ObjMut::Set(s),
            Object::Stream(s) => ObjMut::Stream(s),
        }
    }

    /// Number of elements.
    pub fn element_count(&self) -> usize {
        self.as_ref().element_count()
    }

    /// See [`ObjRef::free_effort`].
    pub fn free_effort(&self) -> usize {
        self.as_ref().free_effort()
    }
}

impl<'a> ObjRef<'a> {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            ObjRef::ZSet(_) => "zset",
            ObjRef::List(_) => "list",
            ObjRef::Hash(_) => "hash",
            ObjRef::Set(_) => "set",
            ObjRef::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            ObjRef::ZSet(z) => z.encoding(),
            ObjRef::List(l) => l.encoding(),
            ObjRef::Hash(h) => h.encoding(),
            ObjRef::Set(s) => s.encoding(),
            ObjRef::Stream(_) => "stream",
        }
    }

    /// Rough heap footprint (the boxed header included), for MEMORY USAGE and
    /// lazy-free decisions.
    pub fn heap_size(&self) -> usize {
        use std::mem::size_of;
        match self {
            ObjRef::ZSet(z) => size_of::<ZSet>() + z.heap_size(),
            ObjRef::List(l) => size_of::<List>() + l.heap_size(),
            // Both count their own header already.
            ObjRef::Hash(h) => h.heap_size(),
            ObjRef::Set(s) => s.heap_size(),
            ObjRef::Stream(s) => size_of::<Stream>() + s.heap_size(),
        }
    }

    /// A deep copy (COPY).
    pub fn duplicate(&self) -> Object {
        match self {
            ObjRef::ZSet(z) => Object::ZSet(Box::new((*z).clone())),
            ObjRef::List(l) => Object::List(Box::new((*l).clone())),
            ObjRef::Hash(h) => Object::Hash(Box::new((*h).clone())),
            ObjRef::Set(s) => Object::Set(Box::new((*s).clone())),
            ObjRef::Stream(s) => Object::Stream(Box::new((*s).clone())),
        }
    }

    /// The work freeing this value takes, as Redis's lazyfreeGetFreeEffort counts it:
    /// the elements of a hashtable set or hash and of a skiplist zset, the nodes of a
    /// quicklist, a stream's nodes plus, per consumer group, one and the first group's
    /// PEL size; 1 for the single-allocation encodings (listpack, intset). Redis counts
    /// a stream's radix-tree nodes; the nodes (blocks) themselves stand in for them.
    pub fn free_effort(&self) -> usize {
        match self {
            ObjRef::ZSet(z) if z.encoding() == "skiplist" => z.len(),
            ObjRef::List(l) if l.encoding() == "quicklist" => l.node_count(),
            ObjRef::Hash(h) if h.encoding() == "hashtable" => h.len(),
            ObjRef::Set(s) if s.encoding() == "hashtable" => s.len(),
            ObjRef::Stream(s) => {
                let groups = s.groups.len();
                let first_pel = s.groups.values().next().map_or(0, |g| g.pel.len());
                s.block_count() + groups * (1 + first_pel)
            }
            _ => 1,
        }
    }

    /// Number of elements.
    pub fn element_count(&self) -> usize {
        match self {
            ObjRef::ZSet(z) => z.len(),
            ObjRef::List(l) => l.node_count(),
            ObjRef::Hash(h) => h.len(),
            ObjRef::Set(s) => s.len(),
            ObjRef::Stream(s) => s.block_count(),
        }
    }
}

/// A borrowed view of a stored value.
#[derive(Debug, Clone, Copy)]
pub enum ValueRef<'a> {
    Int(i64),
    /// Inline short string.
    Emb(&'a [u8]),
    /// Heap string.
    Raw(&'a [u8]),
    Obj(ObjRef<'a>),
}

impl<'a> ValueRef<'a> {
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Int(_) | ValueRef::Emb(_) | ValueRef::Raw(_) => "string",
            ValueRef::Obj(o) => o.type_name(),
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            ValueRef::Int(_) => "int",
            ValueRef::Emb(_) => "embstr",
            ValueRef::Raw(_) => "raw",
            ValueRef::Obj(o) => o.encoding(),
        }
    }

    pub fn is_string(&self) -> bool {
        !matches!(self, ValueRef::Obj(_))
    }

    /// The string's bytes, rendering an integer as decimal. `None` for non-strings.
    pub fn string_bytes(&self) -> Option<std::borrow::Cow<'a, [u8]>> {
        match *self {
            ValueRef::Int(n) => {
                let mut v = Vec::with_capacity(20);
                crate::util::numeric::format_i64(n, &mut v);
                Some(std::borrow::Cow::Owned(v))
            }
            ValueRef::Emb(b) | ValueRef::Raw(b) => Some(std::borrow::Cow::Borrowed(b)),
            ValueRef::Obj(_) => None,
        }
    }

    /// Appends the string form to `out`; returns false for non-strings.
    pub fn append_string(&self, out: &mut Vec<u8>) -> bool {
        match *self {
            ValueRef::Int(n) => crate::util::numeric::format_i64(n, out),
            ValueRef::Emb(b) | ValueRef::Raw(b) => out.extend_from_slice(b),
            ValueRef::Obj(_) => return false,
        }
        true
    }

    /// Length in bytes of a string value (STRLEN); 0 for non-strings.
    pub fn string_len(&self) -> usize {
        match *self {
            ValueRef::Int(n) => {
                let mut v = Vec::with_capacity(20);
                crate::util::numeric::format_i64(n, &mut v);
                v.len()
            }
            ValueRef::Emb(b) | ValueRef::Raw(b) => b.len(),
            ValueRef::Obj(_) => 0,
        }
    }

    /// Bytes of heap owned by the value beyond its entry, for MEMORY USAGE.
    pub fn heap_size(&self) -> usize {
        match self {
            ValueRef::Int(_) | ValueRef::Emb(_) => 0,
            ValueRef::Raw(b) => b.len() + std::mem::size_of::<Vec<u8>>(),
            ValueRef::Obj(o) => o.heap_size(),
        }
    }
}

impl Value {
    /// Stores a string the way SET does: as an integer when it is one's canonical form.
    pub fn from_string(bytes: Vec<u8>) -> Value {
        if bytes.len() <= 20 {
            if let Some(n) = crate::util::numeric::parse_i64(&bytes) {
                return Value::Int(n);
            }
        }
        Value::Str(bytes)
    }

    pub fn from_slice(bytes: &[u8]) -> Value {
        match int_encoding(bytes) {
            Some(n) => Value::Int(n),
            None => Value::Str(bytes.to_vec()),
        }
    }
}

/// The integer a string value is stored as, if it is one (Redis's tryObjectEncoding:
/// at most 20 bytes, in canonical form).
pub fn int_encoding(bytes: &[u8]) -> Option<i64> {
    if bytes.len() <= 20 {
        crate::util::numeric::parse_i64(bytes)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    /// A key's entry holds one thin pointer per collection; what it points to is the
    /// type's own header, which every small collection pays for: keep them small.
    #[test]
    fn object_headers_stay_small() {
        assert_eq!(size_of::<super::Object>(), 16);
        assert_eq!(size_of::<super::ObjRef<'_>>(), 16);
        let sizes = [
            size_of::<super::ZSet>(),
            size_of::<super::Hash>(),
            size_of::<super::Set>(),
            size_of::<super::List>(),
        ];
        assert!(
            sizes[0] <= 24 && sizes[1] <= 32 && sizes[2] <= 32,
            "{sizes:?}"
        );
        assert!(sizes[3] <= 40, "{sizes:?}");
    }
}
