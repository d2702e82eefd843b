//! Values as the rest of the server sees them: an owned `Value` to store, a borrowed
//! `ValueRef` to read. How a value is laid out inside a key-table entry is hidden in
//! `entry.rs`; commands only ever see these types.

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
    Obj(Box<Object>),
}

/// The non-string data types. Each lives in its own module under `types/`.
#[derive(Debug)]
pub enum Object {
    ZSet(crate::types::zset::ZSet),
    List(crate::types::list::List),
    Hash(crate::types::hash::Hash),
    Set(crate::types::set::Set),
    // Boxed: a stream header is large, and every other collection would pay for it.
    Stream(Box<crate::types::stream::Stream>),
}

impl Object {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Object::ZSet(_) => "zset",
            Object::List(_) => "list",
            Object::Hash(_) => "hash",
            Object::Set(_) => "set",
            Object::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Object::ZSet(z) => z.encoding(),
            Object::List(l) => l.encoding(),
            Object::Hash(h) => h.encoding(),
            Object::Set(s) => s.encoding(),
            Object::Stream(_) => "stream",
        }
    }

    /// Rough heap footprint, for MEMORY USAGE and lazy-free decisions.
    pub fn heap_size(&self) -> usize {
        match self {
            Object::ZSet(z) => z.heap_size(),
            Object::List(l) => std::mem::size_of::<Object>() + l.heap_size(),
            Object::Hash(h) => h.heap_size(),
            Object::Set(s) => s.heap_size(),
            Object::Stream(s) => s.heap_size(),
        }
    }

    /// A deep copy (COPY).
    pub fn duplicate(&self) -> Object {
        match self {
            Object::ZSet(z) => Object::ZSet(z.clone()),
            Object::List(l) => Object::List(l.clone()),
            Object::Hash(h) => Object::Hash(h.clone()),
            Object::Set(s) => Object::Set(s.clone()),
            Object::Stream(s) => Object::Stream(s.clone()),
        }
    }

    /// Number of elements, used to decide whether freeing is done in the background.
    pub fn element_count(&self) -> usize {
        match self {
            Object::ZSet(z) => z.len(),
            Object::List(l) => l.node_count(),
            Object::Hash(h) => h.len(),
            Object::Set(s) => s.len(),
            Object::Stream(s) => s.block_count(),
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
    Obj(&'a Object),
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
        if bytes.len() <= 20 {
            if let Some(n) = crate::util::numeric::parse_i64(bytes) {
                return Value::Int(n);
            }
        }
        Value::Str(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    /// Every small collection's key pays for one boxed `Object`: keep it at 48 bytes
    /// (big parts of each type are boxed inside it).
    #[test]
    fn object_stays_small() {
        assert!(
            std::mem::size_of::<super::Object>() <= 48,
            "{}",
            std::mem::size_of::<super::Object>()
        );
    }
}
